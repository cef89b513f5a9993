"""Named domain errors.

Services and selectors raise a named error (``RunNotFound``,
``ContinuationConflict``...) with a readable message and, where the caller can
act on it, extra fields (``continued_run_id``). Each class has a stable
``code``. Nothing here knows HTTP: each edge maps the *category* an error
belongs to (the base classes below) to its own answer in one table —
``core.api.REST_STATUS`` for REST, ``runs.mcp_tools`` for MCP, ``core.pages`` for
the human pages, the gateway for the WebSocket handshake.

A new error is a subclass of one category, named after what happened, in its
app's ``errors.py``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DomainError(Exception):
    """A refused or illegal request; ``message`` is safe to show, ``extra`` fields go on the wire."""

    code: ClassVar[str] = "error"
    message_default: ClassVar[str] = "The request was refused."

    def __init__(self, message: str | None = None, **extra: Any) -> None:
        self.message = message or self.message_default
        self.extra = extra
        super().__init__(self.message)


# --- Categories: every named error is a subclass of exactly one ---------------


class InvalidInput(DomainError):
    code = "invalid"
    message_default = "Invalid request."


class PayloadTooLarge(InvalidInput):
    """Invalid input that is too big (REST answers 413)."""

    code = "too_large"
    message_default = "The request's body is too large."


class UnsupportedMediaType(InvalidInput):
    """Invalid input of a content type that is not accepted (REST answers 415)."""

    code = "unsupported_media_type"
    message_default = "That content type is not accepted."


class NotAuthenticated(DomainError):
    code = "not_authenticated"
    message_default = "Authentication required."


class Forbidden(DomainError):
    code = "forbidden"
    message_default = "Forbidden."


class NotFound(DomainError):
    code = "not_found"
    message_default = "Not found."


class Conflict(DomainError):
    code = "conflict"
    message_default = "The request conflicts with the current state."


class Unprocessable(DomainError):
    code = "unprocessable"
    message_default = "The request cannot be processed."


class TooMany(DomainError):
    code = "too_many"
    message_default = "Too many requests."


class UpstreamFailed(DomainError):
    code = "upstream_failed"
    message_default = "An outside service answered with an error."


class Unavailable(DomainError):
    code = "unavailable"
    message_default = "A service this needs is unavailable."


CATEGORIES: tuple[type[DomainError], ...] = (
    InvalidInput,
    NotAuthenticated,
    Forbidden,
    NotFound,
    Conflict,
    Unprocessable,
    TooMany,
    UpstreamFailed,
    Unavailable,
)


def category_of(exc: DomainError) -> type[DomainError]:
    for cls in type(exc).__mro__:
        if cls in CATEGORIES:
            return cls
    raise TypeError(f"{type(exc).__name__} belongs to no error category.")


def status_for(exc: DomainError, table: dict[type[DomainError], int]) -> int:
    """The status an edge's ``table`` gives ``exc``'s category (the most specific class listed wins)."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    raise TypeError(f"{type(exc).__name__} has no entry in this edge's table.")
