"""The screen feed: one CDP screencast of the active page, run only while someone watches.

Every captured frame becomes the latest; each subscriber (a gateway socket's screen link)
is sent the latest frame at most ``max_fps`` in any one-second window, the latest frame
winning. The screencast itself is paced at the source by when its frames are acknowledged
(``executor/screencast.py``). The pages part (``executor/pages.py``) moves the feed to the
active page (``moved``); the wire format of a frame is in ``executor/wire.py``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from PIL import Image
from websockets.exceptions import ConnectionClosed

from executor import ops, taint
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH
from executor.screencast import FrameWindow, ScreencastPacer
from executor.wire import MAX_FRAME_BYTES, pack_frame

if TYPE_CHECKING:
    from executor.rpc import Peer

logger = logging.getLogger(__name__)

JPEG_QUALITY = 65
SCREENCAST = {
    "format": "jpeg",
    "quality": JPEG_QUALITY,
    "maxWidth": VIEWPORT_WIDTH,
    "maxHeight": VIEWPORT_HEIGHT,
    "everyNthFrame": 1,
}
# Around a viewport smaller than the contract's: the frame's background.
FRAME_BACKGROUND = (32, 33, 36)
# How many times a capture that clears a found value is tried while the page keeps changing fields.
CLEARING_TRIES = 3


class FieldLook(Protocol):
    """The active page's fields, as the live stream asks about them (``executor/taint_page.py``)."""

    async def held_since(self) -> float:
        """Every field looked at now (a new value is covered at once); when one was last found new."""

    async def rendered(self) -> None:
        """Until every frame of the page has rendered what is covered now."""


@dataclass
class Frame:
    number: int
    jpeg: bytes
    url: str
    captured_at: float


@dataclass(eq=False)
class Subscriber:
    connection: Peer
    max_fps: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    next_slot: float = 0.0  # monotonic time its next frame may be sent (the screencast is paced to it)
    sent_number: int = 0  # the number of the latest frame it was sent


