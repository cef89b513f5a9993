"""Masked screenshots of a computer's page (executor side).

Every capture is masked at the source. Secret fields — the tainted fields of
``executor/taint.py``: password fields now or before, one-time-code fields, what
``browser_login`` filled or a person typed into, and their swapped-in clones — are
masked by the page's own rendering (one path for every picture, the screen feed
included): ``masked_png`` re-applies the masks in every frame right before the
screenshot, and the page's own text that shows a secret is covered there too. The fields a caller names — the fields an agent typed into, which hold
no secret of the agent's but may hold a person's data — are also blurred with
Pillow (``blurred``) before a byte leaves the executor; while a tainted value is on
the page only names in the value-blind grammar are measured. The ``screenshot``
tool, the capture after a step that navigated or typed and the capture on a pause
go through ``masked_png``; ``browser_login``'s diagnostic capture goes through
``taint.ensure_masked`` too. The server keeps them (``executor/artifacts.py``).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from PIL import Image, ImageFilter
from playwright.async_api import Page

from executor import taint

# Pixels blurred around each masked field's box.
BLUR_MARGIN = 12
# At most this many elements per selector are blurred (a page of hundreds is blurred by its first ones).
MAX_MASKED_PER_SELECTOR = 50


# A box to blur: x, y, width and height in CSS pixels of the viewport.
Box = tuple[float, float, float, float]


async def _boxes(page: Page, selectors: Sequence[str], timeout_ms: float) -> list[Box]:
    """The boxes of the fields ``selectors`` name (only value-blind ones while a tainted value is
    on the page: which boxes are blurred must not depend on a secret either).

    Fails closed: a field that cannot be counted or measured raises, and no capture is stored.
    """
    boxes: list[Box] = []
    if any(not taint.value_blind(s) for s in selectors) and await taint.held(page):
        selectors = [s for s in selectors if taint.value_blind(s)]
    for selector in selectors:
        fields = page.main_frame.locator(selector)
        for index in range(min(await fields.count(), MAX_MASKED_PER_SELECTOR)):
            box = await fields.nth(index).bounding_box(timeout=timeout_ms)
            if box:  # None: not rendered, so not on the screenshot either
                boxes.append((box["x"], box["y"], box["width"], box["height"]))
    return boxes


def blurred(png: bytes, boxes: Sequence[Box], *, css_width: float | None = None) -> bytes:
    """``png`` with every box blurred beyond reading (boxes in CSS pixels; ``css_width`` is the
    viewport's width in CSS pixels when the image may be in device pixels). With no box, ``png``
    itself: decoding and encoding it again would change no pixel, and took most of a capture's time."""
    if not boxes:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB")
    scale = image.width / max(1.0, css_width) if css_width else 1.0
    for x, y, width, height in boxes:
        left = max(0, int(x * scale) - BLUR_MARGIN)
        top = max(0, int(y * scale) - BLUR_MARGIN)
        right = min(image.width, int((x + width) * scale) + BLUR_MARGIN)
        bottom = min(image.height, int((y + height) * scale) + BLUR_MARGIN)
        if right <= left or bottom <= top:
            continue
        region = image.crop((left, top, right, bottom))
        # A heavy blur, then a flat wash: no glyph survives in the stored bytes.
        region = region.filter(ImageFilter.GaussianBlur(radius=16)).filter(ImageFilter.BoxBlur(12))
        image.paste(region, (left, top))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def masked_png(page: Page, *, selectors: Sequence[str] = (), timeout_ms: float = 10_000) -> bytes:
    """A PNG of the viewport with every tainted field masked and the fields of ``selectors`` blurred.

    The masks are re-applied and the boxes measured right before the screenshot, and the page is
    not touched in between.
    """
    await taint.ensure_masked(page)
    boxes = await _boxes(page, selectors, min(timeout_ms, 2_000))
    png = await page.screenshot(type="png", timeout=timeout_ms, animations="disabled", caret="hide")
    return blurred(png, boxes)
