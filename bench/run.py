"""The benchmark's phases; see ``bench/__main__.py``."""

from __future__ import annotations

import argparse
import asyncio
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
PAGES = {"/anim": ANIMATION, "/slow": SLOW, "/click": CLICK, "/noise": NOISE}


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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    from executor.models import Computer

    call_command("migrate", verbosity=0)
    account = Account.objects.create(name="Bench")
    Computer.objects.create(id=COMPUTER, account=account, name="Bench")
    return api_key_create(account=account, kind="runner")[1]


def computer_ready(previous: str | None = None) -> Any:
    from django.db import close_old_connections

    from executor.models import Computer

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


@contextlib.contextmanager
def gateway(max_fps: int, ping: bool = True, deflate: bool = False) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    argv = [sys.executable, "-m", "bench.server", str(port)] + ([] if ping else ["--no-ping"]) + (["--deflate"] if deflate else [])
    env = {"RAM_VISUAL_MAX_FPS": str(max_fps), "RAM_PUBLIC_ORIGIN": f"http://127.0.0.1:{port}"}
    with process(argv, env) as child:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
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
    from executor.client import ExecutorLink

    computer = await asyncio.to_thread(computer_ready)
    captured: dict[bytes, float] = {}
    link = ExecutorLink(
        computer.executor_address,
        on_frame=lambda meta, jpeg: captured.setdefault(digest(jpeg), float(meta["captured_at"])),
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


async def raw_frames() -> int:
    from executor.client import ExecutorClient

    computer = await asyncio.to_thread(computer_ready)
    status = await asyncio.to_thread(ExecutorClient(computer).status)
    return int(status["raw_frames"])


# --- phases -------------------------------------------------------------------------


async def fps_phase(origin: str, key: str, pages: str, max_fps: int, seconds: float) -> dict[str, Any]:
    await navigate(origin, key, f"{pages}/anim")
    viewer = await open_viewer(origin, key)
    await until(lambda: viewer.frames)
    await asyncio.sleep(1)
    start_frames, start_raw, start = len(viewer.frames), await raw_frames(), time.time()
    await asyncio.sleep(seconds)
    frames, raw, elapsed = len(viewer.frames) - start_frames, await raw_frames() - start_raw, time.time() - start
    sizes = [size for _, _, size in viewer.frames[start_frames:]]
    await viewer.close()
    delivered, raw_fps = frames / elapsed, raw / elapsed
    return {
        "max_fps": max_fps,
        "raw_fps": raw_fps,
        "delivered_fps": delivered,
        "ratio": delivered / min(max_fps, raw_fps) if raw_fps else float("nan"),
        "bytes_per_frame": statistics.mean(sizes) if sizes else 0,
    }


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


async def latency_phase(origin: str, key: str, pages: str, max_fps: int) -> dict[str, Any]:
    await navigate(origin, key, f"{pages}/slow")
    async with direct_feed(max_fps) as captured:
        viewer = await open_viewer(origin, key)
        await asyncio.sleep(12)
        await viewer.close()
    added = [at - captured[d] for at, d, _ in viewer.frames[1:] if d in captured]
    return {"added_p50": pct(added, 0.5), "added_p95": pct(added, 0.95), "samples": len(added)}


async def viewers_phase(origin: str, key: str, pages: str, gateway_pid: int, counts: list[int], seconds: float) -> list[dict[str, Any]]:
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
            delays = [at - captured[d] for v, m in zip(viewers, marks, strict=True) for at, d, _ in v.frames[m:] if d in captured]
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
    return {"seconds": seconds, "first_mb": first / 1e6, "peak_mb": peak / 1e6, "last_mb": last / 1e6, "growth": peak / first - 1}


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


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


async def run_all(work: Path, args: argparse.Namespace) -> None:
    key = await asyncio.to_thread(setup_data)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pages = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"RAM gateway benchmark ({os.cpu_count()} CPUs); work dir {work}", flush=True)
    # The benchmark's own pages are the one local address its browser may reach.
    allow = {"RAM_BROWSER_EGRESS_ALLOW": f"127.0.0.1:{server.server_address[1]}"}
    with process([sys.executable, "manage.py", "run_executor", "--computer", COMPUTER], allow) as executor:
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread(computer_ready):
            if time.monotonic() > deadline or executor.poll() is not None:
                raise RuntimeError("the executor did not start")
            await asyncio.sleep(0.2)
        only = {p.strip() for p in args.only.split(",") if p.strip()}
        wanted = lambda phase: not only or phase in only  # noqa: E731
        fps_rows: list[dict[str, Any]] = []
        inputs: dict[int, dict[str, Any]] = {}
        latency: dict[str, Any] = {}
        viewers: list[dict[str, Any]] = []
        rss: dict[str, Any] = {}
        compression: list[dict[str, Any]] = []
        slow: dict[str, Any] = {}
        for max_fps in (4, 10):
            if not (wanted("fps") or wanted("inputs") or (max_fps == 4 and (wanted("latency") or wanted("viewers")))):
                continue
            with gateway(max_fps) as (origin, child):
                if wanted("fps"):
                    print(f"max_fps {max_fps}: delivered fps beside raw CDP…", flush=True)
                    fps_rows.append(await fps_phase(origin, key, pages, max_fps, args.seconds))
                if wanted("inputs"):
                    print(f"max_fps {max_fps}: input to ack and to the first changed frame…", flush=True)
                    inputs[max_fps] = await input_phase(origin, key, pages, max_fps)
                if max_fps == 4 and wanted("latency"):
                    print("latency added over raw CDP…", flush=True)
                    latency = await latency_phase(origin, key, pages, max_fps)
                if max_fps == 4 and wanted("viewers"):
                    print("viewers per gateway core…", flush=True)
                    counts = [int(n) for n in args.viewers.split(",")]
                    viewers = await viewers_phase(origin, key, pages, child.pid, counts, args.seconds)
        if wanted("compression"):
            print("permessage-deflate on vs off, 3 viewers that offer it…", flush=True)
            compression = await compression_phase(key, pages, args.seconds)
        if wanted("slowlink"):
            print(f"a viewer behind a 0.5 MB/s link for {args.slow_seconds:.0f} s…", flush=True)
            slow = await slow_link_phase(key, pages, args.slow_seconds)
        if wanted("rss"):
            print(f"server RSS with one stalled viewer for {args.rss_seconds:.0f} s…", flush=True)
            rss = await rss_phase(key, pages, args.rss_seconds)
    server.shutdown()

    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    if fps_rows:
        table(
            "Frames: delivered vs raw CDP screencast of the same animating page",
            ["max_fps", "raw CDP fps", "delivered fps", "delivered / min(max_fps, raw)", "bytes per frame"],
            [[str(r["max_fps"]), f"{r['raw_fps']:.1f}", f"{r['delivered_fps']:.2f}", f"{r['ratio']:.3f}", f"{r['bytes_per_frame']:,.0f}"] for r in fps_rows],
        )
    if inputs:
        table(
            "Inputs",
            ["max_fps", "input→ack p50", "input→ack p95", "input→first changed frame p50", "p95", "budget 1/max_fps + 50 ms"],
            [[str(f), ms(i["ack_p50"]), ms(i["ack_p95"]), ms(i["changed_p50"]), ms(i["changed_p95"]), ms(i["budget"])] for f, i in inputs.items()],
        )
    if latency:
        table(
            "Latency the gateway adds over raw CDP (CDP frame at the executor → JPEG at the client; page changing every 500 ms)",
            ["samples", "p50", "p95"],
            [[str(latency["samples"]), ms(latency["added_p50"]), ms(latency["added_p95"])]],
        )
    if viewers:
        table(
            "Viewers at 4 fps (socket limit raised): frame delay = CDP frame at the executor → JPEG at the viewer",
            ["viewers", "fps each", "frame delay p95", "gateway CPU (cores)", "viewers per core"],
            [[str(r["viewers"]), f"{r['fps_each']:.2f}", ms(r["delay_p95"]), f"{r['gateway_cores']:.3f}", f"{r['viewers_per_core']:.0f}"] for r in viewers],
        )
    if compression:
        on, off = compression
        saving = 1 - off["gateway_cpu"] / on["gateway_cpu"] if on["gateway_cpu"] > 0 else float("nan")
        table(
            f"permessage-deflate, 3 viewers that offer it, 4 fps, ~445 kB frames: off saves {saving * 100:.0f} % of the gateway's CPU",
            ["server deflate", "negotiated", "gateway CPU (% of a core)", "fps each"],
            [
                ["on (uvicorn's default)", "yes" if on["negotiated"] else "no", f"{on['gateway_cpu'] * 100:.1f} %", f"{on['fps_each']:.2f}"],
                ["off (RAM's setting)", "yes" if off["negotiated"] else "no", f"{off['gateway_cpu'] * 100:.1f} %", f"{off['fps_each']:.2f}"],
            ],
        )
    if slow:
        table(
            "Slow link: one viewer reading 0.5 MB/s through a 64 KB receive buffer, ~445 kB frames",
            ["window", "frames", "fps", "bytes per frame", "longest gap", "client Ping→Pong p50", "p95", "disconnected"],
            [[f"{slow['seconds']:.0f} s", str(slow["frames"]), f"{slow['fps']:.2f}", f"{slow['bytes_per_frame']:,.0f}", f"{slow['max_gap']:.1f} s", ms(slow["ping_p50"]), ms(slow["ping_p95"]), "yes" if slow["disconnected"] else "no"]],
        )
    if rss:
        table(
            "Gateway RSS with one stalled viewer (Ping off so it stays connected)",
            ["window", "first", "peak", "last", "peak / first"],
            [[f"{rss['seconds']:.0f} s", f"{rss['first_mb']:.1f} MB", f"{rss['peak_mb']:.1f} MB", f"{rss['last_mb']:.1f} MB", f"{rss['growth'] * 100:+.1f} %"]],
        )
