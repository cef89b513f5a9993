"""The recording of a run: the computer's screen while the run holds it, as WebM/VP9 segments.

The recorder is one more subscriber of the screen feed (``executor/feed.py``), at the
recording's ``fps``: it gets exactly the frames every viewer gets, so what it records is masked
by the same path as every other picture — tainted fields carry discs in the page's own
rendering, in step with every frame, and the page's echoes of a secret are covered there too
(``executor/taint.py``). No frame is taken from anywhere else.

While a person controls the computer (control ``transition`` or ``human``) no frame is encoded
unless the recording's ``record_human`` says so (an account's opt-in): a frame captured during
such a period is dropped (by its capture time, so a frame captured then but sent after the
person handed back is dropped too), and one plain placeholder frame stands for the period. The
period itself — from when to when, how many inputs the person sent — is kept for the timeline
(never what was typed).

Frames are encoded with PyAV's libvpx-vp9 (realtime deadline) at their capture times (variable
frame rate, millisecond timestamps) into segments of ``segment_seconds``: each segment is a
complete WebM file (with its cues, so Chromium's ``<video>`` plays and seeks it) sent to the
server as soon as it closes (``ServerLink.recording_segment_store``); a crash loses at most the
segment being written. Encoding runs in a worker thread, one job at a time; frames that arrive
while the encoder is behind are dropped, never queued without bound. The recording stops at
``max_seconds`` or ``max_bytes`` (its caps) and when the server stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import av
import av.container
import av.video.stream
from PIL import Image, ImageDraw

from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH
from executor.server_link import SegmentUpload
from executor.wire import unpack_frame

if TYPE_CHECKING:
    from executor.feed import ScreenFeed
    from executor.server_link import ServerLink

logger = logging.getLogger(__name__)

PERSON_STATES = ("transition", "human")
# Frames waiting for the encoder beyond this are dropped (the encoder is behind).
MAX_PENDING_JOBS = 8
# A segment closes early when it reaches this size (a segment travels in one internal call).
MAX_SEGMENT_BYTES = 6 * 1024 * 1024
# At most this many person-control periods are kept per recording (the rest are counted).
MAX_PERIODS = 200
# A keyframe at least this often (in frames): seeking decodes from the keyframe before.
KEYFRAME_EVERY = 20
ENCODER_OPTIONS = {
    "deadline": "realtime",
    "cpu-used": "8",
    "lag-in-frames": "0",
    "row-mt": "1",
    "crf": "38",
    "b": "0",
    "g": str(KEYFRAME_EVERY),
}
TIME_BASE = Fraction(1, 1000)
PLACEHOLDER_TEXT = "A person has control of the computer: not recorded."


@dataclass
class Plan:
    """What the server asked for (``ops.RecordingStartArgs``)."""

    recording_id: str
    fps: int
    record_human: bool
    segment_seconds: float
    max_seconds: float
    max_bytes: int


@dataclass
class Period:
    """A period of a person's control, in milliseconds from the recording's start."""

    start_ms: int
    end_ms: int | None = None
    inputs: int = 0
    recorded: bool = False
    inputs_at_start: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"start_ms": self.start_ms, "end_ms": self.end_ms, "inputs": self.inputs, "recorded": self.recorded}


class SegmentWriter:
    """One WebM/VP9 segment being written in memory."""

    def __init__(self, *, fps: int) -> None:
        self.buffer = io.BytesIO()
        self.container: av.container.OutputContainer = av.open(self.buffer, mode="w", format="webm")
        stream: av.video.stream.VideoStream = self.container.add_stream("libvpx-vp9", rate=fps)
        stream.width, stream.height, stream.pix_fmt = VIEWPORT_WIDTH, VIEWPORT_HEIGHT, "yuv420p"
        stream.time_base = TIME_BASE
        stream.codec_context.time_base = TIME_BASE
        stream.options = dict(ENCODER_OPTIONS)
        self.stream = stream
        self.frames = 0
        self.last_pts = -1

    def add(self, image: Image.Image, pts_ms: int) -> None:
        pts = max(pts_ms, self.last_pts + 1)
        frame = av.VideoFrame.from_image(image)
        frame.pts, frame.time_base = pts, TIME_BASE
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.last_pts = pts
        self.frames += 1

    def size(self) -> int:
        return self.buffer.tell()

    def close(self) -> bytes:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()
        return self.buffer.getvalue()


def decoded(jpeg: bytes) -> Image.Image | None:
    """A frame's JPEG as a 1280 × 720 RGB image (None when it cannot be read)."""
    try:
        with Image.open(io.BytesIO(jpeg)) as shot:
            image = shot.convert("RGB")
    except (OSError, ValueError):
        return None
    if image.size != (VIEWPORT_WIDTH, VIEWPORT_HEIGHT):
        image = image.resize((VIEWPORT_WIDTH, VIEWPORT_HEIGHT))
    return image


