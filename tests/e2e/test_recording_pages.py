"""The recording player in Chromium: the person's replay page and the staff admin's, on a
desktop and a phone, with the keyboard; Chromium's own decoder plays the stored WebM/VP9
segments, the timeline seeks across them, and nothing is loaded from anywhere but RAM."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from PIL import Image
from playwright.async_api import Browser, BrowserContext, Page

from accounts.models import Account, Membership
from computers.models import Computer, Recording
from computers.recordings import recording_open, recording_segment_store
from executor import server_wire
from executor.recording import SegmentWriter
from runs.models import Run, RunEvent, RunStep
from runs.services import run_create
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.e2e.pages import check_accessibility

pytestmark = pytest.mark.e2e

PASSWORD = "replay horse battery staple"
STAFF_PASSWORD = "staff replay horse battery"


def _segment(recording: Recording, index: int, colour: tuple[int, int, int], *, final: bool) -> None:
    writer = SegmentWriter(fps=2)
    image = Image.new("RGB", (1280, 720), colour)
    for pts in range(0, 2001, 500):
        writer.add(image, pts)
    body = server_wire.InternalRecordingSegment(
        recording_id=recording.id,
        index=index,
        offset_ms=2000 * index,
        duration_ms=2000,
        frames=5,
        final=final,
        capped="",
        periods=[{"start_ms": 2500, "end_ms": 3500, "inputs": 4, "recorded": False}],
        data=base64.b64encode(writer.close()).decode(),
    )
    assert recording_segment_store(computer_id=recording.computer_id, body=body)


def _world() -> dict[str, Any]:
    account = Account.objects.create(name="Replays")
    user = User.objects.create_user(username="rita", password=PASSWORD)
    Membership.objects.create(user=user, account=account)
    User.objects.create_superuser(username="staff", password=STAFF_PASSWORD, email="")
    computer = Computer.objects.create(id="pc-1", account=account, name="pc-1")
    run = run_create(account=account, computer=computer, task={"goal": "Replay me"}, max_model_calls=3)
    recording, _ = recording_open(computer=computer, run_id=run.id, record_human=False)
    _segment(recording, 0, (200, 30, 30), final=False)
    _segment(recording, 1, (30, 30, 200), final=True)
    recording.refresh_from_db()
    start = recording.started_at
    for index, tool in enumerate(["navigate", "type"]):
        step = RunStep.objects.create(run=run, index=index, tool=tool, state="succeeded", summary={"characters": 5})
        RunStep.objects.filter(pk=step.pk).update(started_at=start + timedelta(milliseconds=500 + 2500 * index))
    return {"run": run}


@pytest.fixture
async def world(human_origin: str, leak_guard: LeakGuard) -> dict[str, Any]:
    leak_guard.watch(PASSWORD, STAFF_PASSWORD)
    return await orm(_world)


def _only_ram(page: Page, origin: str) -> list[str]:
    elsewhere: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(origin) else elsewhere.append(r.url))
    return elsewhere


async def _playable(page: Page) -> dict[str, Any]:
    await page.wait_for_function("() => document.getElementById('replay-video').readyState >= 1", timeout=15_000)
    result: dict[str, Any] = await page.evaluate(
        "() => { const v = document.getElementById('replay-video');"
        " return {width: v.videoWidth, height: v.videoHeight, duration: v.duration, src: v.currentSrc}; }"
    )
    return result


@pytest.fixture
async def desktop(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    try:
        yield context
    finally:
        await context.close()


async def test_the_person_replays_their_run_and_seeks_from_the_timeline_with_the_keyboard(
    human_origin: str, world: dict[str, Any], desktop: BrowserContext
) -> None:
    run: Run = world["run"]
    page = await desktop.new_page()
    elsewhere = _only_ram(page, human_origin)
    await page.goto(f"{human_origin}/tasks/{run.id}/recording")
    await sign_in(page, "rita", PASSWORD)
    assert page.url == f"{human_origin}/tasks/{run.id}/recording"
    first = await _playable(page)
    assert (first["width"], first["height"]) == (1280, 720)
    assert 1.5 <= first["duration"] <= 2.6
    assert first["src"].endswith(f"/tasks/{run.id}/recording/segments/0")
    await check_accessibility(page)
    entries = page.locator("#replay-entries button")
    words = await entries.all_inner_texts()
    assert any("Step 1: navigate" in w for w in words) and any("Step 2: type" in w for w in words)
    person = next(w for w in words if "had control" in w)
    assert "4 inputs" in person and "not recorded" in person
    # Keyboard only: tab to the second step (in the second segment) and press Enter.
    await page.keyboard.press("Tab")
    for _ in range(40):
        focused = await page.evaluate("() => document.activeElement.textContent || ''")
        if "Step 2: type" in focused:
            break
        await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await page.wait_for_function(
        "() => { const v = document.getElementById('replay-video');"
        " return v.currentSrc.endsWith('/segments/1') && v.readyState >= 1 && v.currentTime > 0.5; }",
        timeout=15_000,
    )
    current = await page.locator("#replay-entries button[aria-current=true]").inner_text()
    assert "Step 2: type" in current
    # Desktop: the timeline is beside the video.
    video_box = await page.locator("#replay-video").bounding_box()
    timeline_box = await page.locator(".replay-timeline").bounding_box()
    assert video_box and timeline_box and timeline_box["x"] >= video_box["x"] + video_box["width"]
    assert elsewhere == []


async def test_on_a_phone_the_timeline_comes_below_the_video(
    human_origin: str, world: dict[str, Any], browser: Browser
) -> None:
    run: Run = world["run"]
    context = await browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    try:
        page = await context.new_page()
        elsewhere = _only_ram(page, human_origin)
        await page.goto(f"{human_origin}/tasks/{run.id}/recording")
        await sign_in(page, "rita", PASSWORD)
        await _playable(page)
        video_box = await page.locator("#replay-video").bounding_box()
        timeline_box = await page.locator(".replay-timeline").bounding_box()
        assert video_box and timeline_box
        assert timeline_box["y"] >= video_box["y"] + video_box["height"]
        assert video_box["width"] <= 390
        await check_accessibility(page)
        assert elsewhere == []
    finally:
        await context.close()


async def test_another_account_s_person_gets_no_recording(
    human_origin: str, world: dict[str, Any], desktop: BrowserContext
) -> None:
    def other() -> None:
        account = Account.objects.create(name="Other")
        user = User.objects.create_user(username="otto", password=PASSWORD)
        Membership.objects.create(user=user, account=account)

    await orm(other)
    run: Run = world["run"]
    page = await desktop.new_page()
    await page.goto(f"{human_origin}/tasks/{run.id}/recording")
    await sign_in(page, "otto", PASSWORD)
    assert await page.locator("#replay-video").count() == 0
    segment = await page.request.get(f"{human_origin}/tasks/{run.id}/recording/segments/0")
    assert segment.status == 404


async def test_staff_play_a_recording_in_the_admin_and_each_playback_is_on_the_run(
    human_origin: str, world: dict[str, Any], desktop: BrowserContext
) -> None:
    run: Run = world["run"]
    page = await desktop.new_page()
    elsewhere = _only_ram(page, human_origin)
    await page.goto(f"{human_origin}/admin/login/?next=/admin/runs/run/{run.id}/change/")
    await page.get_by_label("Username").fill("staff")
    await page.get_by_label("Password").fill(STAFF_PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Log in").click()
    async with page.expect_navigation():
        await page.get_by_role("link", name="Play the recording").click()
    # Before the recorded playback, no segment is served.
    refused = await page.request.get(f"{human_origin}/admin/runs/run/{run.id}/recording/segments/0")
    assert refused.status == 404
    assert await orm(lambda: RunEvent.objects.filter(run=run, kind="recording_played").count()) == 0
    async with page.expect_navigation():
        await page.get_by_role("button", name="Play the recording").click()
    played = await _playable(page)
    assert (played["width"], played["height"]) == (1280, 720)
    events = await orm(
        lambda: list(RunEvent.objects.filter(run=run, kind="recording_played").values_list("data", flat=True))
    )
    assert events == [{"by": "staff", "user": "staff"}]
    assert elsewhere == []


async def test_view_shows_a_recording_notice_only_when_the_account_records_a_person_s_control(
    human_origin: str, world: dict[str, Any], desktop: BrowserContext
) -> None:
    page = await desktop.new_page()
    await page.goto(f"{human_origin}/view?computer_id=pc-1")
    await sign_in(page, "rita", PASSWORD)
    assert await page.locator("#screen-recording").count() == 0
    await orm(lambda: Account.objects.filter(name="Replays").update(record_person_control=True))
    await page.reload()
    notice = page.locator("#screen-recording")
    assert await notice.is_visible()
    assert "recorded" in await notice.inner_text()


@pytest.mark.parametrize("size", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
async def test_the_person_finds_the_replay_from_the_task_page_with_a_click(
    human_origin: str, world: dict[str, Any], browser: Browser, size: dict[str, int]
) -> None:
    """The task's own page links to its replay once the recording holds a segment: a plain click,
    at desktop and phone size, opens the player."""
    run: Run = world["run"]
    context = await browser.new_context(viewport=size)
    try:
        page = await context.new_page()
        await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
        await sign_in(page, "rita", PASSWORD)
        await page.get_by_role("link", name="Replay what happened on the computer").click()
        await page.wait_for_url(f"{human_origin}/tasks/{run.id}/recording")
        assert (await _playable(page))["width"] == 1280
    finally:
        await context.close()
