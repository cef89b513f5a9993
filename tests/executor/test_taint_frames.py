"""Tainted fields inside shadow roots (open, nested, closed, attached late) and inside a
cross-site frame that Chromium runs in a process of its own (an out-of-process iframe), against
real Chromium (tests/support/hostile_pages.py's ``/shadow`` and ``/framed``).

Each is tainted, masked in every picture whatever its type, and opens the selector window,
exactly like a field of the top document: the pixel tests compare every secret field, toggled
to ``type=text`` or cloned, with the masked and the clear renderings of the same value, and every
agent-visible answer is collected for two secrets of one length."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.async_api import Frame

from computers.client import ExecutorError
from executor import masking, taint
from executor.runtime import Executor
from tests.executor.test_taint import FIRST, SECOND, _crop, _same, client, fill_like_browser_login, outcome
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor
from tests.support.waits import eventually

# A value of FIRST's password's length that only the page's script sets: the executor never learns it,
# so ``#ref-clear`` shows it clear (a field that shows a value the executor knows is masked too).
UNKNOWN = "Zq8vLw3mXk7p"

# Value selectors (any engine but plain CSS): refused while a secret is on the page.
ENGINES = ["internal:role=textbox", "text=/Shadow/", 'input[value^="T"]', "#ref-masked:placeholder-shown"]


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    with serve_hostile() as served:
        allow_egress(served.origin)
        allow_egress(served.away)
        yield served


def pictures(screen: Executor) -> list[bytes]:
    """The screenshot tool's PNG and a raw frame of the screen (CDP, as the screencast captures it)."""

    async def both() -> list[bytes]:
        png = await masking.masked_png(screen.page)
        cdp = await screen.page.context.new_cdp_session(screen.page)
        try:
            raw = await cdp.send("Page.captureScreenshot", {"format": "png"})
        finally:
            await cdp.detach()
        return [png, base64.b64decode(raw["data"])]

    result: list[bytes] = on_executor(screen, both)
    return result


def page_call(screen: Executor, script: str, arg: Any = None) -> Any:
    return on_executor(screen, lambda: screen.page.evaluate(script, arg))


def shadow_answers(screen: Executor, site: HostileSite, secret: str) -> dict[str, Any]:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/shadow")
        page_call(screen, "v => fillAll(v)", secret)  # the site's script, or a person's typing
        page_call(
            screen, "document.getElementById('ref-masked').value = ''; document.getElementById('ref-clear').value = ''"
        )
        seen: dict[str, Any] = {}
        for selector in ENGINES:
            executor.lease_renew(lease)
            seen[selector] = outcome(lambda s=selector: executor.wait_for(lease, s, timeout_ms=300))
        seen["blind"] = outcome(lambda: executor.wait_for(lease, "#ref-clear", timeout_ms=2000))
        seen["text"] = outcome(lambda: executor.extract_text(lease))
        observed = executor.observe(100_000)
        seen["observe"] = {key: observed[key] for key in ("url", "title", "text")}
        seen["tainted"] = len(on_executor(screen, lambda: taint.tainted_nodes(screen.page)))
        return seen
    finally:
        executor.lease_release(lease)


def test_secret_fields_in_open_nested_and_closed_shadow_roots_open_the_window(
    screen: Executor, site: HostileSite
) -> None:
    first = shadow_answers(screen, site, FIRST[1])
    second = shadow_answers(screen, site, SECOND[1])
    assert first == second
    for selector in ENGINES:
        assert first[selector][:2] == ("error", taint.REASON), selector
    assert first["blind"] == ("ok", {})
    # sp (open root), otp (nested open roots), cp (closed root) and the light DOM's ref-masked.
    assert first["tainted"] == 4


