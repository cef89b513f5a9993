"""``browser_login``: authenticate the current page with a vault credential.

The username and password are read from Vault here, inside the executor, and
typed into the page; they never leave this process (not in a Celery message,
the tool result, a log or an event). Three outcomes, per the contract:

* success: a normal result with the username masked;
* portal refusal: a normal result, with a masked diagnostic capture stored;
* not completed: ``isError``, category ``unprocessable`` (never an
  availability category, so nothing re-submits the password on its own), with
  one code per cause from ``executor/login_codes.py`` (the spec's
  ``browser.captcha_pending`` and ``browser.login_timeout``, and
  ``browser.origin_refused``, ``browser.credential_not_found``,
  ``browser.vault_unavailable``…). An infrastructure failure is never reported
  as a slow portal. A masked diagnostic capture is stored for every outcome
  that happened on the page (refusal, timeout, unfinished captcha, refused
  origin, no login form) when the budget allows.

Frame-exact typing: immediately before every fill, click, press or submit
that carries or submits credential material (username, password, one-time
code), the target element must be in the top document (selectors that enter
frames are refused, and an element in any frame is refused) and the top
document's security origin, as Chromium reports it over CDP (not its URL),
must be exactly one of the credential's ``origins``. The value is set on
that element alone (no keystrokes that could land wherever focus is), and
focus is checked again after each fill: focus that moved into a frame
stops the login before anything is submitted.

Everything, from the vault read to the diagnostic capture, fits in one
end-to-end budget (120 s) that started when the tool call started in the
worker: the executor receives what is left of it and counts from the
request's arrival (its wait for the browser included). The last
``capture_reserve`` seconds are kept for the diagnostic capture of a login
that ran out of time. Nothing is retried automatically. Captcha waits
happen only with a managed browser that solves, on that very session: a
``steel`` computer with ``solveCaptcha`` (Steel's captcha status API for the
session the executor created) or a ``browserbase`` one unless the run sets
``solveCaptcha: false`` (the console signals of the session's own page, read
over CDP); ``local`` and ``cdp`` wait for nothing and query nothing. The
backend picks the solver (executor/backends/).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import re
import struct
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from playwright.async_api import CDPSession, ConsoleMessage, ElementHandle, Frame, Locator, Page, Request

from core.clock import SYSTEM_CLOCK, Clock
from executor import link, taint
from executor.contracts import BrowserLoginArgs
from executor.link import ServerLink
from executor.login_codes import (
    BROWSER_ERROR,
    CAPTCHA_PENDING,
    CREDENTIAL_NOT_FOUND,
    LOGIN_FORM_NOT_FOUND,
    LOGIN_STEP_PENDING,
    LOGIN_TIMEOUT,
    LOGIN_UNCONFIRMED,
    ORIGIN_REFUSED,
    PAGE_CHANGED,
    PROVIDER_NOT_CONFIGURED,
    VAULT_UNAVAILABLE,
    not_completed,
)
from executor.masking import blurred
from vault_bridge.credentials import VaultRefused, VaultUnavailable, mask_username, portal_credential_read

logger = logging.getLogger(__name__)

# Kept for the diagnostic capture of a login that ran out of time: at most this much, a quarter of a short budget.
CAPTURE_RESERVE_SECONDS = 4.0
# Selector forms that reach into a frame (Playwright's frame-entering engine and its internals).
FRAME_PIERCING = re.compile(r"enter-frame|internal:|frame-locator", re.IGNORECASE)

USERNAME_SELECTORS = [
    "input[autocomplete='username']",
    "input[type='email']",
    "input[name*='user' i]",
    "input[id*='user' i]",
    "input[name*='login' i]",
    "input[id*='login' i]",
    "input[name*='email' i]",
    "input[id*='email' i]",
]
PASSWORD_SELECTORS = ["input[type='password']"]
SUBMIT_SELECTORS = [
    "button[type='submit']",
    "input[type='submit']",
    "button:has-text('Sign in')",
    "button:has-text('Log in')",
    "button:has-text('Login')",
    "button:has-text('Entrar')",
    "form button",
]
OTP_SELECTORS = [
    "input[autocomplete='one-time-code']",
    "input[name*='otp' i]",
    "input[name*='totp' i]",
    "input[id*='otp' i]",
]
# What a refusal looks like when it is tied to the login form: inside it, right before or after it,
# or named by its fields' aria-describedby / aria-errormessage (an alert elsewhere on a page is not).
ALERT_SELECTOR = "[role='alert'], [role='alertdialog'], .error, .errorlist, .alert-danger, .invalid-feedback"
# Kept after the capture for emptying the fields a login that did not sign in filled.
EMPTY_RESERVE_SECONDS = 1.0


class Budget:
    """One end-to-end deadline on ``clock`` (the system's monotonic clock unless a test moves its own)."""

    def __init__(self, seconds: float, *, clock: Clock = SYSTEM_CLOCK, start: float | None = None) -> None:
        self.clock = clock
        self.deadline = (clock.monotonic() if start is None else start) + seconds

    def before(self, seconds: float) -> Budget:
        """A budget on the same clock that ends ``seconds`` earlier."""
        return Budget(self.deadline - seconds - self.clock.monotonic(), clock=self.clock)

    def capture_reserve(self) -> float:
        """The part kept for a diagnostic capture: a quarter of what is left, at most ``CAPTURE_RESERVE_SECONDS``."""
        return min(CAPTURE_RESERVE_SECONDS, self.left() / 4)

    def left(self) -> float:
        return max(0.0, self.deadline - self.clock.monotonic())

    def ms(self, cap: float | None = None) -> float:
        left = self.left() * 1000
        return max(1.0, min(left, cap) if cap is not None else left)

    @property
    def spent(self) -> bool:
        return self.left() <= 0


class OutOfBudget(Exception):
    pass


class NotCompleted(Exception):
    """The login stopped with one of ``LOGIN_CODES`` (``what``: what happened, for the agent)."""

    def __init__(self, code: str, what: str, *, on_page: bool = True) -> None:
        super().__init__(code)
        self.code = code
        self.what = what
        # Whether the page shows something worth a diagnostic capture.
        self.on_page = on_page


# --- Captcha solvers -----------------------------------------------------------------


class NoSolver:
    """Self-hosted browsers, or managed ones without solving: nothing to wait for."""

    async def solving(self) -> bool:
        return False

    def close(self) -> None:
        return None


class SteelSolver:
    """Steel's captcha status API for one session: ``GET /v1/sessions/{id}/captchas/status``.

    The executor's steel backend builds it for the session it created (executor/backends/steel.py).
    """

    def __init__(self, *, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers

    async def solving(self) -> bool:
        try:
            async with httpx.AsyncClient(timeout=5.0) as client:
                response = await client.get(self.url, headers=self.headers)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError):
            # Unknown is treated as still solving: a password attempt is never spent blind.
            logger.warning("Steel captcha status unavailable; waiting")
            return True
        pages = data if isinstance(data, list) else data.get("pages", []) if isinstance(data, dict) else []
        return any(isinstance(p, dict) and p.get("isSolvingCaptcha") for p in pages)

    def close(self) -> None:
        return None


BROWSERBASE_STARTED = "browserbase-solving-started"
BROWSERBASE_FINISHED = "browserbase-solving-finished"


class ConsoleWatch:
    """Tracks Browserbase's solver signals on one page for its whole life."""

    def __init__(self, page: Page) -> None:
        self.active = False
        page.on("console", self.on_console)
        # A new document starts with no challenge being solved.
        page.on("framenavigated", lambda frame: self._navigated(page, frame))

    def on_console(self, message: ConsoleMessage) -> None:
        text = message.text.strip()
        if text == BROWSERBASE_STARTED:
            self.active = True
        elif text == BROWSERBASE_FINISHED:
            self.active = False

    def _navigated(self, page: Page, frame: Frame) -> None:
        if frame == page.main_frame:
            self.active = False


_WATCHES: weakref.WeakKeyDictionary[Page, ConsoleWatch] = weakref.WeakKeyDictionary()


def watch_console(page: Page) -> ConsoleWatch:
    """Start watching a page's console (the runtime does this when it opens the page)."""
    if page not in _WATCHES:
        _WATCHES[page] = ConsoleWatch(page)
    return _WATCHES[page]


class BrowserbaseSolver:
    """Browserbase's solver reports through the page console."""

    def __init__(self, page: Page) -> None:
        self.watch = watch_console(page)

    async def solving(self) -> bool:
        return self.watch.active

    def close(self) -> None:
        return None


class SolverNotConfigured(NoSolver):
    """The run asks for captcha solving (``solveCaptcha: true``) and the computer's managed
    session was created with its provider's solver off: browser_login stops before typing."""


Solver = NoSolver | SteelSolver | BrowserbaseSolver


async def wait_for_solver(solver: Solver, budget: Budget, settle: float = 0.0) -> bool:
    """True once the solver is not solving; False if the budget ran out first."""
    if isinstance(solver, NoSolver):
        return True
    if settle:
        await asyncio.sleep(min(settle, budget.left()))
    while await solver.solving():
        if budget.left() < 0.25:
            return False
        await asyncio.sleep(min(0.25, budget.left()))
    return True


# --- Helpers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Secret:
    username: str
    password: str
    totp_secret: str | None
    origins: tuple[str, ...]


def normal_origin(text: str) -> str | None:
    """``scheme://host:port`` with the default port made explicit; None for an opaque or odd origin."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"


def origin_allowed(origin: str | None, origins: tuple[str, ...]) -> bool:
    """Exactly one of the credential's (normalised) origins: never a prefix, a suffix or a look-alike."""
    return origin is not None and origin in origins


class OriginRefused(Exception):
    """Credential material would reach an element outside the credential's origins."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PageChanged(Exception):
    """The checked element left the page (a navigation) before the action."""


# Set the value on this element alone: no keystrokes, which would go wherever focus is.
_SET_VALUE = """(el, value) => {
  if (!el.isConnected) return "detached";
  const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
  el.focus();
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
  el.dispatchEvent(new InputEvent("input", {bubbles: true, composed: true, inputType: "insertText"}));
  el.dispatchEvent(new Event("change", {bubbles: true}));
  return "ok";
}"""
_FOCUS_IN_FRAME = """el => {
  const active = el.ownerDocument.activeElement;
  return !!active && ["IFRAME", "FRAME", "OBJECT", "EMBED", "FENCEDFRAME", "PORTAL"].includes(active.tagName);
}"""
_TEXT_INPUT = "el => el instanceof HTMLTextAreaElement || (el instanceof HTMLInputElement && !['hidden', 'file', 'checkbox', 'radio', 'submit', 'button', 'image', 'reset'].includes(el.type))"


class Guard:
    """Checks, at the moment of each action, where credential material would go.

    The top document's security origin is read from Chromium over CDP
    (``Page.getFrameTree`` and the document's own origin in an isolated world),
    never from the URL, and
    must be exactly one of the credential's origins; the target element must
    be in that top document (an element in any frame is refused).
    """

    def __init__(self, page: Page, cdp: CDPSession, origins: tuple[str, ...]) -> None:
        self.page = page
        self.cdp = cdp
        self.origins = origins

    async def top_origin(self) -> str | None:
        """The top document's origin, as the browser reports it, or None when it is opaque or unclear.

        Two reports must agree: the frame tree's ``securityOrigin`` and the origin of the
        document itself read in an isolated world (where page scripts cannot redefine it).
        The second sees what the first misses, such as a document sandboxed by its CSP
        (an opaque origin on an ordinary URL).
        """
        tree = await self.cdp.send("Page.getFrameTree")
        frame = tree["frameTree"]["frame"]
        world = await self.cdp.send(
            "Page.createIsolatedWorld", {"frameId": frame["id"], "worldName": "ram-origin-check"}
        )
        reply = await self.cdp.send(
            "Runtime.evaluate",
            {"expression": "self.origin", "contextId": world["executionContextId"], "returnByValue": True},
        )
        document_origin = normal_origin(str(reply.get("result", {}).get("value", "")))
        frame_origin = normal_origin(str(frame.get("securityOrigin", "")))
        return document_origin if document_origin == frame_origin else None

    async def check_top(self, what: str) -> None:
        if not origin_allowed(await self.top_origin(), self.origins):
            raise OriginRefused(
                f"The page is not on one of the credential's origins, so the {what} was not typed or submitted."
            )

    async def check(self, element: ElementHandle, what: str) -> None:
        try:
            connected = bool(await element.evaluate("el => el.isConnected"))
            frame = await element.owner_frame()
        except Exception:  # noqa: BLE001 - its document is gone: a navigation happened
            raise PageChanged from None
        if not connected:
            raise PageChanged
        if frame is None or frame != self.page.main_frame:
            raise OriginRefused(
                f"The {what} field is inside a frame; credentials are typed only into the top page of one of "
                "the credential's origins."
            )
        await self.check_top(what)

    async def fill(self, element: ElementHandle, value: str, what: str) -> None:
        await self.check(element, what)
        if not await element.evaluate(_TEXT_INPUT):
            raise OriginRefused(f"The {what} field is not a text input; nothing was typed into it.")
        # Tainted (masked, kept for redaction) before the value lands.
        await taint.mark_filled(self.page, element, value, one_time=what == "one-time code")
        if await element.evaluate(_SET_VALUE, value) != "ok":
            raise PageChanged
        # Focus is checked again: focus moved into a frame means the next key would land there.
        try:
            in_frame = await element.evaluate(_FOCUS_IN_FRAME)
        except Exception:  # noqa: BLE001 - a navigation started by the page; the next action re-checks
            return
        if in_frame:
            with contextlib.suppress(Exception):
                await element.evaluate(_SET_VALUE, "")
            raise OriginRefused(
                f"Focus moved into a frame while the {what} was typed; the login stopped and nothing was submitted."
            )


def totp(secret: str, at: float | None = None, digits: int = 6, step: int = 30) -> str:
    """RFC 6238 time-based one-time password (SHA-1)."""
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    counter = int((time.time() if at is None else at) // step)
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    code = (struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF) % (10**digits)
    return str(code).zfill(digits)


async def _first_visible(page: Page, selectors: list[str], budget: Budget) -> Locator | None:
    """The first visible element matching the heuristic selectors, in order."""
    for selector in selectors:
        locator = page.locator(selector)
        for index in range(await locator.count()):
            candidate = locator.nth(index)
            if await candidate.is_visible():
                return candidate
        if budget.spent:
            raise OutOfBudget
    return None


async def _field(page: Page, selector: str | None, fallbacks: list[str], budget: Budget) -> Locator | None:
    if selector is not None:
        locator = page.locator(selector).first
        try:
            await locator.wait_for(state="visible", timeout=budget.ms(10_000))
        except Exception:  # noqa: BLE001
            if budget.spent:
                raise OutOfBudget from None
            return None
        return locator
    return await _first_visible(page, fallbacks, budget)


async def _read_secret(account_id: str, credential_id: str, grant: str, budget: Budget) -> Secret | None:
    """The credential from the vault (None when absent); a vault that fails or does not answer in
    the budget is ``browser.vault_unavailable``, never a slow portal."""
    try:
        credential = await asyncio.wait_for(
            sync_to_async(portal_credential_read, thread_sensitive=False)(
                account_id=account_id, credential_id=credential_id, grant=grant
            ),
            timeout=budget.left(),
        )
    except (VaultUnavailable, VaultRefused, TimeoutError) as exc:
        logger.warning("vault read for browser_login failed: %s", type(exc).__name__)
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault did not give the credential (unreachable, refused or too slow); nothing was typed.",
            on_page=False,
        ) from None
    if credential is None:
        return None
    return Secret(
        username=credential.username,
        password=credential.password,
        totp_secret=credential.totp_secret or None,
        origins=tuple(origin for origin in map(normal_origin, credential.origins) if origin is not None),
    )


async def credential_for_origin(
    *, account_id: str, credential_id: str, grant: str, origin: str, budget: Budget
) -> Secret:
    """A credential of the account whose ``origins`` include exactly ``origin`` (a site's sign-in
    prompt, ``auth_answer``): read with the call's one-use grant like browser_login's, and checked
    by the same rule. Raises ``NotCompleted`` (nothing was sent anywhere) otherwise."""
    if not grant:
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault could not be asked for the credential (no read grant came with this call).",
            on_page=False,
        )
    secret = await _read_secret(account_id, credential_id, grant, budget)
    if secret is None:
        raise NotCompleted(
            CREDENTIAL_NOT_FOUND, "no portal credential with that id is stored for this account.", on_page=False
        )
    if not origin_allowed(normal_origin(origin), secret.origins):
        raise NotCompleted(
            ORIGIN_REFUSED,
            f"the credential's origins do not include {origin}, the origin that asks; it was not sent there.",
            on_page=False,
        )
    return secret


async def capture_diagnostic(
    page: Page,
    *,
    server: ServerLink,
    budget: Budget,
    cdp: CDPSession | None = None,
    fields: list[ElementHandle] | tuple[ElementHandle, ...] = (),
) -> str | None:
    """A screenshot with every tainted field masked by the page's rendering (``executor/taint.py``,
    the one masking path of every picture) before it is taken; as well, every password field and
    every field the login filled (``fields``) are blurred in the image before it is stored.

    Taken over CDP (``Page.captureScreenshot``): it works while a navigation is pending (a slow
    portal), where the page's scripting waits for the commit. The whole capture is bounded by the
    budget; if the masks cannot be re-applied, nothing is stored.
    """
    if budget.left() < 1.0:
        return None
    try:
        return await asyncio.wait_for(_capture(page, server, budget, cdp, fields), timeout=budget.left())
    except Exception as exc:  # noqa: BLE001 - the login result does not fail because of its diagnostic
        logger.warning("diagnostic capture failed: %s", type(exc).__name__)
        return None


async def _capture(
    page: Page,
    server: ServerLink,
    budget: Budget,
    cdp: CDPSession | None,
    fields: list[ElementHandle] | tuple[ElementHandle, ...] = (),
) -> str | None:
    own = cdp is None
    session = cdp if cdp is not None else await page.context.new_cdp_session(page)
    try:
        await taint.ensure_masked(page)
        boxes = await _password_boxes(session) + await _filled_boxes(fields, budget)
        metrics = await session.send("Page.getLayoutMetrics")
        shot = await session.send("Page.captureScreenshot", {"format": "png"})
    finally:
        if own:
            _detach_later(session)
    # Boxes are in CSS pixels; the image may be in device pixels.
    png = blurred(base64.b64decode(shot["data"]), boxes, css_width=float(metrics["cssLayoutViewport"]["clientWidth"]))
    if budget.spent:
        return None
    artifact_id = await server.artifact_store(kind="diagnostic", data=png)
    return str(artifact_id)


async def _filled_boxes(
    fields: list[ElementHandle] | tuple[ElementHandle, ...], budget: Budget
) -> list[tuple[float, float, float, float]]:
    """The viewport boxes of the fields the login filled that are still rendered. A field whose
    document is gone is in no image; a field that does not answer in time stops the capture."""
    boxes = []
    for element in fields:
        try:
            box = await asyncio.wait_for(element.bounding_box(), timeout=min(2.0, budget.left()))
        except TimeoutError:
            raise
        except Exception:  # noqa: BLE001, S112 - its document was replaced: not on the screen
            continue
        if box:
            boxes.append((box["x"], box["y"], box["width"], box["height"]))
    return boxes


async def _password_boxes(cdp: CDPSession) -> list[tuple[float, float, float, float]]:
    """The viewport boxes (x, y, width, height) of the top document's password inputs."""
    document = await cdp.send("DOM.getDocument", {"depth": 0})
    found = await cdp.send(
        "DOM.querySelectorAll", {"nodeId": document["root"]["nodeId"], "selector": "input[type='password']"}
    )
    boxes = []
    for node_id in found.get("nodeIds", []):
        try:
            model = await cdp.send("DOM.getBoxModel", {"nodeId": node_id})
        except Exception as exc:  # noqa: BLE001 - a field that is not rendered is not in the image
            if "box model" in str(exc).lower():
                continue
            raise
        quad = model["model"]["border"]
        xs, ys = quad[0::2], quad[1::2]
        boxes.append((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)))
    return boxes


