"""Popups and tabs in the computer's browser: the active page follows what the page
opens (window.open, target=_blank) and comes back to the opener when a popup closes;
the agent lists, switches and closes tabs through its actions (real Chromium)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor.tabs import MAX_TABS
from tests.support.screen import on_executor
from tests.support.site import Site, serve_site
from tests.support.waits import eventually


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[Site]:
    with serve_site() as served:
        allow_egress(served.origin)
        yield served


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def tabs() -> list[dict[str, Any]]:
    return list(client().status()["tabs"])


def active() -> dict[str, Any]:
    return next((t for t in tabs() if t["active"]), {"title": "", "url": ""})


def signed_in(site: Site, screen: Any, name: str = "Ana") -> None:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/")
        executor.type(lease, "#name", name)
        executor.click(lease, "#sign-in")
        executor.wait_for(lease, "#connect", timeout_ms=5000)
    finally:
        executor.lease_release(lease)


def test_a_popup_becomes_the_active_page_and_its_closing_returns_to_the_opener(screen: Any, site: Site) -> None:
    signed_in(site, screen)
    [home] = tabs()
    assert home["active"] and home["title"] == "Portal home"
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.click(lease, "#connect")
        popup = eventually(lambda: active()["url"].endswith("/oauth/authorize") and active())
        assert popup and popup["id"] != home["id"]
        assert [t["active"] for t in tabs()] == [False, True]
        # The agent's next actions act on the popup, the active page.
        executor.type(lease, "#user", "ana@example.com")
        executor.click(lease, "#allow")
        assert eventually(lambda: len(tabs()) == 1)
        assert active()["id"] == home["id"]
        assert executor.extract_text(lease, "#connected") == "Connected as ana@example.com"
    finally:
        executor.lease_release(lease)
    assert site.approvals == ["ana@example.com"]


def test_the_agent_lists_switches_and_closes_tabs(screen: Any, site: Site) -> None:
    signed_in(site, screen)
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.click(lease, "#docs")  # target=_blank
        assert eventually(lambda: active()["title"] == "Documentation")
        listed = executor.action(lease, "tabs_list")["tabs"]
        assert [(t["title"], t["active"]) for t in listed] == [("Portal home", False), ("Documentation", True)]
        home, docs = listed[0]["id"], listed[1]["id"]
        switched = executor.action(lease, "tab_switch", tab=home)["tabs"]
        assert [t["active"] for t in switched] == [True, False]
        assert executor.extract_text(lease, "h1") == "Signed in as Ana"
        closed = executor.action(lease, "tab_close", tab=docs)["tabs"]
        assert [(t["id"], t["active"]) for t in closed] == [(home, True)]
        with pytest.raises(ExecutorError) as missing:
            executor.action(lease, "tab_switch", tab=docs)
        assert missing.value.reason == "tab_not_found"
        for bad in ({"tab": "2"}, {"tab": "t0"}, {}, {"tab": home, "extra": 1}):
            with pytest.raises(ExecutorError) as refused:
                executor.action(lease, "tab_switch", **bad)
            assert refused.value.reason == "bad_request"
        # Closing the last tab leaves a blank page, never no page at all.
        executor.action(lease, "tab_close", tab=home)
        assert eventually(lambda: [t["url"] for t in tabs()] == ["about:blank"])
    finally:
        executor.lease_release(lease)


def test_tab_actions_need_the_lease(screen: Any) -> None:
    with pytest.raises(ExecutorError) as refused:
        client().action("not-the-lease", "tab_close", tab="t1")
    assert refused.value.reason == "lease_invalid"
    assert len(tabs()) == 1


def test_a_page_opening_popups_in_a_loop_is_held_at_the_tab_limit(
    screen: Any, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    signed_in(site, screen)
    before = len(tabs())
    opened = on_executor(
        screen,
        lambda: screen.page.evaluate(
            "() => { let n = 0; for (let i = 0; i < 40; i++) if (window.open('/docs', 'w' + i)) n++; return n; }"
        ),
    )
    assert opened > MAX_TABS - before  # the page tried beyond the limit
    assert eventually(lambda: len(tabs()) == MAX_TABS)

    def closed() -> int:
        return sum("closing the new one" in record.getMessage() for record in list(caplog.records))

    # Every page beyond the limit is closed as it opens: once each of them was, none is left over.
    eventually(lambda: closed() >= opened - (MAX_TABS - before), what="every page beyond the limit to be closed")
    assert closed() == opened - (MAX_TABS - before)
    assert len(tabs()) == MAX_TABS
