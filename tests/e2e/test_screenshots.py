"""A tour of every page a person (and staff) sees, on fixed demo data with a frozen
clock, at desktop and phone (390×844) size: each passes axe-core with no serious
or critical violation, and its screenshot in docs/screenshots is current.

``make screenshots`` runs this module with RAM_SCREENSHOTS_DIR=docs/screenshots to
write them; otherwise each is compared with the committed one, allowing for
anti-aliasing (see ``tests/e2e/pages.py``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
import time_machine
from playwright.async_api import Browser, Page

from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.e2e.pages import BROWSER_NOW, DOCS_SCREENSHOTS, FROZEN, PASSWORD, WRITE_SCREENSHOTS, Demo, Tour, build_demo
from tests.support.vault import VaultServer

pytestmark = pytest.mark.e2e


@pytest.fixture
async def tour_page(browser: Browser, leak_guard: LeakGuard) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1, locale="en-US")
    await context.clock.set_fixed_time(BROWSER_NOW)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    try:
        yield page
    finally:
        await context.close()


async def test_every_page_is_accessible_and_its_screenshot_is_current(
    human_origin: str, tour_page: Page, leak_guard: LeakGuard, vault: VaultServer
) -> None:
    page = tour_page
    leak_guard.watch(PASSWORD, "Supplier-Pa55-word")
    tour = Tour(page, stale=[], names=[])
    with time_machine.travel(FROZEN, tick=False):
        demo: Demo = await orm(build_demo)
        task = f"{human_origin}/tasks/{demo.credential_run.id}/intervention"

        await page.goto(task)
        await tour.station("01-sign-in")
        await sign_in(page, "ana", PASSWORD)
        await page.goto(f"{human_origin}/")
        await tour.station("02-home")
        await page.goto(task)
        await tour.station("03-task-credential")

        async with page.expect_navigation():
            await page.get_by_role("button", name="Open the credential form").click()
        await page.get_by_label("Username").fill("ana@acme.example")
        await tour.station("04-vault-form")
        await page.get_by_label("Password").fill("Supplier-Pa55-word")
        await page.get_by_role("button", name="Save in the vault").click()
        await page.get_by_text("Saved in the vault").wait_for()
        await tour.station("05-credential-saved")
        await page.goto(task)
        await tour.station("06-task-after-saving")

        await page.goto(f"{human_origin}/tasks/{demo.takeover_run.id}/intervention")
        await page.locator("#latest-screenshot").wait_for()
        await page.wait_for_function("document.getElementById('latest-screenshot').complete")
        await tour.station("07-task-takeover")
        await page.goto(f"{human_origin}/connections")
        await tour.station("08-connections")
        await page.goto(f"{human_origin}/credentials")
        await tour.station("09-stored-credentials")
        async with page.expect_navigation():
            await page.locator("#credential-billing-portal").get_by_role("button", name="Replace").click()
        await tour.station("10-replace-form")

        await page.goto(f"{human_origin}/tasks/{demo.opened_run.id}/intervention")
        other = await page.context.new_page()
        await other.goto(f"{human_origin}/tasks/{demo.opened_run.id}/intervention")
        async with other.expect_navigation():
            await other.get_by_role("button", name="Open the credential form").click()
        await other.close()
        async with page.expect_navigation():
            await page.get_by_role("button", name="Open the credential form").click()
        await tour.station("11-already-opened")
        await page.goto(f"{human_origin}/tasks/{demo.expired_run.id}/intervention")
        await tour.station("12-expired")
        await page.goto(f"{human_origin}/tasks/{demo.cancelled_run.id}/intervention")
        await tour.station("13-cancelled")

        await page.get_by_role("button", name="Sign out").click()
        await page.goto(f"{human_origin}/tasks/{demo.credential_run.id}/intervention")
        await sign_in(page, "bruno", PASSWORD)
        await tour.station("14-not-found")
        await page.goto(f"{human_origin}/")
        await tour.station("15-home-empty")

        # The staff admin (Django's own pages): signed in at /admin/login/, the run side read-only.
        async with page.expect_navigation():
            await page.get_by_role("button", name="Sign out").click()
        await page.goto(f"{human_origin}/admin/login/?next=/admin/")
        await tour.station("16-admin-sign-in")
        await page.get_by_label("Username").fill("staff")
        await page.get_by_label("Password").fill(PASSWORD)
        async with page.expect_navigation():
            await page.get_by_role("button", name="Log in").click()
        await tour.station("17-admin-index")
        await page.goto(f"{human_origin}/admin/runs/run/{demo.takeover_run.id}/change/")
        # Random ids wrap differently on a phone; the picture is compared at desktop size only.
        await tour.station("18-admin-run-read-only", mask_ids=True, sizes=("desktop",))

    if not WRITE_SCREENSHOTS:
        # The tour's pictures are numbered; others (the clean screen's) come from tests/e2e/test_view.py.
        committed = await asyncio.to_thread(lambda: {p.stem for p in DOCS_SCREENSHOTS.glob("[0-9][0-9]-*.png")})
        assert committed == set(tour.names), f"docs/screenshots differs from the tour: {sorted(committed ^ set(tour.names))}"
    assert tour.stale == [], "Screenshots are stale; run `make screenshots`: " + "; ".join(tour.stale)


def test_every_screenshot_the_readme_shows_exists() -> None:
    readme = (DOCS_SCREENSHOTS.parents[1] / "README.md").read_text()
    shown = set(re.findall(r"docs/screenshots/([\w-]+)\.png", readme))
    assert shown, "the README shows no screenshot"
    missing = sorted(name for name in shown if not (DOCS_SCREENSHOTS / f"{name}.png").exists())
    assert missing == []
