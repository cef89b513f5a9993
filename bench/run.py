"""The benchmark's phases; see ``bench/__main__.py``."""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import hashlib
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from bench import login, page, steps
from bench.procs import cpu_seconds, process_tree

ROOT = Path(__file__).resolve().parent.parent
COMPUTER = "bench-pc"

ANIMATION = b"""<!doctype html><title>anim</title><body style="margin:0;background:#f4f4f4">
<canvas id=c width=1280 height=720></canvas><script>
{ const c = document.getElementById('c').getContext('2d'); let n = 0;
  const draw = () => { n++; c.fillStyle = '#f4f4f4'; c.fillRect(0, 0, 1280, 720);
    for (let i = 0; i < 12; i++) { c.fillStyle = 'hsl(' + ((n * 3 + i * 30) % 360) + ',70%,50%)';
      c.fillRect((n * 7 + i * 97) % 1180, 60 + i * 50, 100, 40); }
    c.fillStyle = '#222'; c.font = '48px sans-serif'; c.fillText('frame ' + n, 40, 680);
    requestAnimationFrame(draw); };
  draw(); }</script>"""
SLOW = b"""<!doctype html><title>slow</title><body style="margin:0;font:64px sans-serif">
<p id=p>0</p><script>{ let n = 0; setInterval(() => { n++; document.getElementById('p').textContent = n;
  document.body.style.background = n % 2 ? '#fff' : '#eef'; }, 500); }</script>"""
CLICK = b"""<!doctype html><title>click</title><body style="margin:0;height:720px;background:#fff">
<script>{ let n = 0; document.addEventListener('mousedown', () => {
  n++; document.body.style.background = n % 2 ? '#123' : '#fff'; }); }</script>"""
# Random pixels: the heaviest frames (about 445 kB each at quality 65), a new one every animation frame.
NOISE = b"""<!doctype html><title>noise</title><body style="margin:0"><canvas id=c width=1280 height=720></canvas><script>
{ const c = document.getElementById('c').getContext('2d'); const img = c.createImageData(1280, 720);
  const draw = () => { const d = new Uint32Array(img.data.buffer);
    for (let i = 0; i < d.length; i++) d[i] = (Math.random() * 0xffffffff) | 0xff000000;
    c.putImageData(img, 0, 0); requestAnimationFrame(draw); };
  draw(); }</script>"""
# Changes at every 500 ms boundary of the wall clock, so the bench knows when each change was due.
TICK = b"""<!doctype html><title>tick</title><body style="margin:0;font:64px sans-serif"><p id=p>0</p><script>
{ const tick = () => { const now = Date.now(), next = Math.ceil((now + 1) / 500) * 500;
    setTimeout(() => { document.getElementById('p').textContent = next;
      document.body.style.background = (next / 500) % 2 ? '#fff' : '#eef'; tick(); }, next - now); };
  tick(); }</script>"""
TICK_SECONDS = 0.5
PAGES = {"/anim": ANIMATION, "/slow": SLOW, "/click": CLICK, "/noise": NOISE, "/tick": TICK}
CORES = os.cpu_count() or 1


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = PAGES.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of ``pid``'s process tree: (Chromium's processes, every other one)."""
    split = tree_cpu_split(pid)
    return split["browser"], split["executor"] + split["driver"]


def tree_cpu_split(pid: int) -> dict[str, float]:
    """CPU seconds of the executor's tree: Chromium's processes, Playwright's driver (node), the rest."""
    split = {"browser": 0.0, "driver": 0.0, "executor": 0.0}
    for member, name in process_tree(pid).items():
        with contextlib.suppress(OSError):
            seconds = cpu_seconds(member)
            part = "browser" if "chrom" in name.lower() else "driver" if name.startswith("node") else "executor"
            split[part] += seconds
    return split


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def digest(jpeg: bytes) -> bytes:
    return hashlib.blake2b(jpeg, digest_size=8).digest()


# --- setup ----------------------------------------------------------------------


def setup_data() -> str:
    import django

    django.setup()
    from django.core.management import call_command

    from accounts.models import Account
    from accounts.services import api_key_create
    from computers.models import Computer

    call_command("migrate", verbosity=0)
    account = Account.objects.create(name="Bench")
    Computer.objects.create(id=COMPUTER, account=account, name="Bench")
    return api_key_create(account=account, kind="runner")[1]


def computer_ready(previous: str | None = None) -> Any:
    from django.db import close_old_connections

    from computers.models import Computer

    close_old_connections()
    computer = Computer.objects.get(pk=COMPUTER)
    if computer.status == "ready" and str(computer.generation) != previous:
        return computer
    return None


@contextlib.contextmanager
def process(argv: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)  # noqa: S603
    try:
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()


def executor_env(computer_id: str, origin: str) -> dict[str, str]:
    """What ``run_executor`` needs: a fresh executor token of the computer and the server's internal URL."""
    from computers.services import executor_token_issue

    return {"RAM_EXECUTOR_TOKEN": executor_token_issue(computer_id=computer_id), "RAM_SERVER_INTERNAL_URL": origin}


@contextlib.contextmanager
def gateway(max_fps: int, ping: bool = True, deflate: bool = False) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    argv = (
        [sys.executable, "-m", "bench.server", str(port)]
        + ([] if ping else ["--no-ping"])
        + (["--deflate"] if deflate else [])
    )
    env = {"RAM_VISUAL_MAX_FPS": str(max_fps), "RAM_PUBLIC_ORIGIN": f"http://127.0.0.1:{port}"}
    with process(argv, env) as child:
        deadline = time.monotonic() + 180  # a loaded machine takes its time to start Django
        while time.monotonic() < deadline and child.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", child