def test_only_a_closed_roots_field_holding_a_value_opens_the_window(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/shadow")
        assert executor.wait_for(lease, "internal:role=textbox", timeout_ms=2000) == {}
        # Once the document has loaded, its closed root is adopted (nothing here asks for it).
        eventually(lambda: len(on_executor(screen, lambda: taint.tainted_nodes(screen.page))) == 4, what="four tainted nodes")
        page_call(screen, "v => fillClosed(v)", FIRST[1])  # the page's own script reaches its closed root
        with pytest.raises(ExecutorError) as refused:
            executor.wait_for(lease, "internal:role=textbox", timeout_ms=300)
        assert refused.value.reason == taint.REASON
        # Focus is on it, through the closed root: only Tab and Escape are pressed there.
        with pytest.raises(ExecutorError) as key:
            executor.press(lease, "Home")
        assert key.value.reason == taint.KEY_REASON
        executor.press(lease, "Tab")
    finally:
        executor.lease_release(lease)


def test_secret_fields_in_shadow_roots_are_masked_in_every_picture(screen: Executor, site: HostileSite) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/shadow")
        # Once the document has loaded, its closed root is adopted (nothing here asks for it).
        eventually(lambda: len(on_executor(screen, lambda: taint.tainted_nodes(screen.page))) == 4, what="four tainted nodes")
        page_call(screen, "attachLate()")  # a shadow root attached to an element already in the document
        page_call(screen, "v => fillAll(v)", UNKNOWN)
        # A person clicks the late root's own show button: the root is found before its handler runs.
        on_executor(screen, lambda: screen.page.mouse.click(540, 460))
        page_call(screen, "showAll(); cloneAll()")  # the page's show-password toggles: type swaps and a clone
        assert page_call(screen, "types()") == ["text", "text", "text", "text"]
        for picture in pictures(screen):
            masked, clear = _crop(picture, 200), _crop(picture, 280)
            assert not _same(masked, clear)
            for top in (40, 120, 360, 440):  # the clone (open), nested open, closed, late open root
                assert _same(_crop(picture, top), masked), top
    finally:
        executor.lease_release(lease)


def test_a_filled_field_in_a_shadow_root_keeps_its_mask_when_the_page_removes_it(
    screen: Executor, site: HostileSite
) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/shadow")
        fill_like_browser_login(screen, site, "#otp", FIRST[1])
        style = page_call(
            screen,
            """async () => { const f = outer.shadowRoot.getElementById('inner').shadowRoot.getElementById('otp');
                 f.style.setProperty('-webkit-text-security', 'none'); await new Promise(requestAnimationFrame);
                 return getComputedStyle(f).webkitTextSecurity; }""",
        )
        assert style == "disc"
    finally:
        executor.lease_release(lease)


# --- An out-of-process iframe ---------------------------------------------------------------


def the_frame(screen: Executor) -> Frame:
    frames = [frame for frame in screen.page.frames if frame != screen.page.main_frame]
    assert len(frames) == 1
    return frames[0]


def out_of_process(screen: Executor) -> bool:
    """Whether the frame runs in a process (a CDP target) of its own."""

    async def check() -> bool:
        try:
            cdp = await screen.page.context.new_cdp_session(the_frame(screen))
        except Exception:  # noqa: BLE001 - Playwright: the frame is part of its parent's session
            return False
        await cdp.detach()
        return True

    result: bool = on_executor(screen, check)
    return result


def framed_answers(screen: Executor, site: HostileSite, secret: str) -> dict[str, Any]:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/framed")
        on_executor(screen, lambda: the_frame(screen).wait_for_selector("#swap"))
        assert out_of_process(screen)
        on_executor(screen, lambda: the_frame(screen).evaluate("v => { swap.value = v }", secret))
        seen: dict[str, Any] = {}
        for selector in ENGINES:
            executor.lease_renew(lease)
            seen[selector] = outcome(lambda s=selector: executor.wait_for(lease, s, timeout_ms=300))
        seen["text"] = outcome(lambda: executor.extract_text(lease))
        observed = executor.observe(100_000)
        seen["observe"] = {key: observed[key] for key in ("url", "title", "text")}
        seen["tainted"] = len(on_executor(screen, lambda: taint.tainted_nodes(screen.page)))
        return seen
    finally:
        executor.lease_release(lease)


def test_a_secret_field_in_an_out_of_process_frame_opens_the_window(screen: Executor, site: HostileSite) -> None:
    first = framed_answers(screen, site, FIRST[1])
    second = framed_answers(screen, site, SECOND[1])
    assert first == second
    for selector in ENGINES:
        assert first[selector][:2] == ("error", taint.REASON), selector
    assert first["tainted"] == 3  # the frame's three password fields


def test_secret_fields_in_an_out_of_process_frame_are_masked_in_every_picture(
    screen: Executor, site: HostileSite
) -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/framed")
        on_executor(screen, lambda: the_frame(screen).wait_for_selector("#swap"))
        frame = the_frame(screen)
        assert out_of_process(screen)
        on_executor(
            screen,
            lambda: frame.evaluate("v => { document.body.dataset.v = v; swap.value = v; clone.value = v }", UNKNOWN),
        )
        for button in ("#refs", "#eye", "#eye2"):  # the frame's own buttons: references, a type swap, a clone
            on_executor(screen, lambda b=button: frame.click(b))
        assert on_executor(screen, lambda: frame.evaluate("[swap.type, clone.type]")) == ["text", "text"]
        for picture in pictures(screen):
            masked, clear = _crop(picture, 200), _crop(picture, 280)
            assert not _same(masked, clear)
            assert _same(_crop(picture, 40), masked)
            assert _same(_crop(picture, 120), masked)
    finally:
        executor.lease_release(lease)
