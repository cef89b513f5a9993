"""Masked screenshots of a computer's page, and where they are kept.

Every capture is masked at the source: the password fields of the page (in
every frame) and any fields the caller names — the fields an agent typed into
— are blurred with Pillow (``blurred``) before a byte is stored. The
``screenshot`` tool, the capture after a step that navigated or typed and the
capture on a pause go through ``masked_png``; ``browser_login``'s diagnostic
capture measures its password fields over its own CDP session (bounded by the
login's budget) and blurs them with the same ``blurred``.

The bytes are kept through Django's storage API under the ``artifacts`` alias
of ``STORAGES``: files under ``var/artifacts`` in the embedded default, any
S3-compatible bucket through django-storages in production (several hosts
share no disk). The row (``DiagnosticArtifact``) holds the account the
capture belongs to and the name of the stored file; ``artifacts_sweep``
deletes both after ``RAM_ARTIFACT_RETENTION_DAYS``.
"""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone
from PIL import Image, ImageFilter
from playwright.async_api import Page

from executor.models import ARTIFACT_STORAGE, Computer, DiagnosticArtifact

logger = logging.getLogger(__name__)

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024
# Pixels blurred around each masked field's box.
BLUR_MARGIN = 12
# Fields blurred in every capture besides the ones a caller names.
SECRET_FIELDS = (
    "input[type='password' i]",
    "input[autocomplete='current-password' i]",
    "input[autocomplete='new-password' i]",
    "input[autocomplete='one-time-code' i]",
)
# At most this many elements per selector are blurred (a page of hundreds is blurred by its first ones).
MAX_MASKED_PER_SELECTOR = 50


def artifact_storage() -> Storage:
    return storages[ARTIFACT_STORAGE]


# A box to blur: x, y, width and height in CSS pixels of the viewport.
Box = tuple[float, float, float, float]


async def _boxes(page: Page, selectors: Sequence[str], timeout_ms: float) -> list[Box]:
    """The boxes of every secret field in every frame and of ``selectors``.

    Fails closed: a field that cannot be counted or measured raises, and no capture is stored.
    """
    boxes: list[Box] = []
    wanted = [(frame, selector) for frame in page.frames for selector in SECRET_FIELDS]
    wanted += [(page.main_frame, selector) for selector in selectors]
    for frame, selector in wanted:
        fields = frame.locator(selector)
        for index in range(min(await fields.count(), MAX_MASKED_PER_SELECTOR)):
            box = await fields.nth(index).bounding_box(timeout=timeout_ms)
            if box:  # None: not rendered, so not on the screenshot either
                boxes.append((box["x"], box["y"], box["width"], box["height"]))
    return boxes


def blurred(png: bytes, boxes: Sequence[Box], *, css_width: float | None = None) -> bytes:
    """``png`` with every box blurred beyond reading (boxes in CSS pixels; ``css_width`` is the
    viewport's width in CSS pixels when the image may be in device pixels)."""
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
    """A PNG of the viewport with every password field and the fields of ``selectors`` blurred.

    The boxes are measured right before the screenshot, and the page is not touched in between.
    """
    boxes = await _boxes(page, selectors, min(timeout_ms, 2_000))
    png = await page.screenshot(type="png", timeout=timeout_ms, animations="disabled", caret="hide")
    return blurred(png, boxes)


def artifact_store(*, computer_id: str, kind: str, data: bytes, content_type: str = "image/png") -> uuid.UUID:
    """Store an already masked capture for the computer's (current) account."""
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ValueError("capture too large")
    account_id = Computer.objects.values_list("account_id", flat=True).get(pk=computer_id)
    artifact_id = uuid.uuid4()
    name = artifact_storage().save(f"{timezone.now():%Y/%m/%d}/{artifact_id}.png", ContentFile(data))
    try:
        DiagnosticArtifact.objects.create(
            id=artifact_id,
            computer_id=computer_id,
            account_id=account_id,
            kind=kind,
            content_type=content_type,
            storage_name=name,
            size=len(data),
        )
    except Exception:
        artifact_storage().delete(name)
        raise
    return artifact_id


def artifact_store_from_thread(**kwargs: Any) -> uuid.UUID:
    """``artifact_store`` for the executor's worker threads, which keep no connection open."""
    try:
        return artifact_store(**kwargs)
    finally:
        connection.close()


def artifact_file_delete(name: str) -> None:
    """Delete a stored file after the row's deletion commits (quietly when it is gone already)."""

    def delete() -> None:
        try:
            artifact_storage().delete(name)
        except Exception:  # noqa: BLE001 - the sweep's next pass cannot find it either; nothing to retry
            logger.warning("A stored artifact file could not be deleted.")

    transaction.on_commit(delete)


def artifacts_sweep() -> int:
    """Delete the captures older than ``RAM_ARTIFACT_RETENTION_DAYS`` (their rows and stored files)."""
    cutoff = timezone.now() - timedelta(days=settings.RAM_ARTIFACT_RETENTION_DAYS)
    deleted = 0
    for artifact in DiagnosticArtifact.objects.filter(created_at__lt=cutoff).iterator():
        with transaction.atomic():
            artifact.delete()  # the post_delete receiver deletes the file after commit
        deleted += 1
    return deleted
