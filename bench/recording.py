"""The ``recording`` table: what a run's recording costs the executor (``executor/recording.py``).

Frames are real screencast frames: Chromium (the computers' own launch flags) renders a page and
``Page.captureScreenshot`` gives the JPEG the screen feed would carry (quality 65, 1280 × 720),
one per half second of the page's own clock, for a minute of recording at 2 fps. Each is then
put through exactly the recorder's path — the JPEG decoded (``decoded``) and encoded by the
recorder's ``SegmentWriter`` (libvpx-vp9, realtime) — and the CPU time of that path is measured
(``time.thread_time``: the encoder's thread; libvpx's own row threads are counted by
``time.process_time`` too, which is what the table reports). The masking costs nothing here: the
page's own rendering masks the secret fields (``executor/taint.py``) before the frame exists.

Pages: a form whose text changes now and then (what most runs look like) and a page that
animates all the time (the worst case for the encoder). ``python -m bench.recording`` prints it alone.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from typing import Any

FRAMES = 120  # one minute at 2 fps
JPEG_QUALITY = 65

FORM = (
    """<title>Sign in</title><style>body{font:16px sans-serif;margin:2rem}input{font-size:16px;width:20rem}</style>
<h1>Supplier portal</h1><p id=clock>Loading…</p><form><p><label>Username <input value="ana@acme.example"></label></p>
<p><label>Password <input type=password value="a-password"></label></p><p><button>Sign in</button></p></form>
<ul>"""
    + "".join(f"<li>Invoice {n}: 1{n}4,00 EUR due on 2026-12-{n % 28 + 1:02d}</li>" for n in range(14))
    + """</ul>
<script>let n = 0; function tick() { clock.textContent = 'Step ' + (++n >> 3); } tick();</script>"""
)

ANIMATED = """<title>Animated</title><style>body{margin:0;background:#fff}
.b{position:absolute;width:180px;height:120px;border-radius:12px}</style>
<div class=b id=a style="background:#4285f4"></div><div class=b id=c style="background:#ea4335"></div>
<p id=t style="position:absolute;top:600px;left:40px;font:24px sans-serif"></p>
<script>let n = 0; function tick() { n++; a.style.left = (n * 37 % 1100) + 'px'; a.style.top = (n * 23 % 500) + 'px';
c.style.left = (1100 - n * 29 % 1100) + 'px'; c.style.top = (500 - n * 31 % 500) + 'px'; t.textContent = 'frame ' + n; }</script>"""


async def frames(html: str) -> list[bytes]:
    """``FRAMES`` screencast JPEGs of ``html``, the page moved on by one ``tick()`` between two."""
    from playwright.async_api import async_playwright

    from executor.runtime import CHROMIUM_ARGS

    shots: list[bytes] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            await page.set_content(html)
            cdp = await page.context.new_cdp_session(page)
            for _ in range(FRAMES):
                await page.evaluate("() => tick()")
                shot = await cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": JPEG_QUALITY})
                shots.append(base64.b64decode(shot["data"]))
        finally:
            await browser.close()
    return shots


def encode(shots: list[bytes]) -> dict[str, float]:
    """The recorder's path over ``shots`` at 2 fps: CPU per frame (decode + encode) and the segment's bytes."""
    from executor.recording import SegmentWriter, decoded

    writer = SegmentWriter(fps=2)
    cpu = time.process_time()
    wall = time.perf_counter()
    for number, jpeg in enumerate(shots):
        image = decoded(jpeg)
        if image is None:
            raise RuntimeError("a captured frame could not be decoded")
        writer.add(image, number * 500)
    data = writer.close()
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    seconds = len(shots) / 2
    return {
        "cpu_ms": cpu / len(shots) * 1000,
        "wall_ms": wall / len(shots) * 1000,
        "core_share": cpu / seconds * 100,
        "bytes_per_minute": len(data) / seconds * 60,
        "jpeg_kib": sum(len(s) for s in shots) / len(shots) / 1024,
    }


def rows() -> list[list[str]]:
    out: list[list[str]] = []
    for name, html in (("form, text changing", FORM), ("animated page", ANIMATED)):
        shots = asyncio.run(frames(html))
        result = encode(shots)
        out.append(
            [
                name,
                f"{result['jpeg_kib']:.0f} KiB",
                f"{result['cpu_ms']:.1f} ms",
                f"{result['wall_ms']:.1f} ms",
                f"{result['core_share']:.1f} %",
                f"{result['bytes_per_minute'] / 1024:.0f} KiB",
            ]
        )
    return out


TITLE = "Recording: JPEG decode + VP9 encode per frame at 2 fps (the recorder's path), one minute of frames"
HEADER = ["page", "JPEG frame", "CPU a frame", "wall a frame", "share of one core", "bytes a minute"]


def report(load: tuple[float, float, float], table_rows: list[list[str]]) -> Any:
    from bench.run import table

    table(TITLE, HEADER, table_rows, load)


if __name__ == "__main__":
    load = os.getloadavg()
    print(f"Load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    from bench import page as bench_page

    table_rows = rows()
    print(f"\n{TITLE} ({os.cpu_count()} cores)\n")
    print(bench_page.render_table(HEADER, table_rows), flush=True)
