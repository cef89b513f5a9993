"""The secret strings a browser context holds, and the backstop over what the executor sends.

The strings the executor typed (``browser_login``'s username, password and one-time code,
``auth_answer``'s username and password) and what a person typed into a field on the screen are
kept here, in this process's memory, for the life of the browser context (never logged), and
replaced by ``[redacted]`` in every string the executor sends (``redact``), raw and in the forms
of ``executor/secret_forms.py``; an agent action whose arguments carry one is refused
(``check_arguments``). ``executor/taint.py`` feeds and reads the store.
"""

from __future__ import annotations

import collections
import html
import re
import weakref
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, unquote_plus

from playwright.async_api import Page

from executor.control import ControlError
from executor.ops import FailureReason
from executor.secret_forms import MIN_REDACTED_LENGTH, forms_of, pattern_piece

REDACTED = "[redacted]"
# The one-time codes a browser context keeps for redaction (its newest; each TOTP login adds one).
# Usernames and passwords are never dropped while the context lives.
MAX_ONE_TIME_CODES = 8
# What a person typed into a field on the screen, remembered for redaction: the fields of a browser
# context (the newest), each with its latest non-empty value, up to this many characters.
MAX_TYPED_FIELDS = 32
MAX_TYPED_LENGTH = 512
# An agent action whose arguments carry a known secret (any form redaction knows): nothing is done.
ARGUMENTS_REASON: FailureReason = "secret_in_arguments"


class Secrets:
    """The secret strings typed into one browser context (any of its tabs), kept for redaction,
    the window check and the arguments check until the context closes: usernames and passwords
    for its whole life, one-time codes in a small ring of their own (never at their expense)."""

    def __init__(self) -> None:
        self.lasting: list[str] = []
        self.codes: collections.deque[str] = collections.deque(maxlen=MAX_ONE_TIME_CODES)
        # Field token -> what a person last typed there (a value replaces the field's earlier one:
        # the prefixes typed key by key are not kept).
        self.typed: collections.OrderedDict[str, str] = collections.OrderedDict()

    def add(self, values: Iterable[str], *, one_time: bool = False) -> None:
        for value in values:
            if not value or len(value) < MIN_REDACTED_LENGTH or value in self.lasting:
                continue
            if one_time:
                if value not in self.codes:
                    self.codes.append(value)
            else:
                self.lasting.append(value)

    def typed_by_person(self, token: str, value: str) -> None:
        self.typed.pop(token, None)
        self.typed[token] = value
        while len(self.typed) > MAX_TYPED_FIELDS:
            self.typed.popitem(last=False)

    def all(self) -> list[str]:
        typed = [v for v in self.typed.values() if len(v) >= MIN_REDACTED_LENGTH and v not in self.lasting]
        return [*self.lasting, *self.codes, *typed]

    def clear(self) -> None:
        self.lasting.clear()
        self.codes.clear()
        self.typed.clear()


STORE: weakref.WeakKeyDictionary[Any, Secrets] = weakref.WeakKeyDictionary()


def secrets_of(page: Page) -> Secrets:
    """The secrets of ``page``'s browser context (shared by all its tabs, open or closed)."""
    owner = page.context
    if owner not in STORE:
        STORE[owner] = Secrets()
    return STORE[owner]


def known_secrets() -> list[str]:
    """Every secret string of every browser context, in every form redaction replaces, longest
    first (a secret inside another goes after it)."""
    return forms_of(value for secrets_ in list(STORE.values()) for value in secrets_.all())


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _forms(text: str) -> set[str]:
    """``text`` as given, percent-decoded and HTML-unescaped (once and twice, ``+`` as a space or
    not): the browser may decode what the agent encoded (a URL's ``%61`` becomes ``a``, a page's
    ``&#97;``) before a reply carries it. Encoded forms of a secret (base64) are matched as they are."""
    forms = {text}
    for _ in range(2):
        forms |= {unquote(f) for f in forms} | {unquote_plus(f) for f in forms} | {html.unescape(f) for f in forms}
    return {f.casefold() for f in forms}


def supplies_secret(arguments: Any) -> bool:
    """Whether any string in ``arguments`` (keys and values, at any depth) contains a known secret
    in any form redaction knows, case-insensitively."""
    wanted = [s.casefold() for s in known_secrets()]
    if not wanted:
        return False
    return any(secret in form for text in _strings(arguments) for form in _forms(text) for secret in wanted)


ARGUMENTS_MESSAGE = (
    "This action was refused and nothing was done: its arguments carry a secret this computer's browser holds "
    "(a credential browser_login, auth_answer or a person typed). Secrets are never supplied by the agent."
)


def check_arguments(arguments: Any) -> None:
    """Refuse (ControlError ``secret_in_arguments``) an agent action whose arguments carry a known
    secret. The answer never says which argument or where: an honest agent never knows a secret,
    and a guessing one learns nothing more than that one of its strings matched."""
    if supplies_secret(arguments):
        raise ControlError(ARGUMENTS_MESSAGE, ARGUMENTS_REASON)


def redact_text(text: str, wanted: list[str] | None = None) -> str:
    wanted = known_secrets() if wanted is None else wanted
    if not wanted or not text:
        return text
    folded = text.casefold()
    if not any(secret.casefold() in folded for secret in wanted):
        return text
    pattern = re.compile("|".join(pattern_piece(s) for s in wanted), re.IGNORECASE)
    return pattern.sub(REDACTED, text)


def redact(value: Any, wanted: list[str] | None = None) -> Any:
    """``value`` (a JSON-like structure) with every known secret string replaced in its strings."""
    wanted = known_secrets() if wanted is None else wanted
    if not wanted:
        return value
    if isinstance(value, str):
        return redact_text(value, wanted)
    if isinstance(value, dict):
        return {redact(k, wanted): redact(v, wanted) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, wanted) for v in value]
    return value