def _result(content: str, *, artifact_id: str | None = None) -> dict[str, Any]:
    """A completed login: signed in, or refused by the portal (normal results, never ``isError``)."""
    result: dict[str, Any] = {"content": content, "isError": False}
    if artifact_id is not None:
        result["artifact_id"] = artifact_id
    return {"tool_result": result}


TIMED_OUT = "the time budget ran out before it finished (the portal was slow or still loading)."
CAPTCHA_UNSOLVED = "the browser was still solving a CAPTCHA when the time budget ran out."


# --- The filled fields, the form and the verdict ----------------------------------------

REFUSED = (
    "The portal refused the credential: it was submitted and the login form answered with a refusal. "
    "Do not retry the same credential; ask for another one or a person."
)


@dataclass
class Filled:
    """The elements this login typed into and what it typed: the verdict reads their fate, and an
    answer other than success empties them (and any copy of what was typed in the top document)."""

    fields: list[ElementHandle] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)
    password: ElementHandle | None = None
    # What the login form's fields were described by before the submit (aria-describedby texts):
    # help text that was already there is no refusal.
    described: list[str] = field(default_factory=list)

    def add(self, element: ElementHandle, value: str) -> None:
        # Recorded before the value is set: a login stopped in the middle still empties it.
        self.fields.append(element)
        self.typed.append(value)


