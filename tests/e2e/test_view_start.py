"""/view for a stopped computer, in a real browser: it offers Start (no session is opened, nothing
starts by itself), Start starts the computer as the API does, and the page connects by itself once
the computer is ready — a first connection only."""

from __future__ import annotations

import pytest
from playwright.async_api import BrowserContext

from computers.models import Computer
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, orm, sign_in
from tests.support.screen import register
from visual.models import VisualSession

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


async def test_a_stopped_computer_offers_start_and_connects_once_ready(
    human_origin: str, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    await ana_at_her_desk(leak_guard, view_executor, PASSWORD)
    # The computer is stopped: its executor's generation is not the row's.
    await orm(lambda: Computer.objects.filter(pk="screen-1").update(status=Computer.Status.OFFLINE, generation=None))
    page = await desktop.new_page()
    page.on("request", leak_guard.record_request)
    await page.goto(f"{human_origin}/view?computer_id=screen-1")
    await sign_in(page, "ana", PASSWORD)
    start = page.get_by_role("button", name="Start the computer")
    await start.wait_for()
    await page.locator("#screen-state").filter(has_text="The computer is stopped").wait_for()
    assert not await page.get_by_role("button", name="Reconnect").is_visible()
    assert await orm(lambda: VisualSession.objects.count()) == 0  # nothing was opened
    assert not await orm(lambda: Computer.objects.get(pk="screen-1").wanted_running)  # nothing started
    await start.click()
    await page.locator("#screen-state").filter(has_text="it connects by itself once it is ready").wait_for()
    assert await orm(lambda: Computer.objects.get(pk="screen-1").wanted_running)
    # Its executor comes up (what a host's executor does): the page connects by itself.
    await orm(lambda: register(view_executor))
    await page.locator("#screen-canvas[data-frames]").wait_for(timeout=30_000)
    await page.locator("#screen-state").filter(has_text="Observing").wait_for()
    assert not await start.is_visible()
    assert await orm(lambda: list(VisualSession.objects.values_list("mode", flat=True))) == ["control"]
