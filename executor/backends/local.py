"""``local``: the Chromium the executor launches, every connection through RAM's egress proxy.

It is the only backend with a profile on disk: an executor given a ``Profile`` (``run_executor``)
launches it as a persistent context on the computer's profile directory (executor/profile.py);
without one (tests, benchmarks) it launches a browser and gives it in-memory contexts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from playwright.async_api import Browser, BrowserContext, Playwright

from executor.backends.base import BrowserBackend
from executor.contracts import ComputerSettings

# Chromium reads only the last ``--disable-features``: ours comes after Playwright's, so it repeats
# Playwright's list (1.65; tests/executor/test_chromium_launch.py fails when it no longer covers it)
# and adds what a computer does not need.
PLAYWRIGHT_DISABLED_FEATURES = [
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
]
RAM_DISABLED_FEATURES = [
    # The spare renderer Chromium keeps started for the next cross-site navigation: one process
    # less per computer (docs/bench.md); a new site still gets a process of its own (site
    # isolation unchanged), started when the navigation needs it.
    "SpareRendererForSitePerProcess",
]

# ``--no-sandbox`` is never here: Playwright adds it only when the executor runs without the
# sandbox (``RAM_CHROMIUM_NO_SANDBOX``; see executor/sandbox.py).
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # WebRTC sends no UDP around the egress proxy (the switch's current name, and its older one).
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + RAM_DISABLED_FEATURES),
]


class LocalBackend(BrowserBackend):
    name = "local"
    owns_network = True

    def __init__(self, *, sandbox: bool = True) -> None:
        super().__init__()
        self.sandbox = sandbox

    def launch_options(self, proxy_address: str) -> dict[str, Any]:
        # Playwright's proxy option also sends loopback through the proxy (<-loopback>).
        return {
            "executable_path": settings.RAM_CHROMIUM_PATH,
            "headless": True,
            "args": CHROMIUM_ARGS,
            "chromium_sandbox": self.sandbox,
            "proxy": {"server": f"http://{proxy_address}"},
        }

    async def start(self, playwright: Playwright, *, proxy_address: str) -> Browser:
        return await playwright.chromium.launch(**self.launch_options(proxy_address))

    async def start_persistent(
        self,
        playwright: Playwright,
        user_data: Path,
        *,
        proxy_address: str,
        settings: ComputerSettings,
        downloads: Path | None = None,
    ) -> BrowserContext:
        """The browser on the computer's profile directory: its one context (closing it ends the
        browser), with the computer's settings (viewport, locale, time zone, user agent); its
        downloads land in ``downloads`` (the computer's download area)."""
        started = time.monotonic()
        context = await playwright.chromium.launch_persistent_context(
            str(user_data),
            **self.launch_options(proxy_address),
            **settings.context_options(),  # type: ignore[arg-type]
            device_scale_factor=1,
            accept_downloads=True,
            downloads_path=str(downloads) if downloads is not None else None,
        )
        self.ready_ms = int((time.monotonic() - started) * 1000)
        return context