_SHOWN = (
    "el => !!el && el.isConnected && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden'"
)
# The fate of a filled element: still in the document, rendered, its type, its value.
_FATE = f"""el => ({{connected: el.isConnected, shown: ({_SHOWN})(el), type: String(el.type || ''), value: String(el.value || '')}})"""
# A refusal tied to the login form of ``field``: aria-invalid on its fields, an alert inside the form
# (or right before or after it), or the text of an element its fields name in aria-errormessage, or in
# aria-describedby when that text was not there before the submit (``described``). Also returns the
# aria-describedby texts, the baseline taken before the submit.
_SIGNALS = f"""(field, [alerts, described]) => {{
  const shown = {_SHOWN};
  const text = el => ((el && (el.innerText || el.textContent)) || '').trim();
  const form = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'form').get.call(field);
  const fields = form ? [...form.elements] : [field];
  const texts = [];
  let signal = false;
  for (const f of fields) {{
    const invalid = (f.getAttribute('aria-invalid') || 'false').toLowerCase();
    if (shown(f) && invalid !== 'false' && invalid !== '') signal = true;
    for (const [attribute, always] of [['aria-errormessage', true], ['aria-describedby', false]]) {{
      for (const id of (f.getAttribute(attribute) || '').split(/\\s+/).filter(Boolean)) {{
        const named = document.getElementById(id);
        if (!shown(named) || !text(named)) continue;
        if (!always) texts.push(text(named));
        if (always || !described.includes(text(named))) signal = true;
      }}
    }}
  }}
  if (form) {{
    const near = [...form.querySelectorAll(alerts), form.previousElementSibling, form.nextElementSibling];
    if (near.some(el => el && el.matches(alerts) && shown(el) && text(el))) signal = true;
  }}
  return {{signal, described: texts}};
}}"""
# Where each form that carries the filled fields would send them: its method and resolved action, the
# submitter's formmethod/formaction for its own form. Read through the prototypes' getters, so a field
# named "action" or "method" (which shadows the form's property) cannot hide them.
_SUBMISSIONS = """(_element, [submitter, ...fields]) => {
  const get = (proto, name, el) => Object.getOwnPropertyDescriptor(proto, name).get.call(el);
  const formOf = el => el instanceof HTMLInputElement ? get(HTMLInputElement.prototype, 'form', el)
    : el instanceof HTMLTextAreaElement ? get(HTMLTextAreaElement.prototype, 'form', el)
    : el instanceof HTMLButtonElement ? get(HTMLButtonElement.prototype, 'form', el) : null;
  const control = !!submitter && ((submitter instanceof HTMLButtonElement && get(HTMLButtonElement.prototype, 'type', submitter) === 'submit')
    || (submitter instanceof HTMLInputElement && ['submit', 'image'].includes(get(HTMLInputElement.prototype, 'type', submitter))));
  const own = control ? formOf(submitter) : null;
  const forms = new Set(fields.map(formOf).filter(Boolean));
  if (own) forms.add(own);
  const sends = [...forms].map(form => {
    let method = get(HTMLFormElement.prototype, 'method', form);
    let action = get(HTMLFormElement.prototype, 'action', form);
    if (form === own && submitter.hasAttribute('formmethod')) method = submitter.formMethod;
    if (form === own && submitter.hasAttribute('formaction')) action = submitter.formAction;
    return {method: String(method).toLowerCase(), action: String(action)};
  });
  return {sends, control: !!own && fields.some(f => formOf(f) === own)};
}"""
_CLEAR = """el => {
  if (!el.isConnected) return;
  const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
  Object.getOwnPropertyDescriptor(proto, "value").set.call(el, "");
  el.removeAttribute("value");
  el.dispatchEvent(new InputEvent("input", {bubbles: true, composed: true, inputType: "deleteContent"}));
  el.dispatchEvent(new Event("change", {bubbles: true}));
}"""
_VALUES = "els => els.map(el => [String(el.value || ''), el.getAttribute('value') || ''])"
_CLEAR_AT = f"(els, indices) => indices.forEach(i => ({_CLEAR})(els[i]))"
_PASSWORD_SHOWN = f"() => [...document.querySelectorAll('input')].some(el => el.type === 'password' && ({_SHOWN})(el))"


