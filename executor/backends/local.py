"""``local``: the Chromium the executor launches, every connection through RAM's egress proxy."""

from __future__ import annotations

from django.conf import settings
from playwright.async_api import Browser, Playwright

from executor.backends.base import BrowserBackend

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
]


class LocalBackend(BrowserBackend):
    name = "local"
    owns_network = True

    def __init__(self, *, sandbox: bool = True) -> None:
        super().__init__()
        self.sandbox = sandbox

    async def start(self, playwright: Playwright, *, proxy_address: str) -> Browser:
        # Playwright's proxy option also sends loopback through the proxy (<-loopback>).
        return await playwright.chromium.launch(
            executable_path=settings.RAM_CHROMIUM_PATH,
            headless=True,
            args=CHROMIUM_ARGS,
            chromium_sandbox=self.sandbox,
            proxy={"server": f"http://{proxy_address}"},
        )
