"""How the executor obtains a browser for its computer (see ``base.py`` for the interface)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from executor.backends.base import BackendUnavailable, BrowserBackend, EgressUnenforceable, Session, scrub
from executor.backends.browserbase import BrowserbaseBackend
from executor.backends.cdp import CdpBackend
from executor.backends.local import LocalBackend
from executor.backends.steel import SteelBackend
from executor.contracts import BROWSER_BACKENDS, browser_options

__all__ = [
    "BackendUnavailable",
    "BrowserBackend",
    "BrowserbaseBackend",
    "CdpBackend",
    "EgressUnenforceable",
    "LocalBackend",
    "Session",
    "SteelBackend",
    "DRIVERS",
    "backend_for",
    "scrub",
]


# Each backend's driver, keyed by its record's name in ``executor.contracts.BROWSER_BACKENDS``:
# built from the checked options and the account's Vault secret (``None`` when it keeps none).
DRIVERS: dict[str, Callable[[Any, str | None], BrowserBackend]] = {
    "local": lambda options, secret: LocalBackend(),
    "cdp": lambda options, secret: CdpBackend(options, token=secret),
    "steel": lambda options, secret: SteelBackend(options, api_key=secret),
    "browserbase": lambda options, secret: BrowserbaseBackend(options, api_key=secret),
}
if set(DRIVERS) != set(BROWSER_BACKENDS):
    raise ImportError(f"browser backends without a driver or a record: {set(DRIVERS) ^ set(BROWSER_BACKENDS)}")


def backend_for(*, backend: str, options: dict[str, Any] | None, secret: str | None) -> BrowserBackend:
    """The backend named on a computer, with its checked options and its Vault secret."""
    return DRIVERS[backend](browser_options(backend, options), secret)
