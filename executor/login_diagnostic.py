"""browser_login's diagnostic capture: a masked screenshot of the page, stored as an artifact."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging

from playwright.async_api import CDPSession, ElementHandle, Page

from executor import taint
from executor.login_budget import Budget
from executor.masking import blurred
from executor.server_link import ServerLink

logger = logging.getLogger(__name__)


async def capture_diagnostic(
    page: Page,
    *,
    server: ServerLink,
    budget: Budget,
    cdp: CDPSession | None = None,
    fields: list[ElementHandle] | tuple[ElementHandle, ...] = (),
) -> str | None:
    """A screenshot with every tainted field masked by the page's rendering (``executor/taint.py``,
    the one masking path of every picture) before it is taken; as well, every password field and
    every field the login filled (``fields``) are blurred in the image before it is stored.

    Taken over CDP (``Page.captureScreenshot``): it works while a navigation is pending (a slow
    portal), where the page's scripting waits for the commit. The whole capture is bounded by the
    budget; if the masks cannot be re-applied, nothing is stored.
    """
    if budget.left() < 1.0:
        return None
    try:
        return await asyncio.wait_for(_capture(page, server, budget, cdp, fields), timeout=budget.left())
    except Exception as exc:  # noqa: BLE001 - the login result does not fail because of its diagnostic
        logger.warning("diagnostic capture failed: %s", type(exc).__name__)
        return None


async def _capture(
    page: Page,
    server: ServerLink,
    budget: Budget,
    cdp: CDPSession | None,
    fields: list[ElementHandle] | tuple[ElementHandle, ...] = (),
) -> str | None:
    own = cdp is None
    session = cdp if cdp is not None else await page.context.new_cdp_session(page)
    try:
        await taint.ensure_masked(page)
        boxes = await _password_boxes(session) + await _filled_boxes(fields, budget)
        metrics = await session.send("Page.getLayoutMetrics")
        shot = await session.send("Page.captureScreenshot", {"format": "png"})
    finally:
        if own:
            detach_later(session)
    # Boxes are in CSS pixels; the image may be in device pixels.
    png = blurred(base64.b64decode(shot["data"]), boxes, css_width=float(metrics["cssLayoutViewport"]["clientWidth"]))
    if budget.spent:
        return None
    artifact_id = await server.artifact_store(kind="diagnostic", data=png)
    return str(artifact_id)


async def _filled_boxes(
    fields: list[ElementHandle] | tuple[ElementHandle, ...], budget: Budget
) -> list[tuple[float, float, float, float]]:
    """The viewport boxes of the fields the login filled that are still rendered. A field whose
    document is gone is in no image; a field that does not answer in time stops the capture."""
    boxes = []
    for element in fields:
        try:
            box = await asyncio.wait_for(element.bounding_box(), timeout=min(2.0, budget.left()))
        except TimeoutError:
            raise
        except Exception:  # noqa: BLE001, S112 - its document was replaced: not on the screen
            continue
        if box:
            boxes.append((box["x"], box["y"], box["width"], box["height"]))
    return boxes


async def _password_boxes(cdp: CDPSession) -> list[tuple[float, float, float, float]]:
    """The viewport boxes (x, y, width, height) of the top document's password inputs."""
    document = await cdp.send("DOM.getDocument", {"depth": 0})
    found = await cdp.send(
        "DOM.querySelectorAll", {"nodeId": document["root"]["nodeId"], "selector": "input[type='password']"}
    )
    boxes = []
    for node_id in found.get("nodeIds", []):
        try:
            model = await cdp.send("DOM.getBoxModel", {"nodeId": node_id})
        except Exception as exc:  # noqa: BLE001 - a field that is not rendered is not in the image
            if "box model" in str(exc).lower():
                continue
            raise
        quad = model["model"]["border"]
        xs, ys = quad[0::2], quad[1::2]
        boxes.append((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)))
    return boxes


_DETACHING: set[asyncio.Task[None]] = set()


def detach_later(cdp: CDPSession) -> None:
    async def detach() -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(cdp.detach(), timeout=30)

    task = asyncio.ensure_future(detach())
    _DETACHING.add(task)
    task.add_done_callback(_DETACHING.discard)