class ScreenFeed:
    """The screencast, its subscribers and the latest frame.

    ``url`` is the active page's address (each frame carries it), ``control`` the frame's
    ``control`` field, ``framing`` whether the computer's viewport is smaller than the
    contract's (its frames are then framed to 1280 × 720). ``field_look`` gives, while a secret is
    watched for on the active page, what to ask before a frame is shown (``taint.field_look``): a
    field's value a page script set to a secret makes no event the page's world hears, so every
    frame waits for a look at the fields, and after a look that found a new value (covered from
    then on) no frame is shown until one captured after the cover has rendered.
    """

    def __init__(
        self,
        *,
        url: Callable[[], str],
        control: Callable[[], Any],
        framing: Callable[[], bool],
        field_look: Callable[[], FieldLook | None] = lambda: None,
    ) -> None:
        self._url = url
        self._control = control
        self._framing = framing
        self._field_look = field_look
        # Frames waiting for the field look are numbered as they arrive (a later one shown wins);
        # ``_cleared`` is the latest field find a frame has been captured after (see ``_clear``).
        self._arrivals = 0
        self._shown_arrival = 0
        self._cleared = 0.0
        self._looks: set[asyncio.Task[None]] = set()
        self._clearing: asyncio.Task[None] | None = None
        self.dropped_frames = 0
        self.subscribers: set[Subscriber] = set()
        self.latest: Frame | None = None
        self.latest_data = ""  # the latest frame as Chromium sent it (base64), to spot a refresh that changed nothing
        self.frame_count = 0
        self.raw_frames = 0
        self.screencasting = False
        # The CDP session of the page the screencast is attached to (the active one, once it has moved).
        self.cdp: Any = None
        self.pacer = ScreencastPacer(
            ack=self._ack, capture=self._capture_now, next_slot=self.next_slot, min_interval=self._min_interval
        )

    # --- subscribers -----------------------------------------------------------

    async def subscribe(self, peer: Peer, max_fps: int) -> None:
        await self.unsubscribe(peer)
        subscriber = Subscriber(connection=peer, max_fps=max_fps)
        peer.subscriber = subscriber
        self.subscribers.add(subscriber)
        subscriber.task = asyncio.create_task(self._feed(subscriber))
        if not self.screencasting:
            await self.start()
        elif self.latest is not None:
            subscriber.wake.set()

    async def unsubscribe(self, peer: Peer) -> None:
        subscriber = peer.subscriber
        if subscriber is None:
            return
        peer.subscriber = None
        self.subscribers.discard(subscriber)
        if subscriber.task is not None:
            subscriber.task.cancel()
        if not self.subscribers and self.screencasting:
            await self.stop()

    def refresh(self) -> None:
        """A frame's ``control`` must not lag behind a change: the latest is offered again."""
        for subscriber in self.subscribers:
            if self.latest is not None:
                self.frame_count += 1
                self.latest = Frame(self.frame_count, self.latest.jpeg, self.latest.url, self.latest.captured_at)
            subscriber.wake.set()

    # --- the screencast ---------------------------------------------------------

    async def start(self) -> None:
        self._cleared = 0.0  # a page's finds are its own: the first frame of a page is cleared anew
        self.screencasting = True
        self.latest = None
        self.latest_data = ""
        self.pacer.reset()
        await self.cdp.send("Page.startScreencast", SCREENCAST)

    async def stop(self) -> None:
        self.screencasting = False
        self.latest = None
        self.latest_data = ""
        self.pacer.reset()  # Chromium starts counting unacknowledged frames afresh at the next start
        with contextlib.suppress(Exception):
            await self.cdp.send("Page.stopScreencast")

    def on_cdp(self, cdp: Any) -> None:
        """Listen to ``cdp``'s screencast frames (only while it is the feed's session)."""
        cdp.on("Page.screencastFrame", lambda params: self._screencast_frame(params) if cdp is self.cdp else None)

    async def moved(self, cdp: Any) -> None:
        """The active page changed: the screencast moves to its CDP session ``cdp``."""
        previous = self.cdp
        if previous is not None and self.screencasting:
            # The acknowledgements the pacer holds belong to the old page's screencast.
            with contextlib.suppress(Exception):
                await self.pacer.release_all()
        self.cdp = cdp
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous.send("Page.stopScreencast")
            with contextlib.suppress(Exception):
                await previous.detach()
        if self.screencasting:
            await self.start()

    async def _capture_now(self) -> None:
        """The page as it is now, offered like a screencast frame (executor/screencast.py)."""
        if not self.screencasting:
            return
        shot = await self.cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": JPEG_QUALITY})
        if self.screencasting:
            self.raw_frames += 1
            self._arrived(shot["data"], only_if_new=True)

    def next_slot(self) -> float | None:
        """The earliest slot that still needs a new frame: a subscriber with a frame waiting for its
        next slot needs the one after (else each frame caught before its slot would release
        another capture for the same slot: about 1.7 captures per delivered frame, ``make bench``)."""
        latest = self.latest.number if self.latest is not None else 0
        return min(
            (s.next_slot + (1.0 / s.max_fps if s.sent_number < latest else 0.0) for s in self.subscribers),
            default=None,
        )

    def _min_interval(self) -> float:
        return 1.0 / max((s.max_fps for s in self.subscribers), default=1)

    def _screencast_frame(self, params: dict[str, Any]) -> None:
        if not self.screencasting:
            asyncio.get_running_loop().create_task(self._ack(params["sessionId"]))
            return
        self.raw_frames += 1
        self.pacer.frame(params["sessionId"])
        self._arrived(params["data"])

    # --- the field look (a secret a page script set into a field) --------------------------

    def _arrived(self, data: str, *, only_if_new: bool = False) -> None:
        """A captured frame: offered at once, or once the fields have been looked at."""
        look = self._field_look()
        if look is None:
            self._offer(data, only_if_new=only_if_new)
            return
        self._arrivals += 1
        self._spawn(self._looked(look, self._arrivals, data, only_if_new))

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._looks.add(task)
        task.add_done_callback(self._looks.discard)
        return task

    async def _looked(self, look: FieldLook, arrival: int, data: str, only_if_new: bool) -> None:
        try:
            found = await look.held_since()
        except Exception:  # noqa: BLE001 - the page went away mid-look: nothing tells what the frame shows
            return
        if not self.screencasting or arrival < self._shown_arrival:
            return  # stopped meanwhile, or a later frame is shown already
        if found > self._cleared:
            # A value found since the last cleared frame: this frame may show it in clear.
            self.dropped_frames += 1
            if self._clearing is None or self._clearing.done():
                self._clearing = self._spawn(self._clear(look))
            return
        self._shown_arrival = arrival
        self._offer(data, only_if_new=only_if_new)

    async def _clear(self, look: FieldLook) -> None:
        """A frame captured after every found value's cover has rendered takes the dropped frames'
        place: look, wait for the rendering, capture, and look again (a value found meanwhile may be
        in the capture: then once more)."""
        for _ in range(CLEARING_TRIES):
            try:
                found = await look.held_since()
                await look.rendered()
                shot = await self.cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": JPEG_QUALITY})
                again = await look.held_since()
            except Exception:  # noqa: BLE001 - the page went away: its successor's frames follow
                return
            if not self.screencasting:
                return
            if again > found:
                continue
            self._cleared = found
            self.raw_frames += 1
            self._arrivals += 1
            self._shown_arrival = self._arrivals
            self._offer(shot["data"])
            return

    def _offer(self, data: str, *, only_if_new: bool = False) -> None:
        """A captured JPEG (base64) becomes the latest frame (a refresh only when it shows something new)."""
        if only_if_new and data == self.latest_data:
            return
        self.latest_data = data
        jpeg = base64.b64decode(data)
        if self._framing():
            jpeg = framed(jpeg)
        if len(jpeg) > MAX_FRAME_BYTES:
            logger.warning("dropped a frame of %d bytes (limit %d)", len(jpeg), MAX_FRAME_BYTES)
            return
        self.frame_count += 1
        self.latest = Frame(number=self.frame_count, jpeg=jpeg, url=self._url(), captured_at=time.time())
        for subscriber in self.subscribers:
            subscriber.wake.set()

    async def _ack(self, session_id: int) -> None:
        with contextlib.suppress(Exception):
            await self.cdp.send("Page.screencastFrameAck", {"sessionId": session_id})

    async def _feed(self, subscriber: Subscriber) -> None:
        """Send this subscriber the latest frame, at most ``max_fps`` in any one-second window.

        Slots follow a steady grid: a frame arriving a little after its slot does not
        push the next slot back (that would lose a slot at every late frame), and two
        frames are never closer than half an interval; the window (``FrameWindow``) bounds
        what the grid would let a late frame's successors catch up. The first frame leaves at once.
        """
        interval = 1.0 / subscriber.max_fps
        window = FrameWindow(subscriber.max_fps)
        next_slot = 0.0
        try:
            while True:
                await subscriber.wake.wait()
                subscriber.wake.clear()
                delay = next_slot - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                frame = self.latest
                if frame is None or frame.number == subscriber.sent_number:
                    continue
                now = time.monotonic()
                window.record(now)
                next_slot = max(next_slot + interval, now + interval / 2, window.opens_at())
                subscriber.next_slot = next_slot
                subscriber.sent_number = frame.number
                meta = ops.FrameMeta(
                    url=taint.redact_text(frame.url),
                    control=self._control(),
                    captured_at=frame.captured_at,
                    width=VIEWPORT_WIDTH,
                    height=VIEWPORT_HEIGHT,
                )
                await subscriber.connection.send(pack_frame(meta.model_dump(mode="json"), frame.jpeg))
        except ConnectionClosed:
            pass


def framed(jpeg: bytes) -> bytes:
    """A capture of a smaller viewport at the top-left corner of a 1280 × 720 frame: the screen
    contract's frames are always 1280 × 720, and a point of the frame is the same point of the page."""
    try:
        with Image.open(io.BytesIO(jpeg)) as shot:
            if shot.size == (VIEWPORT_WIDTH, VIEWPORT_HEIGHT):
                return jpeg
            frame = Image.new("RGB", (VIEWPORT_WIDTH, VIEWPORT_HEIGHT), FRAME_BACKGROUND)
            frame.paste(
                shot.convert("RGB").crop((0, 0, min(shot.width, VIEWPORT_WIDTH), min(shot.height, VIEWPORT_HEIGHT)))
            )
    except (OSError, ValueError):  # not an image Pillow can read: passed on as it came
        return jpeg
    out = io.BytesIO()
    frame.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()