async def _fate(element: ElementHandle | None) -> dict[str, Any]:
    """Whether ``element`` is still in its document, rendered, its type and value (gone: its document went)."""
    gone = {"connected": False, "shown": False, "type": "", "value": ""}
    if element is None:
        return gone
    try:
        return dict(await element.evaluate(_FATE))
    except Exception:  # noqa: BLE001 - its document was replaced (a navigation): the element is gone
        return gone


async def _signals(field_element: ElementHandle, described: list[str]) -> dict[str, Any]:
    try:
        return dict(await field_element.evaluate(_SIGNALS, [ALERT_SELECTOR, described]))
    except Exception:  # noqa: BLE001 - gone meanwhile: nothing tied to it
        return {"signal": False, "described": []}


async def check_submission(guard: Guard, fields: list[ElementHandle], submitter: ElementHandle | None) -> bool:
    """Refuse (``OriginRefused``) a form that would send the fields with a method other than POST or
    to an action off the credential's origins. True when ``submitter`` is a submit control of the
    filled fields' own form (a click on anything else submits nothing by itself)."""
    reply = await fields[0].evaluate(_SUBMISSIONS, [submitter, *fields])
    for send in reply["sends"]:
        if send["method"] != "post":
            raise OriginRefused(
                f"The login form would send the credential with method {send['method'].upper()} (GET puts it in "
                "the page's address, where history, tabs and replies carry it), so nothing was submitted."
            )
        if not origin_allowed(normal_origin(send["action"]), guard.origins):
            raise OriginRefused(
                "The login form's action (or its submit button's formaction) is not on one of the credential's "
                "origins, so nothing was submitted."
            )
    return bool(reply["control"])


