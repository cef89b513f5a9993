"""JavaScript dialogs in the computer's browser never block silently: an ``alert``,
``confirm``, ``prompt`` or ``beforeunload`` a page opens waits, listed in the status and
the observation, until the agent (``dialog_answer``) or a person answers it; the action
that opened it returns at once, and other actions are refused while it blocks the page
(real Chromium)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor import handlers
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


def dialogs() -> list[dict[str, Any]]:
    return list(client().status()["dialogs"])


@pytest.fixture
def lease(screen: Any, site: Site) -> Iterator[str]:
    executor = client()
    lease_id = executor.lease_acquire()
    try:
        executor.navigate(lease_id, site.origin + "/dialogs")
        yield lease_id
    finally:
        executor.lease_release(lease_id)


def answer_text(lease_id: str) -> str:
    return client().extract_text(lease_id, "#answer")


def test_a_click_that_opens_a_confirm_returns_at_once_and_the_dialog_waits(lease: str) -> None:
    executor = client()
    started = time.monotonic()
    reply = executor.click(lease, "#confirm")
    assert time.monotonic() - started < 10  # not the action's 25 s limit: it stopped waiting at the dialog
    opened = reply["dialog_opened"]
    assert opened["kind"] == "confirm" and opened["message"] == "Delete the draft?" and opened["tab"] == "t1"
    assert [d["id"] for d in dialogs()] == [opened["id"]]
    # The observation lists it and reads nothing from the blocked page.
    observed = executor.observe(1000)
    assert [d["kind"] for d in observed["dialogs"]] == ["confirm"] and observed["text"] == ""
    # Nothing dismisses it on its own: other actions are refused while it blocks the page, change
    # nothing, and it is still the one waiting.
    with pytest.raises(ExecutorError) as blocked:
        executor.click(lease, "#alert")
    assert blocked.value.reason == "dialog_open"
    assert "dialog_answer" in blocked.value.message
    assert [d["id"] for d in dialogs()] == [opened["id"]]
    answered = executor.action(lease, "dialog_answer", accept=True)
    assert answered["answered"] == {"dialog": opened["id"], "tab": "t1", "kind": "confirm", "accepted": True}
    assert answered["dialogs"] == []
    assert answer_text(lease) == "confirmed"


def test_confirm_dismissed_alert_and_prompt_answers(lease: str) -> None:
    executor = client()
    executor.click(lease, "#confirm")
    executor.action(lease, "dialog_answer", accept=False)
    assert answer_text(lease) == "cancelled"

    opened = executor.click(lease, "#alert")["dialog_opened"]
    assert (opened["kind"], opened["message"], opened["default_text"]) == ("alert", "Your session ends soon.", "")
    executor.action(lease, "dialog_answer", accept=True, dialog=opened["id"])
    assert answer_text(lease) == "alert closed"

    opened = executor.click(lease, "#prompt")["dialog_opened"]
    assert (opened["kind"], opened["default_text"]) == ("prompt", "guest")
    executor.action(lease, "dialog_answer", accept=True, text="Ana Lima")
    assert answer_text(lease) == "name: Ana Lima"

    executor.click(lease, "#prompt")
    executor.action(lease, "dialog_answer", accept=True)  # no text: the default is kept
    assert answer_text(lease) == "name: guest"

    executor.click(lease, "#prompt")
    executor.action(lease, "dialog_answer", accept=False, text="ignored")
    assert answer_text(lease) == "no name"


def test_beforeunload_asks_before_the_page_is_left(lease: str, site: Site) -> None:
    executor = client()
    executor.click(lease, "#edit")  # a real click: the page may now ask before it is left
    assert answer_text(lease) == "editing"
    opened = executor.click(lease, "#leave")["dialog_opened"]
    assert opened["kind"] == "beforeunload"
    executor.action(lease, "dialog_answer", accept=False)  # stay
    assert answer_text(lease) == "editing"
    assert client().status()["url"] == site.origin + "/dialogs"

    executor.click(lease, "#leave")
    executor.action(lease, "dialog_answer", accept=True)  # leave
    assert eventually(lambda: client().status()["url"] == site.origin + "/docs")
    assert dialogs() == []


def test_bad_answers_are_refused_and_change_nothing(lease: str) -> None:
    executor = client()
    with pytest.raises(ExecutorError) as none_open:
        executor.action(lease, "dialog_answer", accept=True)
    assert none_open.value.reason == "dialog_not_found"
    opened = executor.click(lease, "#confirm")["dialog_opened"]
    for bad in ({}, {"accept": "yes"}, {"accept": True, "dialog": "1"}, {"accept": True, "extra": 1}, {"accept": 1}):
        with pytest.raises(ExecutorError) as refused:
            executor.action(lease, "dialog_answer", **bad)
        assert refused.value.reason == "bad_request"
    with pytest.raises(ExecutorError) as not_prompt:
        executor.action(lease, "dialog_answer", accept=True, text="hello")
    assert not_prompt.value.reason == "bad_request"
    with pytest.raises(ExecutorError) as stale:
        executor.action(lease, "dialog_answer", accept=True, dialog="d999")
    assert stale.value.reason == "dialog_not_found"
    with pytest.raises(ExecutorError) as no_lease:
        client().action("not-the-lease", "dialog_answer", accept=True)
    assert no_lease.value.reason == "lease_invalid"
    assert [d["id"] for d in dialogs()] == [opened["id"]]
    executor.action(lease, "dialog_answer", accept=True)
    assert answer_text(lease) == "confirmed"


def test_a_dialog_goes_away_with_its_tab(lease: str) -> None:
    executor = client()
    executor.click(lease, "#alert")
    [waiting] = dialogs()
    # The tab actions still work while a dialog blocks the page.
    listed = executor.action(lease, "tabs_list")["tabs"]
    assert [t["id"] for t in listed] == [waiting["tab"]]
    executor.action(lease, "tab_close", tab=waiting["tab"])
    assert eventually(lambda: dialogs() == [])
    assert eventually(lambda: [t["url"] for t in client().status()["tabs"]] == ["about:blank"])


def test_a_key_a_person_held_when_a_dialog_opened_does_not_block_the_computer(screen: Any) -> None:
    grant, _ = on_executor(screen, lambda: screen.control.takeover())
    key_down = {"grant_id": grant.id, "input": {"type": "key", "phase": "down", "key": "Shift"}}
    on_executor(screen, lambda: handlers.op_input(screen, None, key_down))
    on_executor(screen, lambda: screen.page.evaluate("() => { setTimeout(() => alert('Saved.'), 0); }"))
    assert eventually(lambda: [d["kind"] for d in dialogs()] == ["alert"])
    # The person's inputs to the blocked page are dropped (acknowledged), as in a browser.
    click = {"grant_id": grant.id, "input": {"type": "pointer", "phase": "down", "x": 10, "y": 10}}
    on_executor(screen, lambda: handlers.op_input(screen, None, click), timeout=10)
    # Releasing control releases the held key without waiting on the blocked page for ever.
    on_executor(screen, lambda: handlers.op_grant_release(screen, None, {"grant_id": grant.id}))
    executor = client()
    lease = executor.lease_acquire()
    try:
        started = time.monotonic()
        answered = executor.action(lease, "dialog_answer", accept=True)
        assert answered["answered"]["kind"] == "alert" and time.monotonic() - started < 10
        assert executor.extract_text(lease) is not None
    finally:
        executor.lease_release(lease)
    assert dialogs() == []
