"""Contract base types, each defined once: closed models, UTF-16 lengths, id patterns."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

COMPUTER_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
# One rule with the Vault paths (vault_bridge): an id accepted anywhere can always be stored and read.
CREDENTIAL_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"


class Closed(BaseModel):
    """Every wire model: unknown fields are refused, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def utf16_length(text: str) -> int:
    """The string's length as JavaScript counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def utf16_max(limit: int) -> AfterValidator:
    """A validator bounding a string to ``limit`` UTF-16 code units."""

    def check(text: str) -> str:
        if utf16_length(text) > limit:
            raise ValueError(f"must be at most {limit} UTF-16 units")
        return text

    return AfterValidator(check)


def exactly(expected: Any) -> BeforeValidator:
    """A before-validator refusing look-alikes (``1`` for ``True``, ``True`` or ``1.0`` for ``1``)."""

    def check(value: Any) -> Any:
        if type(value) is not type(expected) or value != expected:
            raise ValueError(f"must be exactly {expected!r}")
        return value

    return BeforeValidator(check)


def strict_number(low: float, high: float) -> Any:
    """A JSON number within ``[low, high]``: no strings, booleans, infinities or NaN."""
    return Field(strict=True, ge=low, le=high, allow_inf_nan=False)


def _whole(value: Any) -> Any:
    # JSON has one kind of number: 3.0 is the integer 3 (as JSON Schema's "integer" says), 3.5 is not.
    return int(value) if isinstance(value, float) and value.is_integer() else value


def json_integer(low: int, high: int) -> Any:
    """A JSON integer within ``[low, high]`` (``3.0`` included): no strings, booleans or fractions."""
    return (Field(strict=True, ge=low, le=high), BeforeValidator(_whole))


LiteralTrue = Annotated[Literal[True], exactly(True)]
VersionOne = Annotated[Literal[1], exactly(1)]
ComputerId = Annotated[str, StringConstraints(pattern=COMPUTER_ID_RE, min_length=1, max_length=128)]
CredentialId = Annotated[str, StringConstraints(pattern=CREDENTIAL_ID_RE)]


def _check_absolute_http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s?#]+(/[^\s]*)?$", value):
        raise ValueError("must be an absolute http(s) URL")
    return value


AbsoluteUrl = Annotated[str, AfterValidator(_check_absolute_http_url)]