async def _shown_password_anywhere(page: Page) -> bool:
    """A password field rendered in any frame of the page."""
    for frame in page.frames:
        try:
            if await frame.evaluate(_PASSWORD_SHOWN):
                return True
        except Exception:  # noqa: BLE001, S112 - a frame that went away shows nothing
            continue
    return False


async def _copies(page: Page, typed: list[str]) -> list[int]:
    """The inputs of the top document whose value (or value attribute) is something this login typed."""
    wanted = {value for value in typed if value}
    try:
        found = await page.main_frame.eval_on_selector_all("input, textarea", _VALUES)
    except Exception:  # noqa: BLE001 - the document is being replaced: none to see
        return []
    return [index for index, (value, attribute) in enumerate(found) if value in wanted or attribute in wanted]


async def _answered(page: Page, filled: Filled) -> bool:
    """A script-driven form has answered: the filled password field left, was hidden or changed type,
    or the form shows a refusal tied to it."""
    fate = await _fate(filled.password)
    if filled.password is None or not fate["shown"] or fate["type"] != "password":
        return True
    return bool((await _signals(filled.password, filled.described))["signal"])


async def _verdict(page: Page, guard: Guard, filled: Filled, secret: Secret, budget: Budget) -> bool:
    """True: signed in; False: refused by the portal; raises ``NotCompleted`` otherwise.

    Success: the filled password field is gone or hidden (and no longer holds the password), no
    password field is rendered in any frame, no filled field still holds what was typed, no field
    of the top document holds a copy of it, and no one-time-code field asks for more. Refusal: the
    login form — the same one, or one re-rendered on the credential's origins — shows a signal
    tied to it. A hidden password field still filled is a step pending.
    """
    password = await _fate(filled.password)
    form_field: ElementHandle | None = filled.password if password["shown"] else None
    if form_field is None and origin_allowed(await guard.top_origin(), secret.origins):
        form_field = await _shown_password_field(page)
    if form_field is not None and (await _signals(form_field, filled.described))["signal"]:
        return False
    if budget.spent:
        raise OutOfBudget
    # A filled element still in the document with what was typed in it (a detached one keeps its value).
    fates = [await _fate(f) for f in filled.fields]
    still = [fate["connected"] and fate["value"] == typed for fate, typed in zip(fates, filled.typed, strict=True)]
    if password["connected"] and not password["shown"] and password["value"] == secret.password:
        raise NotCompleted(
            LOGIN_STEP_PENDING,
            "the portal hid the password field, still filled, and asks for a further step (a second factor "
            "or a one-time code).",
        )
    signed_in = (
        not password["shown"]
        and not any(still)
        and not await _shown_password_anywhere(page)
        and not await _copies(page, [secret.password])
    )
    otp = await _first_visible(page, OTP_SELECTORS, budget)
    if signed_in and otp is None:
        return True
    if signed_in or (otp is not None and form_field is None):
        raise NotCompleted(LOGIN_STEP_PENDING, "the portal asks for a one-time code that browser_login cannot give.")
    raise NotCompleted(
        LOGIN_UNCONFIRMED,
        "the page shows neither a sign-in nor a refusal tied to the login form (the password field is still "
        "shown, or a field still holds what was typed).",
    )


