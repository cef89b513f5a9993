"""Exceptions of the SDK. None of them carries a credential, a ticket or an invite."""

from __future__ import annotations

from typing import Any


class RamError(Exception):
    """Base class of every error the SDK raises."""


class UnsafeOrigin(RamError):
    """The base URL is not an HTTPS origin (or plain HTTP on local loopback)."""


class RamApiError(RamError):
    """The server refused a request: ``status`` and its ``{"error": message}`` body."""

    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {}


class InvalidDescriptor(RamError):
    """An intervention descriptor failed the checks: do not present it to anyone."""


class VisualError(RamError):
    """The visual session could not be created or opened, or the stream broke the protocol."""


class ControlError(RamError):
    """A control gesture is not allowed now, or its result is uncertain (never retry it blindly)."""
