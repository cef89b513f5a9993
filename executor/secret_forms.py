"""The forms of a secret string that redaction, the arguments check and the echo masks of
``executor/taint.py`` look for: the string itself, percent- and form encoding, base64 and
base64url at every byte alignment, HTML entities. Pure functions, no state but a cache.
"""

from __future__ import annotations

import base64
import functools
import html
import re
from collections.abc import Iterable

# Secrets shorter than this are not redacted (they would match everywhere); no stored credential is that short.
MIN_REDACTED_LENGTH = 3
# An encoded form shorter than this is not matched (base64 of a secret that starts mid-group
# keeps only the characters its own bytes decide: a short one would match everywhere).
MIN_ENCODED_LENGTH = 8


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text ``data`` yields wherever it sits in a longer encoded string: for each of
    the three byte alignments, the characters decided by ``data``'s bytes alone (a page that
    encodes ``"user:" + secret`` carries one of them). The characters at either end that mix in
    a neighbour's bits, and the padding, are taken by redaction's pattern (``pattern_piece``)."""
    cores = set()
    bits = 8 * len(data)
    for shift in (0, 1, 2):
        encoded = base64.b64encode(b"\0" * shift + data).decode()
        start = 8 * shift
        # Character i covers bits [6i, 6i + 6) of the stream: keep those inside ``data``'s bits.
        cores.add(encoded[-(-start // 6) : (start + bits) // 6])
    return cores


def _percent(value: str, safe: str, *, plus: bool = False) -> str:
    """``value`` percent-encoded (UTF-8, upper-case hex) but for ASCII letters, digits and ``safe``."""
    out = []
    for char in value:
        if char.isascii() and (char.isalnum() or char in safe):
            out.append(char)
        elif plus and char == " ":
            out.append("+")
        else:
            out.append("".join(f"%{byte:02X}" for byte in char.encode()))
    return "".join(out)


# The base64 and base64url forms of the known secrets: redaction also takes the character on
# each side of one (it carries a few of the secret's bits) and its padding.
_BASE64_FORMS: set[str] = set()
_BASE64_CHAR = "[A-Za-z0-9+/_-]"


@functools.lru_cache(maxsize=512)
def encoded_forms(value: str) -> frozenset[str]:
    """``value`` and its common encodings: percent-encoding (``encodeURIComponent``, Python's
    ``quote``, form encoding with ``+`` for spaces as ``URLSearchParams`` writes it), base64 and
    base64url at every alignment, HTML entities. Bounded: about a dozen strings per secret,
    computed once (``forget_context`` drops them)."""
    forms = {
        value,
        _percent(value, "-_.~"),  # Python's quote(safe="")
        _percent(value, "-_.~/:@"),
        _percent(value, "-_.!~*'()"),  # encodeURIComponent
        _percent(value, "-_.~", plus=True),  # quote_plus
        _percent(value, "*-._", plus=True),  # application/x-www-form-urlencoded (URLSearchParams)
        html.escape(value, quote=True),
        html.escape(value, quote=False),
    }
    encoded = set()
    for core in _base64_cores(value.encode()):
        encoded |= {core, core.replace("+", "-").replace("/", "_")}
    encoded = {form for form in encoded if len(form) >= MIN_ENCODED_LENGTH}
    _BASE64_FORMS.update(encoded)
    return frozenset(form for form in forms | encoded if len(form) >= MIN_REDACTED_LENGTH)


def pattern_piece(form: str) -> str:
    """The regular expression that matches ``form`` where redaction replaces it."""
    if form in _BASE64_FORMS:
        return f"{_BASE64_CHAR}?{re.escape(form)}{_BASE64_CHAR}?={{0,2}}"
    return re.escape(form)


def forms_of(values: Iterable[str]) -> list[str]:
    """Every form of ``values`` redaction replaces, longest first (a form inside another goes after it)."""
    found: set[str] = set()
    for value in values:
        if len(value) >= MIN_REDACTED_LENGTH:
            found |= encoded_forms(value)
    return sorted(found, key=len, reverse=True)


def is_base64_form(form: str) -> bool:
    """Whether ``form`` is a base64 form (its neighbours carry a few of the secret's bits)."""
    return form in _BASE64_FORMS


def forget() -> None:
    """The forms computed so far leave memory (a browser context with secrets closed)."""
    encoded_forms.cache_clear()
    _BASE64_FORMS.clear()