def placeholder() -> Image.Image:
    """The frame that stands for a period of a person's control that is not recorded."""
    image = Image.new("RGB", (VIEWPORT_WIDTH, VIEWPORT_HEIGHT), (32, 33, 36))
    ImageDraw.Draw(image).text(
        (VIEWPORT_WIDTH // 2 - 150, VIEWPORT_HEIGHT // 2), PLACEHOLDER_TEXT, fill=(200, 200, 200)
    )
    return image


@dataclass(eq=False)
class Sink:
    """Stands for a gateway connection as a subscriber of the feed (``ScreenFeed.subscribe``)."""

    on_frame: Callable[[dict[str, Any], bytes], None]
    subscriber: Any = None

    async def send(self, data: bytes) -> None:
        meta, jpeg = unpack_frame(data)
        self.on_frame(meta, jpeg)


@dataclass
class Recording:
    plan: Plan
    started_at: float  # wall clock (the frames' captured_at is on it)
    inputs: Callable[[], int]
    writer: SegmentWriter | None = None
    segment_index: int = 0
    segment_started_at: float = 0.0
    bytes_sent: int = 0
    last_image: Image.Image | None = None
    periods: list[Period] = field(default_factory=list)
    periods_dropped: int = 0
    capped: str = ""
    stopped: bool = False

    def ms(self, at: float) -> int:
        return max(0, int(round((at - self.started_at) * 1000)))

    @property
    def open_period(self) -> Period | None:
        if self.periods and self.periods[-1].end_ms is None:
            return self.periods[-1]
        return None

    def in_unrecorded_period(self, at: float) -> bool:
        """Whether a frame captured at ``at`` falls in a person's period that is not recorded."""
        at_ms = self.ms(at)
        return any(
            not p.recorded and p.start_ms <= at_ms and (p.end_ms is None or at_ms <= p.end_ms) for p in self.periods
        )


class Recorder:
    """At most one recording at a time on this computer (a run holds the computer alone)."""

    def __init__(
        self,
        *,
        feed: ScreenFeed,
        server: ServerLink,
        control: Callable[[], str],
        inputs: Callable[[], int],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._feed = feed
        self._server = server
        self._control = control
        self._inputs = inputs
        self._clock = clock
        self.current: Recording | None = None
        self._sink: Sink | None = None
        self._jobs: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.frames_encoded = 0
        self.frames_dropped = 0
        self.segments_sent = 0

    # --- what the server asks -----------------------------------------------------------

    async def start(self, plan: Plan) -> bool:
        """Start recording (a recording already running under another id ends first); False when
        this one is running already."""
        if self.current is not None and self.current.plan.recording_id == plan.recording_id:
            return False
        await self.stop()
        now = self._clock()
        self.current = Recording(plan=plan, started_at=now, inputs=self._inputs, segment_started_at=now)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        self._observe_control(now)
        self._sink = Sink(on_frame=self._frame)
        await self._feed.subscribe(self._sink, plan.fps)  # type: ignore[arg-type]
        self._ticker = asyncio.create_task(self._tick())
        return True

    async def stop(self, recording_id: str | None = None) -> bool:
        """End the recording (``recording_id``'s, or whichever runs): its last segment is sent."""
        recording = self.current
        if recording is None or (recording_id is not None and recording.plan.recording_id != recording_id):
            return False
        self.current = None
        await self._detach()
        recording.stopped = True
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._jobs.put_nowait(("close", (recording, self._clock(), True, done)))
        await done
        return True

    async def close(self) -> None:
        """The executor stops: the recording's last segment is sent, the worker ends."""
        with contextlib.suppress(Exception):
            await self.stop()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker
            self._worker = None

    # --- frames and control ---------------------------------------------------------------

    def control_changed(self) -> None:
        """Who controls the computer changed (``Control.on_change``, on the executor's loop)."""
        self._observe_control(self._clock())

    async def _detach(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._sink is not None:
            sink, self._sink = self._sink, None
            with contextlib.suppress(Exception):
                await self._feed.unsubscribe(sink)  # type: ignore[arg-type]

    def _observe_control(self, now: float) -> None:
        recording = self.current
        if recording is None:
            return
        person = self._control() in PERSON_STATES
        period = recording.open_period
        if person and period is None:
            if len(recording.periods) >= MAX_PERIODS:
                recording.periods_dropped += 1
                return
            period = Period(
                start_ms=recording.ms(now),
                recorded=recording.plan.record_human,
                inputs_at_start=self._inputs(),
            )
            recording.periods.append(period)
            if not period.recorded:
                self._enqueue(("placeholder", (recording, now)))
        elif not person and period is not None:
            period.end_ms = recording.ms(now)
            period.inputs = self._inputs() - period.inputs_at_start

    def _frame(self, meta: dict[str, Any], jpeg: bytes) -> None:
        recording = self.current
        if recording is None:
            return
        now = self._clock()
        self._observe_control(now)
        captured_at = float(meta.get("captured_at") or now)
        # A person controls it now and their control is not recorded: dropped, whether or not the
        # period could be kept on the timeline (beyond MAX_PERIODS it is only counted).
        person_now = self._control() in PERSON_STATES and not recording.plan.record_human
        if person_now or recording.in_unrecorded_period(captured_at) or recording.in_unrecorded_period(now):
            self.frames_dropped += 1
            return
        self._enqueue(("frame", (recording, jpeg, max(captured_at, recording.started_at))))

    def _enqueue(self, job: tuple[str, Any]) -> None:
        if self._jobs.qsize() >= MAX_PENDING_JOBS and job[0] == "frame":
            self.frames_dropped += 1
            return
        self._jobs.put_nowait(job)

    async def _tick(self) -> None:
        """Control changes without a frame, segment boundaries and the caps, once a second."""
        while True:
            await asyncio.sleep(1.0)
            recording = self.current
            if recording is None:
                return
            now = self._clock()
            self._observe_control(now)
            if now - recording.segment_started_at >= recording.plan.segment_seconds:
                self._jobs.put_nowait(("close", (recording, now, False, None)))
            if now - recording.started_at >= recording.plan.max_seconds:
                recording.capped = "minutes"
                asyncio.get_running_loop().create_task(self.stop(recording.plan.recording_id))
                return

    # --- the encoder -----------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            kind, payload = await self._jobs.get()
            try:
                if kind == "frame":
                    recording, jpeg, at = payload
                    image = await asyncio.to_thread(decoded, jpeg)
                    if image is not None:
                        await self._encode(recording, image, at)
                elif kind == "placeholder":
                    recording, at = payload
                    await self._encode(recording, placeholder(), at, keep=False)
                elif kind == "close":
                    recording, at, final, done = payload
                    try:
                        await self._close_segment(recording, at, final=final)
                    finally:
                        if done is not None and not done.done():
                            done.set_result(None)
            except Exception:  # noqa: BLE001 - a recording never takes the executor down
                logger.exception("A recording job failed (%s).", kind)
                if kind == "close" and payload[3] is not None and not payload[3].done():
                    payload[3].set_result(None)

    async def _encode(self, recording: Recording, image: Image.Image, at: float, *, keep: bool = True) -> None:
        if recording.capped:
            return
        if recording.writer is None:
            recording.writer = SegmentWriter(fps=recording.plan.fps)
            recording.segment_started_at = max(recording.segment_started_at, recording.started_at)
        pts = int(round((at - recording.segment_started_at) * 1000))
        await asyncio.to_thread(recording.writer.add, image, pts)
        self.frames_encoded += 1
        if keep:
            recording.last_image = image
        if recording.writer.size() >= MAX_SEGMENT_BYTES:
            await self._close_segment(recording, at, final=False)
        if recording.bytes_sent + (recording.writer.size() if recording.writer else 0) >= recording.plan.max_bytes:
            recording.capped = "bytes"
            if self.current is recording:
                asyncio.get_running_loop().create_task(self.stop(recording.plan.recording_id))

    async def _close_segment(self, recording: Recording, at: float, *, final: bool) -> None:
        """Close the segment being written at ``at`` (its last picture repeated there, so it lasts
        until then) and send it; unless ``final``, the next segment opens with that picture."""
        period = recording.open_period
        if final and period is not None:
            period.end_ms = recording.ms(at)
            period.inputs = self._inputs() - period.inputs_at_start
        writer = recording.writer
        if writer is None:
            recording.segment_started_at = at
            if final:
                await self._send(recording, None, at, final=True)
            return
        end_pts = int(round((at - recording.segment_started_at) * 1000))
        last = recording.last_image if recording.last_image is not None else placeholder()
        if recording.in_unrecorded_period(at):
            last = placeholder()
        if end_pts > writer.last_pts:
            await asyncio.to_thread(writer.add, last, end_pts)
        data = await asyncio.to_thread(writer.close)
        started = recording.segment_started_at
        recording.writer = None
        await self._send(recording, (data, started, writer.frames), at, final=final)
        recording.segment_started_at = at
        if not final and not recording.capped:
            recording.writer = SegmentWriter(fps=recording.plan.fps)
            await asyncio.to_thread(recording.writer.add, last, 0)

    async def _send(
        self, recording: Recording, segment: tuple[bytes, float, int] | None, at: float, *, final: bool
    ) -> None:
        index = recording.segment_index
        data, started, frames = segment if segment is not None else (b"", at, 0)
        try:
            await self._server.recording_segment_store(
                SegmentUpload(
                    recording_id=recording.plan.recording_id,
                    index=index,
                    offset_ms=recording.ms(started),
                    duration_ms=max(0, int(round((at - started) * 1000))),
                    frames=frames,
                    final=final,
                    capped=recording.capped,
                    periods=[p.as_dict() for p in recording.periods],
                    data=data,
                )
            )
        except Exception:  # noqa: BLE001 - the next segment is still sent
            logger.warning(
                "A recording segment could not be stored (recording %s, segment %d).",
                recording.plan.recording_id,
                index,
            )
            return
        if data:
            recording.segment_index += 1
            recording.bytes_sent += len(data)
            self.segments_sent += 1
