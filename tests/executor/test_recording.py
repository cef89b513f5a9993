"""The recording of a run's screen, against real Chromium: masked at the source, stored in segments.

The password test types a password, toggles it visible and scrolls, then decodes every frame of
the stored WebM with PyAV and measures the field's text in each: the field's text has a colour
nothing else on the page has, so its ink is found wherever the field has scrolled, and the height
of that ink tells glyphs (capital letters) from the discs of the mask. The measure itself is
checked on the same pictures encoded the same way: the clear rendering reads as glyphs."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import secrets
import time
import uuid
from typing import Any

import av
import pytest
from PIL import Image

from computers.client import ExecutorClient
from computers.models import Computer, Recording, RecordingSegment
from computers.recordings import recording_open, recording_plan
from executor import handlers
from executor import recording as recording_module
from executor.recording import SegmentWriter
from executor.runtime import Executor
from tests.support.screen import on_executor
from tests.support.waits import eventually

PAGE = """<title>sign in</title>
<style>
  body { margin: 0; background: #fff; height: 3000px; font-family: monospace; }
  input { position: absolute; left: 40px; width: 700px; height: 60px; font: 36px monospace; color: #00c000;
          caret-color: transparent; outline: none; border: 1px solid #bbb; background: #fff; }
  #pw { top: 200px; } #ref { top: 400px; }
  button { position: absolute; left: 800px; top: 210px; font: 16px sans-serif; }
</style>
<input id="pw" type="password" autocomplete="off">
<button id="eye" onclick="pw.type = pw.type === 'password' ? 'text' : 'password'">show</button>
<input id="ref" type="text">
"""


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def ink_height(image: Image.Image) -> int:
    """The tallest run of rows holding the field's text colour (0 when the field is not on screen)."""
    rgb = image.convert("RGB")
    r, g, b = rgb.split()
    green = (
        Image.merge(
            "RGB",
            (
                r.point(lambda v: 255 if v < 110 else 0),
                g.point(lambda v: 255 if v > 120 else 0),
                b.point(lambda v: 255 if v < 110 else 0),
            ),
        )
        .convert("L")
        .point(lambda v: 255 if v == 255 else 0)
    )
    width, height = green.size
    rows = [sum(1 for x in range(0, width, 2) if green.getpixel((x, y))) for y in range(height)]
    best = run = 0
    for count in rows:
        run = run + 1 if count >= 2 else 0
        best = max(best, run)
    return best


def through_vp9(png: bytes) -> Image.Image:
    """A picture as the recording stores it: encoded by the recorder's own writer, decoded by PyAV."""
    writer = SegmentWriter(fps=2)
    image = Image.open(io.BytesIO(png)).convert("RGB").resize((1280, 720))
    writer.add(image, 0)
    writer.add(image, 500)
    frames = decoded_frames(writer.close())
    return frames[-1]


def decoded_frames(webm: bytes) -> list[Image.Image]:
    with av.open(io.BytesIO(webm)) as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def raw_png(screen: Executor) -> bytes:
    async def shot() -> bytes:
        cdp = await screen.page.context.new_cdp_session(screen.page)
        try:
            return base64.b64decode((await cdp.send("Page.captureScreenshot", {"format": "png"}))["data"])
        finally:
            await cdp.detach()

    result: bytes = on_executor(screen, shot)
    return result


def start(screen: Executor, settings: Any, **plan: Any) -> Recording:
    settings.RAM_RECORDING_SEGMENT_SECONDS = plan.pop("segment_seconds", 60)
    recording, _ = recording_open(computer=Computer.objects.get(pk="pc-1"), run_id=uuid.uuid4(), record_human=False)
    assert client().recording_start({**recording_plan(recording), **plan}) is True
    return recording


def test_a_password_typed_toggled_visible_and_scrolled_shows_no_glyph_in_any_recorded_frame(
    screen: Executor, settings: Any
) -> None:
    secret = "".join(secrets.choice("MWHNBEKX") for _ in range(12))
    on_executor(screen, lambda: screen.page.set_content(PAGE))
    # The measure: the page's own clear copy (set by the page, unknown to the executor) reads as glyphs.
    on_executor(screen, lambda: screen.page.evaluate("v => { ref.value = v }", secret))
    clear = ink_height(through_vp9(raw_png(screen)))
    on_executor(screen, lambda: screen.page.evaluate("() => ref.remove()"))

    recording = start(screen, settings, segment_seconds=2)
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.type(lease, "#pw", secret)
        masked = ink_height(through_vp9(raw_png(screen)))
        assert clear >= masked + 8, (clear, masked)  # the measure tells the two apart
        executor.click(lease, "#eye")
        assert on_executor(screen, lambda: screen.page.evaluate("pw.type")) == "text"
        for target in (40, 80, 120):
            executor.scroll(lease, delta_y=40)
            eventually(lambda t=target: on_executor(screen, lambda: screen.page.evaluate("scrollY")) == t, 15)
            # A change elsewhere on the page: a frame captured at this scroll offset is recorded.
            before = screen.recorder.frames_encoded
            on_executor(screen, lambda t=target: screen.page.evaluate("t => { eye.textContent = 'show ' + t }", t))
            eventually(lambda b=before: screen.recorder.frames_encoded > b, 15)
        # A segment boundary passes while the field is on screen.
        segments_before = screen.recorder.segments_sent
        eventually(lambda: screen.recorder.segments_sent > segments_before, 15)
    finally:
        executor.lease_release(lease)
    assert executor.recording_stop(str(recording.pk)) is True
    assert executor.recording_stop(str(recording.pk)) is False

    recording.refresh_from_db()
    assert recording.ended_at is not None
    segments = list(RecordingSegment.objects.filter(recording=recording).order_by("index"))
    assert len(segments) >= 2
    tops: set[int] = set()
    frames = 0
    for segment in segments:
        assert segment.artifact.kind == "recording" and segment.artifact.content_type == "video/webm"
        for image in decoded_frames(segment.artifact.data):
            frames += 1
            height = ink_height(image)
            assert height < (clear + masked) / 2, (segment.index, height, clear, masked)
            if height:
                tops.add(_ink_top(image))
    assert frames >= 5
    # The field was recorded at several scroll offsets (the frames show it moving).
    assert len(tops) >= 3, tops
    # Segments follow one another: each starts where the one before ended.
    for before, after in zip(segments, segments[1:], strict=False):
        assert after.offset_ms >= before.offset_ms + before.duration_ms - 5
    assert recording.duration_ms == segments[-1].offset_ms + segments[-1].duration_ms


def _ink_top(image: Image.Image) -> int:
    rgb = image.convert("RGB")
    for y in range(rgb.height):
        for x in range(0, rgb.width, 2):
            r, g, b = rgb.getpixel((x, y))  # type: ignore[misc]
            if g > 120 and r < 110 and b < 110:
                return y
    return -1


def test_a_segment_plays_as_a_standard_decoder_reads_it_with_its_duration_and_cues(
    screen: Executor, settings: Any
) -> None:
    on_executor(screen, lambda: screen.page.set_content("<title>t</title><body><h1 id=h>one</h1></body>"))
    recording = start(screen, settings)
    started = time.monotonic()
    executor = client()
    lease = executor.lease_acquire()
    try:
        for word in ("two", "three"):
            before = screen.recorder.frames_encoded
            on_executor(screen, lambda w=word: screen.page.evaluate("w => { h.textContent = w }", w))
            eventually(lambda b=before: screen.recorder.frames_encoded > b, 15)
    finally:
        executor.lease_release(lease)
    executor.recording_stop(str(recording.pk))
    elapsed_ms = (time.monotonic() - started) * 1000
    segment = RecordingSegment.objects.get(recording=recording)
    data = segment.artifact.data
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "vp9"
        assert (stream.width, stream.height) == (1280, 720)
        duration_ms = (container.duration or 0) / 1000
        # Seeking lands on a keyframe at or before the asked time.
        container.seek(0)
        first = next(container.decode(video=0))
        assert first.key_frame
    assert abs(duration_ms - segment.duration_ms) <= 600
    assert segment.duration_ms <= elapsed_ms + 500
    # The WebM has its index (Cues), which Chromium's <video> seeks with.
    assert b"\x1c\x53\xbb\x6b" in data


def test_a_person_s_control_is_on_the_timeline_without_frames_by_default(screen: Executor, settings: Any) -> None:
    on_executor(screen, lambda: screen.page.set_content("<title>t</title><body><h1 id=h>agent</h1></body>"))
    recording = start(screen, settings)

    async def person() -> None:
        grant, _ = await screen.control.takeover()
        for text in ("1", "2", "3"):
            await handlers.op_input(screen, None, {"grant_id": grant.id, "input": {"type": "text", "text": text}})
        await screen.page.evaluate("() => { h.textContent = 'PIN 4711'; }")
        await _frames_after(screen)
        screen.control.grant_release(grant.id)

    on_executor(screen, person)
    client().recording_stop(str(recording.pk))
    recording.refresh_from_db()
    assert len(recording.periods) == 1
    period = recording.periods[0]
    assert period["inputs"] == 3 and period["recorded"] is False
    assert period["end_ms"] is not None and period["end_ms"] >= period["start_ms"]
    # No frame of the period: nothing shows the page the person saw.
    assert screen.recorder.frames_dropped >= 1


def test_a_person_s_control_beyond_the_kept_periods_is_not_recorded_either(
    screen: Executor, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the periods a recording keeps on its timeline (none kept here), a person's control is
    still not recorded: its frames are dropped (on the code that decided by the kept periods only,
    they were encoded)."""
    monkeypatch.setattr(recording_module, "MAX_PERIODS", 0)
    on_executor(screen, lambda: screen.page.set_content("<title>t</title><body><h1 id=h>agent</h1></body>"))
    recording = start(screen, settings)
    dropped = screen.recorder.frames_dropped

    async def person() -> None:
        grant, _ = await screen.control.takeover()
        await screen.page.evaluate("() => { h.textContent = 'PIN 4711'; }")
        await _frames_after(screen)
        screen.control.grant_release(grant.id)

    on_executor(screen, person)
    client().recording_stop(str(recording.pk))
    recording.refresh_from_db()
    assert recording.periods == []
    assert screen.recorder.frames_dropped > dropped


async def _frames_after(screen: Executor) -> None:

    before = screen.recorder.frames_dropped
    for _ in range(100):
        if screen.recorder.frames_dropped > before:
            return
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("cap", ["bytes", "minutes"])
def test_a_recording_stops_at_its_cap_and_says_which(screen: Executor, settings: Any, cap: str) -> None:
    on_executor(screen, lambda: screen.page.set_content("<title>t</title><body><h1 id=h>0</h1></body>"))
    limits = {"max_bytes": 1} if cap == "bytes" else {"max_seconds": 1}
    recording = start(screen, settings, **limits)
    for number in range(1, 40):
        recording.refresh_from_db()
        if recording.ended_at is not None:
            break
        before = screen.recorder.frames_encoded
        on_executor(screen, lambda n=number: screen.page.evaluate("n => { h.textContent = String(n) }", n))
        with contextlib.suppress(AssertionError):  # a frame the encoder skipped: the next change makes one
            eventually(lambda b=before: screen.recorder.frames_encoded > b or screen.recorder.current is None, 3)
    eventually(lambda: Recording.objects.get(pk=recording.pk).ended_at is not None, 15)
    recording.refresh_from_db()
    assert recording.capped == cap
    assert screen.recorder.current is None
    assert client().recording_stop(str(recording.pk)) is False