# --- clients ----------------------------------------------------------------------


class Viewer:
    """A gateway socket recording each frame's arrival time and JPEG digest."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[tuple[float, bytes, int]] = []
        self.acks: dict[int, float] = {}
        self.states: list[dict[str, Any]] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(Exception):
            async for message in self.ws:
                now = time.time()
                if isinstance(message, bytes):
                    self.frames.append((now, digest(message), len(message)))
                    continue
                data = json.loads(message)
                if data["type"] == "ack":
                    self.acks[data["sequence"]] = now
                elif data["type"] == "state":
                    self.states.append(data)

    async def send(self, value: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(value))

    async def close(self) -> None:
        await self.ws.close()
        self.task.cancel()


async def open_viewer(origin: str, key: str, mode: str = "observe", via: str | None = None, **kwargs: Any) -> Viewer:
    import httpx
    from websockets.asyncio.client import connect

    async with httpx.AsyncClient(base_url=origin, timeout=30) as client:
        response = await client.post(
            "/api/visual/sessions",
            json={"computer_id": COMPUTER, "mode": mode, "transport": "jpeg-websocket-v1"},
            headers={"Authorization": f"Bearer {key}", "X-RAM-Intent": "visual-session"},
        )
    session = response.json()
    if response.status_code != 201:
        raise RuntimeError(f"session refused: {session}")
    ws = await connect(
        (via or origin).replace("http://", "ws://") + session["websocket_path"],
        subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
        max_size=4_000_000,
        open_timeout=60,
        **kwargs,
    )
    return Viewer(ws)


async def until(check: Any, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("bench step timed out")
        await asyncio.sleep(0.01)


class Control:
    """A control socket: takeover, inputs one at a time with their ack."""

    def __init__(self, viewer: Viewer) -> None:
        self.viewer = viewer
        self.sequence = 0

    async def takeover(self) -> None:
        await until(lambda: self.viewer.frames)
        await self.viewer.send({"type": "takeover"})
        await until(lambda: any(s.get("control") == "human" for s in self.viewer.states))

    async def input(self, value: dict[str, Any]) -> float:
        self.sequence += 1
        sequence = self.sequence
        started = time.time()
        await self.viewer.send({"type": "input", "sequence": sequence, "input": value})
        await until(lambda: sequence in self.viewer.acks, 30)
        return self.viewer.acks[sequence] - started

    async def release(self) -> None:
        await self.viewer.send({"type": "release"})
        await until(lambda: any(s.get("control") == "released" for s in self.viewer.states))


@contextlib.asynccontextmanager
async def direct_feed(max_fps: int) -> AsyncIterator[dict[bytes, float]]:
    """The executor's own feed: JPEG digest -> time the CDP frame reached the executor."""
    from computers.client import GatewayToExecutorLink
    from computers.tokens import private_interface_token

    computer = await asyncio.to_thread(computer_ready)
    captured: dict[bytes, float] = {}
    link = GatewayToExecutorLink(
        computer.executor_address,
        token=private_interface_token(computer_id=computer.pk, generation=computer.generation),
        on_frame=lambda meta, jpeg: captured.setdefault(digest(jpeg), meta.captured_at),
        on_control=lambda *_: None,
    )
    await link.open()
    await link.call("subscribe", max_fps=30)
    try:
        yield captured
    finally:
        await link.close()


async def navigate(origin: str, key: str, url: str) -> None:
    viewer = await open_viewer(origin, key, "control")
    control = Control(viewer)
    await control.takeover()
    await control.input({"type": "navigate", "url": url})
    await control.release()
    await viewer.close()


async def raw_frames() -> tuple[int, int]:
    """What Chromium captured so far: (screencast frames and direct captures, direct captures)."""
    from computers.client import ExecutorClient

    computer = await asyncio.to_thread(computer_ready)
    status = await asyncio.to_thread(ExecutorClient(computer).status)
    return int(status["raw_frames"]), int(status["screencast_refreshes"])


# --- phases -------------------------------------------------------------------------


async def fps_phase(
    origin: str, key: str, pages: str, max_fps: int, seconds: float, gateway_pid: int, executor_pid: int
) -> dict[str, Any]:
    """One viewer on the animating page: delivered vs captured frames, and what each delivered frame
    costs the gateway and the executor (its process and Playwright's driver) and the browser."""
    await navigate(origin, key, f"{pages}/anim")
    viewer = await open_viewer(origin, key)
    await until(lambda: viewer.frames)
    await asyncio.sleep(1)
    start_frames, (start_raw, start_refreshes), start = len(viewer.frames), await raw_frames(), time.time()
    gateway0, split0 = cpu_seconds(gateway_pid), tree_cpu_split(executor_pid)
    await asyncio.sleep(seconds)
    (raw, refreshes), frames = await raw_frames(), len(viewer.frames) - start_frames
    elapsed = time.time() - start
    gateway1, split1 = cpu_seconds(gateway_pid), tree_cpu_split(executor_pid)
    sizes = [size for _, _, size in viewer.frames[start_frames:]]
    arrivals = [at for at, _, _ in viewer.frames[start_frames:]]
    # The most frames any one-second window starting at a frame holds (max_fps is a maximum in each).
    crowded = max((bisect.bisect_left(arrivals, at + 1.0) - i for i, at in enumerate(arrivals)), default=0)
    await viewer.close()
    delivered, raw_fps = frames / elapsed, (raw - start_raw) / elapsed
    spent = {part: split1[part] - split0[part] for part in split0}
    per_frame = lambda seconds: seconds / frames if frames else float("nan")  # noqa: E731
    return {
        "max_fps": max_fps,
        "raw_fps": raw_fps,
        "refresh_fps": (refreshes - start_refreshes) / elapsed,
        "delivered_fps": delivered,
        "ratio": delivered / min(max_fps, raw_fps) if raw_fps else float("nan"),
        "bytes_per_frame": statistics.mean(sizes) if sizes else 0,
        "window_max": crowded,
        "cpu_per_frame": per_frame((gateway1 - gateway0) + spent["executor"] + spent["driver"]),
        "gateway_per_frame": per_frame(gateway1 - gateway0),
        "executor_per_frame": per_frame(spent["executor"]),
        "driver_per_frame": per_frame(spent["driver"]),
        "browser_cores": spent["browser"] / elapsed,
    }