async def _shown_password_field(page: Page) -> ElementHandle | None:
    passwords = page.main_frame.locator("input[type='password']")
    for index in range(min(await passwords.count(), 20)):
        if await passwords.nth(index).is_visible():
            return await passwords.nth(index).element_handle(timeout=2_000)
    return None


async def _empty(page: Page, filled: Filled, budget: Budget) -> None:
    """Empty every field this login filled, and every field of the top document holding a copy of
    what it typed (value or value attribute); bounded, never raises."""

    async def empty() -> None:
        for element in filled.fields:
            with contextlib.suppress(Exception):
                await element.evaluate(_CLEAR)
        indices = await _copies(page, filled.typed)
        if indices:
            with contextlib.suppress(Exception):
                await page.main_frame.eval_on_selector_all("input, textarea", _CLEAR_AT, indices)

    if not filled.fields:
        return
    try:
        await asyncio.wait_for(empty(), timeout=max(budget.left(), 0.25))
    except Exception as exc:  # noqa: BLE001 - the answer does not wait on a page that does not answer
        logger.warning("browser_login could not empty the fields it filled: %s", type(exc).__name__)


# --- The tool --------------------------------------------------------------------------


async def browser_login(
    page: Page,
    args: BrowserLoginArgs,
    *,
    solver: Solver,
    account_id: str,
    computer_id: str,
    grant: str = "",
    budget: Budget | None = None,
    server: ServerLink | None = None,
) -> dict[str, Any]:
    """Log in with the credential; ``budget`` is what is left of the call's end-to-end budget.

    ``solver`` comes from the computer's browser backend for this page and the run's settings;
    ``server`` is the executor's link to the server (the diagnostic's artifact goes there).
    Every answer but success is given after the diagnostic capture and after the fields the login
    filled were emptied, both inside the budget."""
    budget = budget or Budget(settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS)
    # The login works until the reserve; what is left then is for the capture and the emptying.
    work = budget.before(budget.capture_reserve() + min(EMPTY_RESERVE_SECONDS, budget.left() / 8))
    cdp: CDPSession | None = None
    # What the login is waiting for when the budget runs out (``captcha``: the solver).
    progress: dict[str, str] = {}
    filled = Filled()
    stopped: NotCompleted | None = None
    # Its own selectors follow the value-blind rule of every selector-taking tool (before the
    # vault is read): an answer that waits or not on a value-dependent selector is an oracle.
    for selector in (args.usernameSelector, args.passwordSelector, args.submitSelector):
        await taint.check_selector(page, selector)
    try:
        cdp = await page.context.new_cdp_session(page)
        signed_in_as = await asyncio.wait_for(
            _login(page, cdp, args, account_id, computer_id, grant, work, solver, progress, filled),
            timeout=work.left() + 0.25,
        )
        if signed_in_as is not None:
            _detach_later(cdp)
            return _result(f"Logged in as {signed_in_as}.")
    except OriginRefused as exc:
        stopped = NotCompleted(ORIGIN_REFUSED, exc.message + " Nothing more was typed or submitted.")
    except PageChanged:
        stopped = NotCompleted(PAGE_CHANGED, "the page changed before the credential was typed; nothing was submitted.")
    except NotCompleted as exc:
        stopped = exc
    except (TimeoutError, OutOfBudget):
        # The budget ran out: while the managed browser was solving a captcha, or on the portal.
        if progress.get("waiting") == "captcha":
            stopped = NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED)
        else:
            stopped = NotCompleted(LOGIN_TIMEOUT, TIMED_OUT)
    except asyncio.CancelledError:
        raise  # a person took control: the runtime reports it
    except Exception as exc:  # noqa: BLE001 - whatever broke, nothing is proven about the credential
        logger.warning("browser_login did not complete: %s", type(exc).__name__)
        stopped = NotCompleted(BROWSER_ERROR, f"the browser failed during the login ({type(exc).__name__}).")
    finally:
        solver.close()
    try:
        artifact_id = None
        if stopped is None or stopped.on_page:
            # First the capture (the filled fields blurred with the password fields), then the emptying.
            artifact_id = await capture_diagnostic(
                page,
                server=server if server is not None else link.in_process(computer_id),
                budget=budget.before(min(EMPTY_RESERVE_SECONDS, budget.left() / 8)),
                cdp=cdp,
                fields=filled.fields,
            )
        await _empty(page, filled, budget)
        if stopped is None:
            return _result(REFUSED, artifact_id=artifact_id)
        return {"tool_result": not_completed(stopped.code, stopped.what, artifact_id=artifact_id)}
    finally:
        if cdp is not None:
            # Detaching waits while a navigation is pending: never on the budget's time.
            _detach_later(cdp)


