"""The value-blind selector grammar of ``executor/taint.py``: plain CSS whose matches cannot
depend on what a field holds, proven on the hostile corpus (tests/executor/test_taint.py). While a
tainted value is on the page, selector-taking tools accept only selectors of this grammar.
"""

from __future__ import annotations

import re

# Pseudo-classes whose matching depends only on the document's structure, attributes other
# than the value, focus and checkedness (checkboxes, radios, options: never a text field's value).
BLIND_PSEUDO = frozenset(
    {
        "first-child",
        "last-child",
        "only-child",
        "first-of-type",
        "last-of-type",
        "only-of-type",
        "root",
        "scope",
        "enabled",
        "disabled",
        "checked",
        "required",
        "optional",
        "read-only",
        "read-write",
        "focus",
        "focus-within",
        "focus-visible",
        "link",
        "any-link",
        "defined",
        "visible",  # Playwright's: layout only
    }
)
NTH_PSEUDO = frozenset({"nth-child", "nth-last-child", "nth-of-type", "nth-last-of-type"})
LIST_PSEUDO = frozenset({"not", "is", "where"})
_IDENT = re.compile(r"-?(?:[_a-zA-Z]|[^\x00-\x7f])(?:[_a-zA-Z0-9-]|[^\x00-\x7f])*")
_STRING = re.compile(r"\"[^\"\\\n]*\"|'[^'\\\n]*'")
_NTH = re.compile(r"\s*(?:odd|even|[-+]?\d*n(?:\s*[-+]\s*\d+)?|[-+]?\d+)\s*", re.IGNORECASE)
# Attribute selectors compare a whole value or one whitespace-separated word, never a part.
BLIND_ATTRIBUTE_OPERATORS = ("~=", "=")


class _NotBlind(Exception):
    pass


class _Parser:
    """A strict parser of the value-blind grammar: anything it does not know is refused."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _ws(self) -> bool:
        start = self.pos
        while self._peek() in (" ", "\t", "\n"):
            self.pos += 1
        return self.pos > start

    def _ident(self) -> str:
        match = _IDENT.match(self.text, self.pos)
        if match is None:
            raise _NotBlind
        self.pos = match.end()
        return match.group(0)

    def selector_list(self, *, relative: bool = False, closing: str = "") -> None:
        while True:
            self._ws()
            self.complex(relative=relative)
            self._ws()
            if self._peek() == ",":
                self.pos += 1
                continue
            if self._peek() == closing:
                return
            raise _NotBlind

    def complex(self, *, relative: bool) -> None:
        if relative and self._peek() in (">", "+", "~"):
            self.pos += 1
            self._ws()
        self.compound()
        while True:
            spaced = self._ws()
            if self._peek() in (">", "+", "~"):
                self.pos += 1
                self._ws()
                self.compound()
            elif spaced and self._peek() not in ("", ",", ")"):
                self.compound()
            else:
                return

    def compound(self) -> None:
        items = 0
        if self._peek() == "*":
            self.pos += 1
            items += 1
        elif _IDENT.match(self.text, self.pos):
            self._ident()
            items += 1
        while True:
            char = self._peek()
            if char == "#":
                self.pos += 1
                self._ident()
            elif char == ".":
                self.pos += 1
                self._ident()
            elif char == "[":
                self.attribute()
            elif char == ":":
                self.pseudo()
            else:
                break
            items += 1
        if not items:
            raise _NotBlind

    def attribute(self) -> None:
        self.pos += 1
        self._ws()
        name = self._ident().lower()
        if name == "value":
            raise _NotBlind
        self._ws()
        if self._peek() == "]":
            self.pos += 1
            return
        for operator in BLIND_ATTRIBUTE_OPERATORS:
            if self.text.startswith(operator, self.pos):
                self.pos += len(operator)
                break
        else:
            raise _NotBlind
        self._ws()
        match = _STRING.match(self.text, self.pos) or _IDENT.match(self.text, self.pos)
        if match is None:
            raise _NotBlind
        self.pos = match.end()
        self._ws()
        if self._peek() in ("i", "s", "I", "S") and self.text[self.pos + 1 : self.pos + 2] in (" ", "]"):
            self.pos += 1
            self._ws()
        if self._peek() != "]":
            raise _NotBlind
        self.pos += 1

    def pseudo(self) -> None:
        self.pos += 1
        if self._peek() == ":":
            raise _NotBlind  # pseudo-elements
        name = self._ident().lower()
        if self._peek() != "(":
            if name not in BLIND_PSEUDO:
                raise _NotBlind
            return
        self.pos += 1
        if name in NTH_PSEUDO:
            match = _NTH.match(self.text, self.pos)
            if match is None:
                raise _NotBlind
            self.pos = match.end()
        elif name in LIST_PSEUDO:
            self.selector_list(closing=")")
        elif name == "has":
            self.selector_list(relative=True, closing=")")
        else:
            raise _NotBlind
        if self._peek() != ")":
            raise _NotBlind
        self.pos += 1


def value_blind(selector: str) -> bool:
    """Whether ``selector`` is in the value-blind grammar: plain CSS of type, ``*``, ``#id``,
    ``.class``, attribute presence or whole-value (``=``) or word (``~=``) match on any attribute
    but ``value``, the combinators (descendant, ``>``, ``+``, ``~``), ``:nth-*(an+b)``, the
    structural, state and focus pseudo-classes of ``BLIND_PSEUDO``, and ``:not``/``:is``/``:where``/
    ``:has`` of the same grammar. No Playwright engine (``text=``, ``role=``, ``internal:*``,
    ``xpath``, ``>>`` chains), no ``:has-text``/``:text``, no value pseudo-class (``:placeholder-shown``,
    ``:valid``, ``:invalid``, ``:in-range``, ``:out-of-range``, ``:empty``, ``:blank``,
    ``:autofill``…), no substring attribute match, no escapes."""
    if "\\" in selector or not selector.strip():
        return False
    parser = _Parser(selector)
    try:
        parser.selector_list()
    except _NotBlind:
        return False
    return parser.pos == len(selector)


def refusal_message(selector_kind: str = "selector") -> str:
    return (
        f"This {selector_kind} could depend on what a field holds, and the page holds a secret (a password field, "
        "a one-time code, or a field browser_login or a person filled): until it is gone, selectors are plain "
        'CSS only — tag, #id, .class, [attr], [attr="whole value"] or [attr~=word] (never on value), '
        "combinators, :nth-child() and the structural pseudo-classes, :not/:is/:where/:has of the same. "
        "role=, text=, internal:*, xpath, :has-text(), [value...], ^= $= *= and :placeholder-shown, "
        ":valid, :invalid, :in-range, :out-of-range, :empty are refused now."
    )
