"""Tainted fields: the page's elements that hold a secret, and what follows from them.

A field is tainted while it may hold a secret the agent must never observe: every field
``browser_login`` filled, every field that is or ever was ``type=password`` on its document,
fields with ``autocomplete`` ``current-password``, ``new-password`` or ``one-time-code``, fields a
person typed into on the screen (a credential pause, a takeover), and the nodes a page swaps in
for any of them (a show-password toggle that replaces the input with a clone: same ``name`` or
``id``, or the same place in the same parent).

Tracking is by node identity, in a private isolated world of every frame (``WORLD``: page
scripts cannot see or reach it) that the executor installs over a CDP session of its own
before any page script runs (``Page.addScriptToEvaluateOnNewDocument``, also run at once in the
current document). The world keeps the tainted elements themselves for the document's life,
and a MutationObserver there taints password/one-time-code fields as they appear or change
type, and the clones that replace tainted nodes. ``tainted_nodes`` names them by CDP backend
node id. Shadow roots are scanned and observed like the document: open ones as the world finds
them (added nodes, a press or click passing through them before the page's handlers, every
capture, a walk of the document at most once a second after input events and every 2 s),
closed ones found through CDP (``DOM.getDocument`` with ``pierce``) and handed to the world
(``adopt_closed_roots``: once a document has loaded, before a capture at most every 5 s).
A cross-site frame that runs in a process of its own (an out-of-process iframe) is another CDP
target: the executor opens a session on it (as soon as it navigates) and installs the same world.

Three consequences, each through this module only:

* **Masking at the rendering.** A tainted element carries ``-webkit-text-security: disc`` as an
  ``!important`` inline declaration, set from the isolated world and set again by its observer
  the moment the page changes the element's ``style`` (an inline ``!important`` wins over every
  stylesheet of the page). The page's own rendering shows discs whatever the field's current
  ``type``, so every picture — the screen feed to every subscriber, the ``screenshot`` tool, the
  captures after steps and on pauses, ``browser_login``'s diagnostic — is masked by one path and
  stays in step with scrolling. ``ensure_masked`` re-scans every frame right before a capture.
  What the page echoes — a text node or a field value that shows a secret — is masked too
  (``echo_spans``): the world asks the executor through a binding of its own about each text at
  least as long as the shortest secret (the values never enter the page), covers it until the
  answer, then covers the secret's characters with a custom highlight (``HIGHLIGHT``); a field
  whose value holds one is tainted.
* **Value-blind selectors** (``value_blind``, ``check_selector``). While a tainted value is on the
  active page (``held``), selector-taking tools accept only a plain-CSS grammar whose matches
  cannot depend on what a field holds; anything else is refused with reason
  ``selector_value_dependent`` (the agent's ``browser.selector_value_dependent``).
* **Redaction** (``redact``). The secret strings the executor typed (``browser_login``'s username,
  password and one-time code, ``auth_answer``'s username and password) and what a person typed
  into a field on the screen (read from the field in the isolated world after each input) are
  kept in this process's memory for the life of the browser context, never logged, and replaced
  by ``[redacted]`` in every string the executor sends (replies and errors, observations,
  titles, URLs, tab and dialog texts, frame URLs), raw and in their common encodings
  (``encoded_forms``: percent-encoding, form encoding, base64 and base64url at every alignment,
  HTML entities).

Its parts: one tab's state and its CDP sessions (``PageTaint``, ``executor/taint_page.py``), the
isolated world's script (``executor/taint_world.py``), the value-blind grammar
(``executor/blind_selectors.py``), the forms of a secret (``executor/secret_forms.py``) and the
secret store with redaction (``executor/redaction.py``); the names callers use are reached
through this module.

What ``browser_login`` (``executor/login.py``) calls: ``await taint.mark_filled(page, element,
value)`` right before it sets a credential value on ``element`` (username, password, one-time
code). ``auth_answer`` calls ``remember_secrets``. The runtime calls ``install`` for every page it
adopts, ``mark_focused`` around a person's keys and text, and ``forget_page`` when a tab closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterable
from typing import Any

from playwright.async_api import ElementHandle, Page

from executor import secret_forms
from executor.blind_selectors import refusal_message, value_blind
from executor.control import ControlError
from executor.ops import FailureReason
from executor.redaction import (
    ARGUMENTS_REASON as ARGUMENTS_REASON,
)
from executor.redaction import (
    REDACTED as REDACTED,
)
from executor.redaction import (
    STORE,
    secrets_of,
)
from executor.redaction import (
    check_arguments as check_arguments,
)
from executor.redaction import (
    known_secrets as known_secrets,
)
from executor.redaction import (
    redact as redact,
)
from executor.redaction import (
    redact_text as redact_text,
)
from executor.redaction import (
    supplies_secret as supplies_secret,
)
from executor.secret_forms import MIN_ENCODED_LENGTH as MIN_ENCODED_LENGTH  # re-exported
from executor.secret_forms import encoded_forms as encoded_forms  # re-exported
from executor.secret_forms import forms_of as forms_of  # re-exported
from executor.taint_page import BINDING as BINDING  # re-exported
from executor.taint_page import HIGHLIGHT as HIGHLIGHT  # re-exported
from executor.taint_page import LOAD_WAIT_MS as LOAD_WAIT_MS  # re-exported
from executor.taint_page import MARK_EVENT, PageTaint
from executor.taint_page import TAINT_SCRIPT as TAINT_SCRIPT  # re-exported
from executor.taint_page import WORLD as WORLD  # re-exported
from executor.taint_page import echo_spans as echo_spans  # re-exported

logger = logging.getLogger(__name__)

REASON: FailureReason = "selector_value_dependent"
# A key pressed while the focused element is a tainted field holding a value (other than Tab/Escape).
KEY_REASON: FailureReason = "secret_field_focused"
# ``DOM.getDocument`` with ``pierce`` takes about 1.4 s on a page of 10,000 elements: before a
# capture, closed roots are looked for again at most this often (and after every load).
CLOSED_ROOTS_EVERY_SECONDS = 5.0
# The keys that only move focus away or dismiss: allowed on a focused secret field.
KEYS_OFF_A_SECRET = frozenset({"Tab", "Escape"})


_PAGES: weakref.WeakKeyDictionary[Page, PageTaint] = weakref.WeakKeyDictionary()
_WATCHING: set[asyncio.Task[None]] = set()


def of(page: Page) -> PageTaint:
    if page not in _PAGES:
        _PAGES[page] = PageTaint(page)
    return _PAGES[page]


def field_look(page: Page) -> PageTaint | None:
    """What the live stream asks before it shows a frame of ``page`` (``executor/feed.py``'s
    ``FieldLook``), or None while no secret is watched for there (nothing to ask)."""
    tracked = _PAGES.get(page)
    return tracked if tracked is not None and tracked.watching else None


async def install(page: Page) -> None:
    """Start tracking a tab (the runtime does this for every page it adopts, before it acts)."""
    await of(page).install()


def forget_page(page: Page) -> None:
    """A closed tab: its tracking ends. Its secrets stay with its browser context (the site may
    keep the session, and another tab may show them): ``forget_context`` drops them."""
    _PAGES.pop(page, None)


def forget_context(context: Any) -> None:
    """A browser context that closes (the computer's browser stops or is reset): its secrets leave memory."""
    secrets_ = STORE.pop(context, None)
    if secrets_ is not None:
        secrets_.clear()
    # The encoded forms computed for any context's secrets go too (the others' are computed again).
    secret_forms.forget()


def remember_secrets(page: Page, values: Iterable[str], *, one_time: bool = False) -> None:
    """Secret strings typed into ``page``, kept in memory for its browser context's life (one-time
    codes: the newest few), for redaction, the window check and the arguments check; the
    context's tabs then mask what shows them (at once when called on the event loop)."""
    secrets_of(page).add(values, one_time=one_time)
    with contextlib.suppress(RuntimeError):  # no running loop: the next capture or check does it
        task = asyncio.get_running_loop().create_task(watch_context(page))
        _WATCHING.add(task)
        task.add_done_callback(_WATCHING.discard)


async def mark_filled(page: Page, element: ElementHandle, value: str, *, one_time: bool = False) -> None:
    """``element`` is about to receive the secret ``value``: taint it (masked before the value
    lands) and keep ``value`` for redaction. Call it right before setting the value."""
    remember_secrets(page, [value], one_time=one_time)
    await install(page)
    await watch_context(page)
    await element.dispatch_event(MARK_EVENT)


async def mark_focused(page: Page, *, learn: bool = False) -> None:
    """Taint the focused editable field of every frame (a person is typing into it). With
    ``learn`` (after the person's input landed), what the person has typed so far into each such
    field of the tab is read in the isolated world and remembered for its browser context like
    the stored secrets (never logged): the latest non-empty value of each field."""
    await install(page)
    await of(page).each_frame("globalThis.__ramTaint.markFocused()")
    if not learn:
        return
    secrets_ = secrets_of(page)
    for pairs in await of(page).each_frame("globalThis.__ramTaint.typed()"):
        for pair in pairs or []:
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
                secrets_.typed_by_person(pair[0], pair[1])
    await watch_context(page)


async def watch_context(page: Page) -> None:
    """The secrets of ``page``'s browser context may have changed: every tab of it watches for
    the new ones in what its pages show, and masks what shows them now."""
    for other in list(_PAGES):
        if other.context is page.context and not other.is_closed():
            with contextlib.suppress(Exception):
                await of(other).watch()


async def held(page: Page) -> bool:
    """A tainted value is on ``page``'s current document (see ``PageTaint.held``)."""
    await install(page)
    return await of(page).held()


async def check_key(page: Page, key: str) -> None:
    """Refuse (ControlError ``secret_field_focused``) a key other than Tab or Escape
    while the focused element is a tainted field holding a value: a key would edit or submit the
    secret in place, and the page's reaction would tell what it holds."""
    if key in KEYS_OFF_A_SECRET:
        return
    await install(page)
    if await of(page).focused_held():
        raise ControlError(
            "The focused field holds a secret (a password, a one-time code, or a value browser_login or a person "
            "filled): only Tab and Escape are pressed there. Move focus with click or Tab first.",
            KEY_REASON,
        )


async def tainted_nodes(page: Page) -> list[int]:
    """The backend node ids of ``page``'s tainted elements (every frame)."""
    await install(page)
    return await of(page).tainted_nodes()


async def ensure_masked(page: Page) -> None:
    """Right before a capture: every frame scanned again and every tainted element's mask set,
    then one rendering frame, so the picture shows the masks."""
    await install(page)
    await of(page).adopt_closed_roots(at_most_every=CLOSED_ROOTS_EVERY_SECONDS)
    await of(page).each_frame("globalThis.__ramTaint.rescan()")
    await of(page).watch()  # the texts and field values that show a secret: masked too
    with contextlib.suppress(Exception):
        await of(page).rendered()


# --- Value-blind selectors (the grammar: executor/blind_selectors.py) ------------------------


async def check_selector(page: Page, selector: str | None) -> None:
    """Refuse (ControlError ``selector_value_dependent``) a selector outside the value-blind grammar
    while a tainted value is on ``page``; anything goes otherwise."""
    if selector is None or value_blind(selector):
        return
    if await held(page):
        raise ControlError(refusal_message(), REASON)
