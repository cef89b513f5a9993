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


# The tool error code (``ToolResult.code``, ``result.code`` of a failed run) of a selector refused
# because it could depend on what a field holds: while the page holds a secret (a filled password
# or one-time-code field, a field browser_login or a person filled), click, type, wait_for,
# extract_text and upload take value-blind CSS only (tag, #id, .class, [attr], [attr="whole
# value"], [attr~=word] — never on value —, combinators, :nth-child() and the structural
# pseudo-classes); role=, text=, internal:*, xpath, :has-text(), [value...], ^= $= *= and value
# pseudo-classes such as :invalid and :placeholder-shown are refused (category ``invalid``).
SELECTOR_VALUE_DEPENDENT = "browser.selector_value_dependent"

# The tool error code of an action refused because one of its arguments (a URL, typed text, a
# selector, a dialog's answer, anything the agent supplied) carries a secret the computer's
# browser holds (a credential browser_login, auth_answer or a person typed), in any case and in
# the encoded forms redaction knows. Nothing was done; the message never says which argument.
# An honest agent never knows a secret (category ``invalid``).
SECRET_IN_ARGUMENTS = "browser.secret_in_arguments"

# The tool error code of a ``press`` refused because the focused field holds a secret: only Tab
# and Escape are pressed there (another key would edit or submit the secret in place). Move the
# focus with ``click`` or Tab first (category ``invalid``).
SECRET_FIELD_FOCUSED = "browser.secret_field_focused"
