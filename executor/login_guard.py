"""Where credential material may go: frame-exact typing on one of the credential's origins.

Immediately before every fill, click, press or submit that carries or submits credential
material, the target element must be in the top document and the top document's security
origin, as Chromium reports it over CDP (not its URL), must be exactly one of the
credential's ``origins`` (``Guard``). Also the one-time codes (``totp``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import re
import struct
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from playwright.async_api import CDPSession, ElementHandle, Page

from executor import taint

# Selector forms that reach into a frame (Playwright's frame-entering engine and its internals).
FRAME_PIERCING = re.compile(r"enter-frame|internal:|frame-locator", re.IGNORECASE)


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


def frame_piercing(selector: str | None) -> bool:
    return selector is not None and FRAME_PIERCING.search(selector) is not None