_DETACHING: set[asyncio.Task[None]] = set()


def _detach_later(cdp: CDPSession) -> None:
    async def detach() -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(cdp.detach(), timeout=30)

    task = asyncio.ensure_future(detach())
    _DETACHING.add(task)
    task.add_done_callback(_DETACHING.discard)


def frame_piercing(selector: str | None) -> bool:
    return selector is not None and FRAME_PIERCING.search(selector) is not None


async def _fill(guard: Guard, filled: Filled, element: ElementHandle, value: str, what: str) -> None:
    """Type ``value`` into ``element`` (checked at that moment), recorded as filled first."""
    filled.add(element, value)
    await guard.fill(element, value, what)


async def _login(
    page: Page,
    cdp: CDPSession,
    args: BrowserLoginArgs,
    account_id: str,
    computer_id: str,
    grant: str,
    budget: Budget,
    solver: Solver,
    progress: dict[str, str],
    filled: Filled,
) -> str | None:
    """The masked username once signed in; None when the portal refused; raises otherwise."""
    if any(frame_piercing(s) for s in (args.usernameSelector, args.passwordSelector, args.submitSelector)):
        raise OriginRefused("A selector that enters a frame was refused; credentials are typed only into the top page.")
    if isinstance(solver, SolverNotConfigured):
        raise NotCompleted(
            PROVIDER_NOT_CONFIGURED,
            "the run asks for captcha solving, and this computer's managed browser session was created with "
            "its provider's captcha solver off (the computer's solve_captcha option); nothing was read or typed.",
        )
    if not grant:
        # The executor holds no Vault token of its own: without the call's grant nothing is read.
        raise NotCompleted(
            VAULT_UNAVAILABLE,
            "the vault could not be asked for the credential (no read grant came with this call); nothing was typed.",
        )
    secret = await _read_secret(account_id, args.credentialId, grant, budget)
    if secret is None:
        raise NotCompleted(
            CREDENTIAL_NOT_FOUND, "no portal credential with that id is stored for this account; nothing was typed."
        )
    guard = Guard(page, cdp, secret.origins)
    if not origin_allowed(await guard.top_origin(), secret.origins):
        raise OriginRefused(
            "This credential may not be typed into the current page's origin. Navigate to the portal's login page first."
        )
    username_locator = await _field(page, args.usernameSelector, USERNAME_SELECTORS, budget)
    password_locator = await _field(page, args.passwordSelector, PASSWORD_SELECTORS, budget)
    if password_locator is None:
        raise NotCompleted(LOGIN_FORM_NOT_FOUND, "no password field was found on the current page; nothing was typed.")
    # Fixed elements: a password is typed only into the password input that was checked.
    password_field = await password_locator.element_handle(timeout=budget.ms(10_000))
    username_field = await username_locator.element_handle(timeout=budget.ms(10_000)) if username_locator else None
    if not await password_field.evaluate("el => el instanceof HTMLInputElement && el.type === 'password'"):
        raise NotCompleted(
            LOGIN_FORM_NOT_FOUND, "passwordSelector must select a password input (type=password); nothing was typed."
        )
    fields = [f for f in (username_field, password_field) if f is not None]
    submit = await _field(page, args.submitSelector, SUBMIT_SELECTORS, budget)
    control = await submit.element_handle(timeout=budget.ms(10_000)) if submit is not None else None
    # Before anything is typed: the form sends with POST to one of the credential's origins.
    await check_submission(guard, fields, control)
    # Before the submit: never spend a password attempt while a challenge is up.
    progress["waiting"] = "captcha"
    if not await wait_for_solver(solver, budget):
        raise NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED + " Nothing was submitted.")
    progress["waiting"] = "portal"
    filled.password = password_field
    if username_field is not None:
        await _fill(guard, filled, username_field, secret.username, "username")
    await _fill(guard, filled, password_field, secret.password, "password")
    if budget.spent:
        raise OutOfBudget
    # Again right before the submit: typing may have made the page's script change the form.
    await check_submission(guard, fields, control)
    filled.described = list((await _signals(password_field, []))["described"])
    answered = lambda: _answered(page, filled)  # noqa: E731
    if control is not None:
        # A control that is not the form's submit control (a toggle, a cell) is clicked too; then only
        # the fields' fate can make the answer a sign-in.
        await guard.check(control, "submit")
        clicked = control
        await _settled_after(
            page, budget, answered, lambda: clicked.click(timeout=budget.ms(10_000), no_wait_after=True)
        )
    else:
        # No submit control: submit the password's form as a click would (validation and submit events).
        await guard.check(password_field, "password")
        await _settled_after(
            page, budget, answered, lambda: password_field.evaluate("el => el.form ? el.form.requestSubmit() : null")
        )
    # After the submit: the post-credential challenge is the common case.
    if not isinstance(solver, NoSolver):
        progress["waiting"] = "captcha"
        if not await wait_for_solver(solver, budget, settle=0.5):
            raise NotCompleted(CAPTCHA_PENDING, CAPTCHA_UNSOLVED)
        progress["waiting"] = "portal"
        await _settled_after(page, budget, answered, None)
    if secret.totp_secret:
        otp = await _first_visible(page, OTP_SELECTORS, budget)
        if otp is not None:
            # Checked again right before the code: a post-submit redirect may have left the origins.
            code_field = await otp.element_handle(timeout=budget.ms(10_000))
            await guard.check(code_field, "one-time code")
            await check_submission(guard, [code_field], None)
            await _fill(guard, filled, code_field, totp(secret.totp_secret), "one-time code")
            await guard.check(code_field, "one-time code")

            async def code_answered() -> bool:
                return not (await _fate(code_field))["shown"]

            await _settled_after(
                page,
                budget,
                code_answered,
                lambda: code_field.evaluate(
                    "el => el.form ? el.form.requestSubmit() : el.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))"
                ),
            )
    if await _verdict(page, guard, filled, secret, budget):
        return mask_username(secret.username)
    return None