async def uncapped_phase(pages: str, seconds: float, executor_pid: int) -> dict[str, Any]:
    """The browser's CPU when its screencast is taken as fast as it captures (one 30 fps subscriber,
    the executor's maximum: faster than Chromium captures), the reference of the paced figure; and
    its CPU with no screencast at all (the page animating with nobody watching: what no pacing saves)."""
    # The fps phase left the animating page open, and nobody subscribed.
    await asyncio.sleep(1)
    (browser0, _), start = tree_cpu(executor_pid), time.monotonic()
    await asyncio.sleep(seconds)
    (browser1, _), elapsed = tree_cpu(executor_pid), time.monotonic() - start
    unwatched = (browser1 - browser0) / elapsed
    async with direct_feed(30) as captured:
        await asyncio.sleep(1)
        count0, (browser0, _) = len(captured), tree_cpu(executor_pid)
        await asyncio.sleep(seconds)
        count1, (browser1, _) = len(captured), tree_cpu(executor_pid)
    return {
        "browser_cores": (browser1 - browser0) / seconds,
        "fps": (count1 - count0) / seconds,
        "unwatched_cores": unwatched,
    }


async def change_phase(origin: str, key: str, pages: str, max_fps: int, seconds: float) -> dict[str, Any]:
    """Page change -> frame at the viewer: the page changes at every 500 ms boundary of the clock; each
    change's delay is the first new frame at the viewer after that boundary."""
    await navigate(origin, key, f"{pages}/tick")
    viewer = await open_viewer(origin, key)
    await until(lambda: viewer.frames)
    await asyncio.sleep(1)
    mark, start = len(viewer.frames), time.time()
    await asyncio.sleep(seconds)
    frames = viewer.frames[mark - 1 :]
    await viewer.close()
    delays = []
    seen = {frames[0][1]} if frames else set()
    for at, dig, _ in frames[1:]:
        if dig in seen:
            continue
        seen.add(dig)
        due = (at // TICK_SECONDS) * TICK_SECONDS
        if due >= start:
            delays.append(at - due)
    return {"change_p50": pct(delays, 0.5), "change_p95": pct(delays, 0.95), "changes": len(delays)}


async def input_phase(origin: str, key: str, pages: str, max_fps: int) -> dict[str, Any]:
    await navigate(origin, key, f"{pages}/click")
    viewer = await open_viewer(origin, key, "control")
    control = Control(viewer)
    await control.takeover()
    acks = [await control.input({"type": "pointer", "phase": "move", "x": 10 + i % 50, "y": 10}) for i in range(100)]
    changed = []
    for _ in range(20):
        await asyncio.sleep(1.0 / max_fps + 0.3)  # past the previous frame's slot
        before = len(viewer.frames)
        sent = time.time()
        await control.input({"type": "pointer", "phase": "down", "x": 640, "y": 360})
        await until(lambda before=before: len(viewer.frames) > before, 10)
        changed.append(viewer.frames[before][0] - sent)
        await control.input({"type": "pointer", "phase": "up", "x": 640, "y": 360})
    await control.release()
    await viewer.close()
    return {
        "ack_p50": pct(acks, 0.5),
        "ack_p95": pct(acks, 0.95),
        "changed_p50": pct(changed, 0.5),
        "changed_p95": pct(changed, 0.95),
        "budget": 1.0 / max_fps + 0.05,
    }


async def connect_phase(origin: str, key: str, pages: str, connects: int = 7) -> dict[str, Any]:
    """A new viewer, nobody else watching (the screencast stopped): the ticket's POST, the WebSocket
    handshake (start of the TCP connect → accepted), and the first JPEG at the client, each connect
    timed from the handshake's start; and the same first frame straight from the executor's
    ``subscribe``, which shows what the gateway adds. Animating page, one connect at a time."""
    import httpx
    from executor.client import GatewayToExecutorLink
    from executor.tokens import private_interface_token
    from websockets.asyncio.client import connect

    await navigate(origin, key, f"{pages}/anim")
    await asyncio.sleep(1)
    tickets, handshakes, firsts, directs, links = [], [], [], [], []
    for _ in range(connects):
        async with httpx.AsyncClient(base_url=origin, timeout=30) as client:
            asked = time.time()
            response = await client.post(
                "/api/visual/sessions",
                json={"computer_id": COMPUTER, "mode": "observe", "transport": "jpeg-websocket-v1"},
                headers={"Authorization": f"Bearer {key}", "X-RAM-Intent": "visual-session"},
            )
            tickets.append(time.time() - asked)
        session = response.json()
        started = time.time()
        ws = await connect(
            origin.replace("http://", "ws://") + session["websocket_path"],
            subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
            max_size=4_000_000,
            open_timeout=60,
        )
        handshakes.append(time.time() - started)
        async with asyncio.timeout(20):
            while not isinstance(await ws.recv(), bytes):
                pass
        firsts.append(time.time() - started)
        await ws.close()
        await asyncio.sleep(1)  # the last viewer gone: the screencast stops
        computer = await asyncio.to_thread(computer_ready)
        first: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        def arrived(_meta: object, _jpeg: bytes, first: asyncio.Future[float] = first) -> None:
            if not first.done():
                first.set_result(time.time())

        link = GatewayToExecutorLink(
            computer.executor_address,
            token=private_interface_token(computer_id=computer.pk, generation=computer.generation),
            on_frame=arrived,
            on_control=lambda *_: None,
        )
        opened = time.time()
        await link.open()
        links.append(time.time() - opened)
        subscribed = time.time()
        await link.call("subscribe", max_fps=4)
        async with asyncio.timeout(20):
            directs.append(await first - subscribed)
        await link.close()
        await asyncio.sleep(1)
    return {
        "ticket_p50": pct(tickets, 0.5),
        "handshake_p50": pct(handshakes, 0.5),
        "first_p50": pct(firsts, 0.5),
        "first_p95": pct(firsts, 0.95),
        "direct_p50": pct(directs, 0.5),
        "link_p50": pct(links, 0.5),
        "connects": connects,
    }


async def latency_phase(origin: str, key: str, pages: str, max_fps: int) -> dict[str, Any]:
    await navigate(origin, key, f"{pages}/slow")
    async with direct_feed(max_fps) as captured:
        viewer = await open_viewer(origin, key)
        await asyncio.sleep(12)
        await viewer.close()
    added = [at - captured[d] for at, d, _ in viewer.frames[1:] if d in captured]
    return {"added_p50": pct(added, 0.5), "added_p95": pct(added, 0.95), "samples": len(added)}


async def viewers_phase(
    origin: str, key: str, pages: str, gateway_pid: int, counts: list[int], seconds: float
) -> list[dict[str, Any]]:
    await navigate(origin, key, f"{pages}/anim")
    rows = []
    async with direct_feed(30) as captured:
        for count in counts:
            try:
                viewers = [await open_viewer(origin, key) for _ in range(count)]
            except (OSError, TimeoutError, RuntimeError) as exc:
                print(f"  {count} viewers could not connect ({type(exc).__name__}); stopping the ramp", flush=True)
                break
            await asyncio.sleep(2)
            marks = [len(v.frames) for v in viewers]
            cpu0, wall0 = cpu_seconds(gateway_pid), time.time()
            await asyncio.sleep(seconds)
            cores = (cpu_seconds(gateway_pid) - cpu0) / (time.time() - wall0)
            delays = [
                at - captured[d]
                for v, m in zip(viewers, marks, strict=True)
                for at, d, _ in v.frames[m:]
                if d in captured
            ]
            fps = statistics.mean((len(v.frames) - m) / seconds for v, m in zip(viewers, marks, strict=True))
            rows.append(
                {
                    "viewers": count,
                    "fps_each": fps,
                    "delay_p95": pct(delays, 0.95),
                    "gateway_cores": cores,
                    "viewers_per_core": count / cores if cores > 0 else float("inf"),
                }
            )
            for viewer in viewers:
                await viewer.close()
            await asyncio.sleep(1)
    return rows


async def rss_phase(key: str, pages: str, seconds: float) -> dict[str, Any]:
    with gateway(4, ping=False) as (origin, child):
        await navigate(origin, key, f"{pages}/anim")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", int(origin.rsplit(":", 1)[1])))
        sock.setblocking(False)
        viewer = await open_viewer(origin, key, sock=sock, max_queue=1)
        viewer.task.cancel()  # stalled: nothing is read any more
        await asyncio.sleep(10)  # warm-up: buffers fill, skipping starts
        samples = []
        end = time.time() + seconds
        while time.time() < end:
            samples.append(rss_bytes(child.pid))
            await asyncio.sleep(5)
        with contextlib.suppress(Exception):
            viewer.ws.transport.abort()
    first, peak, last = samples[0], max(samples), samples[-1]
    return {
        "seconds": seconds,
        "first_mb": first / 1e6,
        "peak_mb": peak / 1e6,
        "last_mb": last / 1e6,
        "growth": peak / first - 1,
    }


async def compression_phase(key: str, pages: str, seconds: float, viewers: int = 3) -> list[dict[str, Any]]:
    """Three viewers that offer permessage-deflate (as browsers do), with the server's deflate on and off,
    on a heavy page (~445 kB JPEG frames: what deflate would chew on for nothing)."""
    rows = []
    for deflate in (True, False):
        with gateway(4, deflate=deflate) as (origin, child):
            await navigate(origin, key, f"{pages}/noise")
            clients = [await open_viewer(origin, key) for _ in range(viewers)]  # websockets offers deflate by default
            negotiated = all(bool(c.ws.protocol.extensions) for c in clients)
            await asyncio.sleep(2)
            marks = [len(c.frames) for c in clients]
            cpu0, wall0 = cpu_seconds(child.pid), time.time()
            await asyncio.sleep(seconds)
            elapsed = time.time() - wall0
            cores = (cpu_seconds(child.pid) - cpu0) / elapsed
            fps = statistics.mean((len(c.frames) - m) / elapsed for c, m in zip(clients, marks, strict=True))
            for client in clients:
                await client.close()
        rows.append({"deflate": deflate, "negotiated": negotiated, "gateway_cpu": cores, "fps_each": fps})
    return rows


async def slow_link_phase(key: str, pages: str, seconds: float) -> dict[str, Any]:
    """One viewer behind 0.5 MB/s read through a 64 KB receive buffer, on a page of ~445 kB frames."""
    from tests.support.throttle import ThrottleProxy

    with gateway(4) as (origin, _child):
        await navigate(origin, key, f"{pages}/noise")
        async with ThrottleProxy(int(origin.rsplit(":", 1)[1]), rate=500_000, receive_buffer=64 * 1024) as proxy:
            viewer = await open_viewer(origin, key, via=f"http://127.0.0.1:{proxy.port}", ping_interval=None)
            pings: list[float] = []
            start = time.time()
            while time.time() - start < seconds and not viewer.task.done():
                await asyncio.sleep(1.0)
                sent = time.time()
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(10):
                        await (await viewer.ws.ping())
                    pings.append(time.time() - sent)  # the Pong queues behind what the gateway already sent
            elapsed = time.time() - start
            cut = viewer.task.done()
            arrivals = [at - start for at, _, _ in viewer.frames]
            sizes = [size for _, _, size in viewer.frames]
            gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
            await viewer.close()
    return {
        "seconds": elapsed,
        "frames": len(sizes),
        "fps": len(sizes) / elapsed,
        "bytes_per_frame": statistics.mean(sizes) if sizes else 0,
        "max_gap": max(gaps) if gaps else float("nan"),
        "ping_p50": pct(pings, 0.5),
        "ping_p95": pct(pings, 0.95),
        "disconnected": cut,
    }


# --- report ----------------------------------------------------------------------------


def spread(values: list[Any], fmt: Any) -> str:
    """A figure of several repeats: the median, with the min and max in brackets."""
    clean = [v for v in values if isinstance(v, (int, float)) and v == v]
    if not clean:
        return "n/a"
    if len(clean) == 1:
        return str(fmt(clean[0]))
    return f"{fmt(statistics.median(clean))} [{fmt(min(clean))}–{fmt(max(clean))}]"


def merged(samples: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Repeats of one phase, key by key."""
    return {k: [sample[k] for sample in samples] for k in samples[0]} if samples else {}


def loaded(load: tuple[float, float, float]) -> bool:
    return load[0] > CORES


def verdict(met: bool, load: tuple[float, float, float]) -> str:
    """No goal is judged met on a machine that was busy before the run (the bench's own load shows
    only in the figures after it)."""
    if loaded(load):
        return f"not judged (load {load[0]:.1f} > {CORES} cores)"
    return "met" if met else "NOT met"


# Every table printed in this process, for the page the run writes (``bench/page.py``).
MEASURED: list[page.Measured] = []


def table(title: str, header: list[str], rows: list[list[str]], load: tuple[float, float, float] | None = None) -> None:
    if load is not None:
        note = " (above the core count: no goal is judged met)" if loaded(load) else ""
        print(f"\nLoad average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {CORES} cores{note}")
    print(f"\n{title}\n")
    print(page.render_table(header, rows), flush=True)
    MEASURED.append(page.Measured(title, header, rows, load, page.now(), page.machine()))


# Other tables join here: a phase name for ``--only``, a coroutine function taking the parsed
# arguments and returning one repeat's sample, and the report that prints the samples (with the
# load average before the first repeat, and the number of repeats).
EXTRA_PHASES: dict[str, tuple[Any, Any]] = {
    "steps": (steps.phase, steps.report),
    "browser_login": (login.phase, login.report),
}


async def repeated(repeats: int, factory: Any) -> tuple[tuple[float, float, float], list[Any]]:
    """The load average before the first repeat, and each repeat's result."""
    load = os.getloadavg()
    return load, [await factory() for _ in range(repeats)]


async def run_all(work: Path, args: argparse.Namespace) -> None:
    key = await asyncio.to_thread(setup_data)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pages = f"http://127.0.0.1:{server.server_address[1]}"
    repeats = max(1, args.repeats)
    print(
        f"RAM benchmark ({CORES} CPUs, each figure the median [min–max] of {repeats} repeats); work dir {work}",
        flush=True,
    )
    only = {p.strip() for p in args.only.split(",") if p.strip()}
    wanted = lambda phase: not only or phase in only  # noqa: E731
    results: dict[str, Any] = {}
    loads: dict[str, tuple[float, float, float]] = {}

    async def phase(name: str, factory: Any) -> None:
        loads[name], results[name] = await repeated(repeats, factory)

    # The API first, while the browser is not running: it has the machine to itself.
    if wanted("api"):
        from bench.api import api_phase, fresh_postgres

        for label, url in [("SQLite (embedded default)", os.environ["DATABASE_URL"])] + (
            [("PostgreSQL", "postgres")] if args.api_postgres else []
        ):
            if url == "postgres":
                url = await asyncio.to_thread(fresh_postgres, args.api_postgres)
            print(f"api on {label}: wrk, 16 clients and 1…", flush=True)
            load = os.getloadavg()
            rows = await asyncio.to_thread(api_phase, url, seconds=args.api_seconds, repeats=repeats)
            results.setdefault("api", []).append((label, load, rows))
    # The benchmark's own pages are the one local address its browser may reach.
    allow = {"RAM_BROWSER_EGRESS_ALLOW": f"127.0.0.1:{server.server_address[1]}"}
    screen_phases = {"connect", "fps", "inputs", "latency", "viewers", "change", "rss", "compression", "slowlink"}
    if any(wanted(p) for p in screen_phases):
        # The executor reaches the server's state through a web server's internal endpoint, never a database.
        with gateway(10) as (internal, _web):
            env = await asyncio.to_thread(executor_env, COMPUTER, internal)
            with process(
                [sys.executable, "manage.py", "run_executor", "--computer", COMPUTER], {**allow, **env}
            ) as executor:
                deadline = time.monotonic() + 60
                while not await asyncio.to_thread(computer_ready):
                    if time.monotonic() > deadline or executor.poll() is not None:
                        raise RuntimeError("the executor did not start")
                    await asyncio.sleep(0.2)
                await screen_run(args, key, pages, executor.pid, wanted, phase, results)
    for name, (measure, _report) in EXTRA_PHASES.items():
        if wanted(name):
            await phase(name, lambda measure=measure: measure(args))
    server.shutdown()
    report(results, loads, repeats)


async def screen_run(
    args: argparse.Namespace, key: str, pages: str, executor_pid: int, wanted: Any, phase: Any, results: dict[str, Any]
) -> None:
    for max_fps in (4, 10):
        if not any(wanted(p) for p in ("fps", "inputs", "change")) and not (
            max_fps == 4 and (wanted("latency") or wanted("viewers") or wanted("connect"))
        ):
            continue
        with gateway(max_fps) as (origin, child):
            if wanted("fps"):
                print(f"max_fps {max_fps}: delivered fps beside raw CDP, CPU per frame…", flush=True)
                await phase(
                    f"fps{max_fps}",
                    lambda m=max_fps: fps_phase(origin, key, pages, m, args.seconds, child.pid, executor_pid),
                )
                if max_fps == 4:
                    print("the browser's CPU with its screencast taken uncapped…", flush=True)
                    await phase("uncapped", lambda: uncapped_phase(pages, args.seconds, executor_pid))
            if wanted("change"):
                print(f"max_fps {max_fps}: page change → frame at the viewer…", flush=True)
                await phase(f"change{max_fps}", lambda m=max_fps: change_phase(origin, key, pages, m, args.seconds))
            if wanted("inputs"):
                print(f"max_fps {max_fps}: input to ack and to the first changed frame…", flush=True)
                await phase(f"inputs{max_fps}", lambda m=max_fps: input_phase(origin, key, pages, m))
            if max_fps == 4 and wanted("connect"):
                print("connect → first frame, one viewer at a time…", flush=True)
                await phase("connect", lambda: connect_phase(origin, key, pages))
            if max_fps == 4 and wanted("latency"):
                print("latency added over raw CDP…", flush=True)
                await phase("latency", lambda m=max_fps: latency_phase(origin, key, pages, m))
            if max_fps == 4 and wanted("viewers"):
                print("viewers per gateway core…", flush=True)
                counts = [int(n) for n in args.viewers.split(",")]
                await phase("viewers", lambda c=counts: viewers_phase(origin, key, pages, child.pid, c, args.seconds))
    if wanted("compression"):
        print("permessage-deflate on vs off, 3 viewers that offer it…", flush=True)
        await phase("compression", lambda: compression_phase(key, pages, args.seconds))
    if wanted("slowlink"):
        print(f"a viewer behind a 0.5 MB/s link for {args.slow_seconds:.0f} s…", flush=True)
        await phase("slowlink", lambda: slow_link_phase(key, pages, args.slow_seconds))
    if wanted("rss"):
        print(f"server RSS with one stalled viewer for {args.rss_seconds:.0f} s…", flush=True)
        await phase("rss", lambda: rss_phase(key, pages, args.rss_seconds))


def report(results: dict[str, Any], loads: dict[str, tuple[float, float, float]], repeats: int) -> None:
    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    f1 = lambda v: f"{v:.1f}"  # noqa: E731
    f2 = lambda v: f"{v:.2f}"  # noqa: E731
    f3 = lambda v: f"{v:.3f}"  # noqa: E731
    f0 = lambda v: f"{v:,.0f}"  # noqa: E731
    for label, load, rows in results.get("api", []):
        table(
            f"api on {label}: wrk against the web server as `make run` starts it (goals: 16 clients ≥ 600 req/s for the run"
            f" read and the descriptor, ≥ 300 for the list, p95 ≤ 50 ms, server CPU per request ≤ 1.5 / 1.5 / 3 ms;"
            f" 1 client p50 ≤ 3 ms; another tenant's list beside long-polls ≤ 2× idle)"
            + ("; server CPU is the web process's, PostgreSQL's own processes are not counted" if "PostgreSQL" in label else ""),
            ["endpoint", "clients", "req/s", "p50", "p95", "server CPU per request", "failed", "goal", "verdict"],
            [
                [
                    r["endpoint"],
                    str(r["clients"]),
                    spread(r["rps"], f0),
                    spread(r["p50"], ms),
                    spread(r["p95"], ms),
                    spread(r["cpu_ms"], lambda v: f"{v:.2f} ms"),
                    str(sum(r["failed"])),
                    *api_goal(r, load),
                ]
                for r in rows
            ],
            load,
        )
    fps = {m: merged(results[f"fps{m}"]) for m in (4, 10) if f"fps{m}" in results}
    if fps:
        table(
            "Frames: delivered vs raw CDP screencast of the same animating page (raw = what Chromium captured)",
            [
                "max_fps",
                "raw CDP fps",
                "raw / max_fps",
                "delivered fps",
                "delivered / min(max_fps, raw)",
                "most frames in a 1-s window",
                "bytes per frame",
            ],
            [
                [
                    str(m),
                    spread(r["raw_fps"], f1),
                    spread([raw / m for raw in r["raw_fps"]], f2),
                    spread(r["delivered_fps"], f2),
                    spread(r["ratio"], f3),
                    f"{max(r['window_max'])} (≤ {m})",
                    spread(r["bytes_per_frame"], f0),
                ]
                for m, r in fps.items()
            ],
            loads["fps4"] if "fps4" in loads else loads["fps10"],
        )
        uncapped = merged(results.get("uncapped", []))
        rows = []
        for m, r in fps.items():
            per_frame = statistics.median(r["cpu_per_frame"])
            row = [
                str(m),
                spread(r["cpu_per_frame"], ms),
                "≤ 1.5 ms",
                verdict(per_frame <= 0.0015, loads[f"fps{m}"]),
                spread(r["browser_cores"], f3),
            ]
            if m == 4 and uncapped:
                ratio = statistics.median(r["browser_cores"]) / statistics.median(uncapped["browser_cores"])
                floor = statistics.median(uncapped["unwatched_cores"]) / statistics.median(uncapped["browser_cores"])
                row += [
                    spread(uncapped["browser_cores"], f3),
                    f"{ratio:.2f} (≤ 0.5)",
                    verdict(ratio <= 0.5, loads[f"fps{m}"]),
                    f"{spread(uncapped['unwatched_cores'], f3)} ({floor:.2f})",
                ]
            else:
                row += ["", "", "", ""]
            rows.append(row)
        table(
            "Screen cost, one viewer, animating page: gateway + executor (its process and Playwright's driver) CPU per"
            " delivered frame; browser CPU beside the browser's with its screencast taken uncapped, and with no screencast",
            [
                "max_fps",
                "gateway+executor CPU per frame",
                "goal",
                "verdict",
                "browser (cores)",
                "browser uncapped (cores)",
                "ratio",
                "verdict",
                "browser, no screencast (ratio)",
            ],
            rows,
            loads["fps4"] if "fps4" in loads else loads["fps10"],
        )
        table(
            "Screen cost per delivered frame, by process (the driver is Playwright's node process; direct captures are"
            " the pacer's Page.captureScreenshot refreshes)",
            ["max_fps", "gateway", "executor", "driver", "raw CDP fps", "direct captures per s"],
            [
                [
                    str(m),
                    spread(r["gateway_per_frame"], ms),
                    spread(r["executor_per_frame"], ms),
                    spread(r["driver_per_frame"], ms),
                    spread(r["raw_fps"], f1),
                    spread(r["refresh_fps"], f2),
                ]
                for m, r in fps.items()
            ],
            loads["fps4"] if "fps4" in loads else loads["fps10"],
        )
    changes = {m: merged(results[f"change{m}"]) for m in (4, 10) if f"change{m}" in results}
    if changes:
        rows = []
        for m, r in changes.items():
            goal = 1 / (2 * m) + 0.035
            rows.append(
                [
                    str(m),
                    spread(r["changes"], f0),
                    spread(r["change_p50"], ms),
                    spread(r["change_p95"], ms),
                    f"≤ {ms(goal)}",
                    verdict(statistics.median(r["change_p50"]) <= goal, loads[f"change{m}"]),
                ]
            )
        table(
            "Page change → frame at the viewer (the page changes at every 500 ms boundary of the clock)",
            ["max_fps", "changes", "p50", "p95", "goal p50 ≤ 1/(2·max_fps) + 35 ms", "verdict"],
            rows,
            loads[next(iter(f"change{m}" for m in changes))],
        )
    inputs = {m: merged(results[f"inputs{m}"]) for m in (4, 10) if f"inputs{m}" in results}
    if inputs:
        table(
            "Inputs",
            [
                "max_fps",
                "input→ack p50",
                "input→ack p95",
                "input→first changed frame p50",
                "p95",
                "budget 1/max_fps + 50 ms",
            ],
            [
                [
                    str(f),
                    spread(i["ack_p50"], ms),
                    spread(i["ack_p95"], ms),
                    spread(i["changed_p50"], ms),
                    spread(i["changed_p95"], ms),
                    ms(i["budget"][0]),
                ]
                for f, i in inputs.items()
            ],
            loads[next(iter(f"inputs{m}" for m in inputs))],
        )
    if "connect" in results:
        conn = merged(results["connect"])
        first = statistics.median(conn["first_p50"])
        table(
            "Connect → first frame, 1 viewer at 4 fps, nobody else watching (animating page; from the WebSocket"
            " handshake's start to the first JPEG at the client; the ticket's POST before it is not counted)",
            [
                "connects",
                "ticket POST p50",
                "handshake p50",
                "connect → first frame p50",
                "p95",
                "goal",
                "verdict",
                "executor link open p50",
                "subscribe → first frame p50 (executor direct)",
            ],
            [
                [
                    spread(conn["connects"], f0),
                    spread(conn["ticket_p50"], ms),
                    spread(conn["handshake_p50"], ms),
                    spread(conn["first_p50"], ms),
                    spread(conn["first_p95"], ms),
                    "p50 ≤ 150 ms",
                    verdict(first <= 0.150, loads["connect"]),
                    spread(conn["link_p50"], ms),
                    spread(conn["direct_p50"], ms),
                ]
            ],
            loads["connect"],
        )
    if "latency" in results:
        latency = merged(results["latency"])
        table(
            "Latency the gateway adds over raw CDP (CDP frame at the executor → JPEG at the client; page changing every 500 ms)",
            ["samples", "p50", "p95"],
            [[spread(latency["samples"], f0), spread(latency["added_p50"], ms), spread(latency["added_p95"], ms)]],
            loads["latency"],
        )
    if "viewers" in results:
        by_count: dict[int, list[dict[str, Any]]] = {}
        for sample in results["viewers"]:
            for row in sample:
                by_count.setdefault(row["viewers"], []).append(row)
        table(
            "Viewers at 4 fps (socket limit raised): frame delay = CDP frame at the executor → JPEG at the viewer",
            ["viewers", "fps each", "frame delay p95", "gateway CPU (cores)", "viewers per core"],
            [
                [
                    str(n),
                    spread(m["fps_each"], f2),
                    spread(m["delay_p95"], ms),
                    spread(m["gateway_cores"], f3),
                    spread(m["viewers_per_core"], f0),
                ]
                for n, m in ((n, merged(rows)) for n, rows in by_count.items())
            ],
            loads["viewers"],
        )
    if "compression" in results:
        on = merged([sample[0] for sample in results["compression"]])
        off = merged([sample[1] for sample in results["compression"]])
        savings = [
            1 - b / a if a > 0 else float("nan") for a, b in zip(on["gateway_cpu"], off["gateway_cpu"], strict=True)
        ]
        table(
            f"permessage-deflate, 3 viewers that offer it, 4 fps, ~445 kB frames: off saves {spread(savings, lambda v: f'{v * 100:.0f} %')} of the gateway's CPU",
            ["server deflate", "negotiated", "gateway CPU (% of a core)", "fps each"],
            [
                [
                    "on (uvicorn's default)",
                    "yes" if all(on["negotiated"]) else "no",
                    spread(on["gateway_cpu"], lambda v: f"{v * 100:.1f} %"),
                    spread(on["fps_each"], f2),
                ],
                [
                    "off (RAM's setting)",
                    "yes" if all(off["negotiated"]) else "no",
                    spread(off["gateway_cpu"], lambda v: f"{v * 100:.1f} %"),
                    spread(off["fps_each"], f2),
                ],
            ],
            loads["compression"],
        )
    if "slowlink" in results:
        slow = merged(results["slowlink"])
        table(
            "Slow link: one viewer reading 0.5 MB/s through a 64 KB receive buffer, ~445 kB frames",
            [
                "window",
                "frames",
                "fps",
                "bytes per frame",
                "longest gap",
                "client Ping→Pong p50",
                "p95",
                "disconnected",
            ],
            [
                [
                    spread(slow["seconds"], f0) + " s",
                    spread(slow["frames"], f0),
                    spread(slow["fps"], f2),
                    spread(slow["bytes_per_frame"], f0),
                    spread(slow["max_gap"], f1) + " s",
                    spread(slow["ping_p50"], ms),
                    spread(slow["ping_p95"], ms),
                    f"{sum(slow['disconnected'])} of {repeats}",
                ]
            ],
            loads["slowlink"],
        )
    if "rss" in results:
        rss = merged(results["rss"])
        table(
            "Gateway RSS with one stalled viewer (Ping off so it stays connected)",
            ["window", "first", "peak", "last", "peak / first"],
            [
                [
                    spread(rss["seconds"], f0) + " s",
                    spread(rss["first_mb"], f1) + " MB",
                    spread(rss["peak_mb"], f1) + " MB",
                    spread(rss["last_mb"], f1) + " MB",
                    spread(rss["growth"], lambda v: f"{v * 100:+.1f} %"),
                ]
            ],
            loads["rss"],
        )
    for name, (_measure, print_report) in EXTRA_PHASES.items():
        if name in results:
            print_report(results[name], loads[name], repeats)


def api_goal(row: dict[str, Any], load: tuple[float, float, float]) -> list[str]:
    p95 = statistics.median(row["p95"])
    if row.get("reference"):
        return ["(the reference below)", ""]
    if row.get("max_p50") is not None:
        return [
            f"p50 ≤ 2× idle ({row['max_p50'] * 1000:.1f} ms)",
            verdict(statistics.median(row["p50"]) <= row["max_p50"], load),
        ]
    if row["clients"] == 1:
        return ["p50 ≤ 3 ms", verdict(statistics.median(row["p50"]) <= 0.003, load)]
    if row["goal_rps"] is None:
        return ["", ""]
    met = statistics.median(row["rps"]) >= row["goal_rps"] and p95 <= 0.05
    goal = f"≥ {row['goal_rps']} req/s, p95 ≤ 50 ms"
    if row.get("goal_cpu_ms") is not None:
        met = met and statistics.median(row["cpu_ms"]) <= row["goal_cpu_ms"]
        goal += f", CPU ≤ {row['goal_cpu_ms']:g} ms"
    return [goal, verdict(met, load)]
