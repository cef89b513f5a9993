"""How the executor obtains a browser for its computer (see ``base.py`` for the interface)."""

from __future__ import annotations

from typing import Any

from executor.backends.base import BackendUnavailable, BrowserBackend, EgressUnenforceable, Session, scrub
from executor.backends.browserbase import BrowserbaseBackend
from executor.backends.cdp import CdpBackend
from executor.backends.local import LocalBackend
from executor.backends.steel import SteelBackend
from executor.contracts import BrowserbaseOptions, CdpOptions, SteelOptions, browser_options

__all__ = [
    "BackendUnavailable",
    "BrowserBackend",
    "BrowserbaseBackend",
    "CdpBackend",
    "EgressUnenforceable",
    "LocalBackend",
    "Session",
    "SteelBackend",
    "backend_for",
    "scrub",
]


def backend_for(*, backend: str, options: dict[str, Any] | None, secret: str | None) -> BrowserBackend:
    """The backend named on a computer, with its checked options and its Vault secret."""
    checked = browser_options(backend, options)
    if isinstance(checked, CdpOptions):
        return CdpBackend(checked, token=secret)
    if isinstance(checked, SteelOptions):
        return SteelBackend(checked, api_key=secret)
    if isinstance(checked, BrowserbaseOptions):
        return BrowserbaseBackend(checked, api_key=secret)
    return LocalBackend()
