"""How the local backend launches Chromium: Playwright's own disabled features are kept (Chromium
reads only the last ``--disable-features``), no spare renderer waits for a navigation, and a
cross-site frame still gets a renderer of its own (site isolation)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from playwright.async_api import Route, async_playwright

from bench.procs import process_tree
from executor.backends.local import LocalBackend

PAGES = {
    "http://site-a.test/": '<title>a</title><iframe src="http://site-b.test/"></iframe>',
    "http://site-b.test/": "<title>b</title><p>b</p>",
}


def command_lines() -> dict[int, list[str]]:
    lines = {}
    for pid in process_tree(os.getpid()):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        lines[pid] = [part for part in raw.split("\0") if part]
    return lines


async def fulfill(route: Route) -> None:
    await route.fulfill(status=200, content_type="text/html", body=PAGES.get(route.request.url, ""))


async def test_launch_keeps_playwrights_features_and_site_isolation_without_a_spare_renderer() -> None:
    before = set(command_lines())
    async with async_playwright() as playwright:
        browser = await LocalBackend(sandbox=False).start(playwright, proxy_address="127.0.0.1:9")
        try:
            page = await browser.new_page()
            await page.route("**/*", fulfill)
            await page.goto("http://site-a.test/")
            await page.frame_locator("iframe").locator("p").wait_for()
            await asyncio.sleep(1)  # a spare renderer is started right after a navigation
            ours = {pid: line for pid, line in command_lines().items() if pid not in before}
            main = [line for line in ours.values() if any(a.startswith("--remote-debugging-pipe") for a in line)]
            assert len(main) == 1, main
            values = [a.split("=", 1)[1].split(",") for a in main[0] if a.startswith("--disable-features=")]
            assert len(values) >= 2, values  # Playwright's, then ours
            assert set(values[-1]) >= {f for earlier in values[:-1] for f in earlier}, (
                "a feature Playwright disables is enabled again"
            )
            assert "SpareRendererForSitePerProcess" in values[-1]
            # A child's title is its command line in one string (Chromium rewrites it).
            titles = [" ".join(line) for line in ours.values()]
            renderers = [title for title in titles if "--type=renderer" in title and "--top-chrome-webui" not in title]
            # One renderer for site-a's page, one for site-b's frame: none waiting spare.
            assert len(renderers) == 2, len(renderers)
        finally:
            await browser.close()