NAVIGATION_START_WINDOW = 1.5


async def _settled_after(
    page: Page,
    budget: Budget,
    answered: Callable[[], Awaitable[bool]],
    action: Callable[[], Awaitable[Any]] | None,
) -> None:
    """Do ``action``, then wait for a navigation it starts to commit and load.

    A navigation that has not finished when the budget ends is a login
    timeout (a slow portal or one still loading), never a refusal.
    """
    started, committed = asyncio.Event(), asyncio.Event()

    def on_request(request: Request) -> None:
        if request.is_navigation_request() and request.frame == page.main_frame:
            started.set()

    def on_navigated(frame: Frame) -> None:
        if frame == page.main_frame:
            committed.set()

    page.on("request", on_request)
    page.on("framenavigated", on_navigated)
    try:
        if action is not None:
            await action()
        try:
            await asyncio.wait_for(started.wait(), timeout=min(NAVIGATION_START_WINDOW, budget.left()))
        except TimeoutError:
            # No navigation: a script-driven form answers in place. Wait for a clear signal (the
            # filled password field gone, hidden or changed, a refusal tied to its form, or a late
            # navigation); none in budget is a timeout.
            while not started.is_set():
                if await answered():
                    return
                if budget.left() < 0.1:
                    raise OutOfBudget from None
                await asyncio.sleep(min(0.2, budget.left()))
        try:
            await asyncio.wait_for(committed.wait(), timeout=budget.left())
            await page.wait_for_load_state("load", timeout=budget.ms())
        except Exception:  # noqa: BLE001 - any wait that ends with the budget is a timeout
            raise OutOfBudget from None
    finally:
        page.remove_listener("request", on_request)
        page.remove_listener("framenavigated", on_navigated)
