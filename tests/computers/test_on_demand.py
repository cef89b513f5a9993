"""Computers on demand (computers/placement.py): an explicit start, placement on an executor host's
slots through the host's own internal endpoint, the idle stop, and LRU eviction when no slot is free.

The host here is the real internal endpoint called as a host calls it (its own token, its report);
the executor processes a host starts are proved in tests/computers/test_executor_host.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account
from computers.models import Computer, ExecutorHost
from computers.placement import (
    WAIT_ACCOUNT_CAP,
    WAIT_NO_HOST,
    WAIT_NO_SLOT,
    WAIT_SLOT_FREEING,
    WAIT_STARTING,
    computer_start,
    computer_stop_if_idle,
    computer_take,
    computer_wait_reason,
    computers_idle_stop,
    host_token_issue,
)
from computers.selectors import computer_is_ready
from computers.services import executor_register
from computers.tokens import executor_token_digest
from runs.models import Run
from runs.queue import queue_dispatch
from runs.services import run_cancel, run_create
from tests.conftest import Api
from visual.services import visual_session_create

pytestmark = [pytest.mark.db, pytest.mark.usefixtures("transactional_db")]


def _sync(api: Api, host: str, token: str | None, **report: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"capacity": 3, "running": [], "exited": [], **report}
    return api.client.post(f"/internal/hosts/{host}/sync", body, content_type="application/json", headers=headers)


def _run_executor(computer: Computer) -> None:
    """What the executor a host started does once its browser is up: it registers a generation."""
    assert executor_register(computer_id=computer.pk, generation=uuid.uuid4(), address="127.0.0.1:9")


def test_an_explicit_start_answers_202_starting_and_a_closed_body(api: Api, runner_key: str, observer_key: str) -> None:
    assert api.post("/api/computers", {"id": "pc-a"}, runner_key).status_code == 201
    started = api.post("/api/computers/pc-a/start", {}, runner_key)
    assert started.status_code == 202, started.content
    assert (started.json()["state"], started.json()["available"]) == ("starting", False)
    assert api.get("/api/computers/pc-a", runner_key).json()["state"] == "starting"
    assert api.post("/api/computers/pc-a/start", {"now": True}, runner_key).status_code == 400
    assert api.post("/api/computers/pc-b/start", {}, runner_key).status_code == 404
    assert api.post("/api/computers/pc-a/start", {}, observer_key).status_code == 403
    row = Computer.objects.get(handle="pc-a")
    assert row.wanted_running and row.host is None
    # No executor host runs: it says so.
    assert computer_wait_reason(row) == WAIT_NO_HOST


def test_a_host_token_is_its_own_and_reaches_only_the_computers_placed_on_it(
    api: Api, account: Account, make_computer: Callable[..., Computer]
) -> None:
    token = host_token_issue(host_id="h1")
    other = host_token_issue(host_id="h2")
    assert ExecutorHost.objects.get(pk="h1").token_digest not in (token, "")  # a digest, never the token
    assert _sync(api, "h1", None).status_code == 401
    assert _sync(api, "h1", "ram_host_" + "x" * 43).status_code == 401
    assert _sync(api, "h1", other).status_code == 403
    assert _sync(api, "h1", token, capacity=1, extra=1).status_code == 400  # a closed body
    # Both hosts live, one slot each; two computers started: one on each, each host gets its own only.
    assert _sync(api, "h1", token, capacity=1).json() == {"start": [], "stop": []}
    assert _sync(api, "h2", other, capacity=1).json() == {"start": [], "stop": []}
    first, second = make_computer(account, "pc-1"), make_computer(account, "pc-2")
    computer_start(computer=first)
    computer_start(computer=second)
    orders_1 = _sync(api, "h1", token, capacity=1).json()
    orders_2 = _sync(api, "h2", other, capacity=1).json()
    started = {o["computer_id"] for o in orders_1["start"]} | {o["computer_id"] for o in orders_2["start"]}
    assert started == {"pc-1", "pc-2"} and len(orders_1["start"]) == len(orders_2["start"]) == 1
    placed = dict(Computer.objects.values_list("pk", "host_id"))
    assert placed["pc-1"] != placed["pc-2"]
    # Each start carries the computer's own fresh executor token (its digest is what the row keeps).

    for order, host in ((orders_1["start"][0], "h1"), (orders_2["start"][0], "h2")):
        row = Computer.objects.get(pk=order["computer_id"])
        assert row.host_id == host and row.executor_token_digest == executor_token_digest(order["token"])


def test_a_computer_runs_on_one_host_only_and_leaves_it_when_the_host_reports_it_gone(
    api: Api, account: Account, runner_key: str, make_computer: Callable[..., Computer]
) -> None:
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    computer = make_computer(account, "pc-1")
    computer_start(computer=computer)
    assert [o["computer_id"] for o in _sync(api, "h1", token, capacity=2).json()["start"]] == ["pc-1"]
    _run_executor(computer)
    # Running: nothing more to start; a second start changes nothing.
    assert _sync(api, "h1", token, capacity=2, running=["pc-1"]).json() == {"start": [], "stop": []}
    computer_start(computer=computer)
    assert _sync(api, "h1", token, capacity=2, running=["pc-1"]).json() == {"start": [], "stop": []}
    assert api.get("/api/computers/pc-1", runner_key).json()["state"] == "ready"
    # Idle past RAM_COMPUTER_IDLE_SECONDS: stopped (stopping until the host reports the executor gone).
    Computer.objects.filter(pk="pc-1").update(last_used_at=timezone.now() - timedelta(hours=1))
    assert computers_idle_stop() == ["pc-1"]
    assert api.get("/api/computers/pc-1", runner_key).json()["state"] == "stopping"
    assert _sync(api, "h1", token, capacity=2, running=["pc-1"]).json() == {"start": [], "stop": ["pc-1"]}
    assert Computer.objects.get(pk="pc-1").host_id == "h1"  # its slot is held while it stops
    assert _sync(api, "h1", token, capacity=2, exited=["pc-1"]).json() == {"start": [], "stop": []}
    row = Computer.objects.get(pk="pc-1")
    assert (row.host_id, row.status) == (None, Computer.Status.OFFLINE)
    assert api.get("/api/computers/pc-1", runner_key).json()["state"] == "stopped"



def _run_on(account: Account, computer: Computer) -> Run:
    return run_create(
        account=account,
        computer=computer,
        task={"goal": "test"},
        agent_config={"type": "external"},
        max_model_calls=3,
        microcredits_per_model_call=0,
    )


def _placed_and_ready(api: Api, host: str, token: str, computer: Computer, running: list[str]) -> list[str]:
    """The host gets its start order, the executor registers: the computer is ready on ``host``."""
    orders = _sync(api, host, token, capacity=Computer.objects.filter(host_id=host).count() or 1, running=running)
    started = [order["computer_id"] for order in orders.json()["start"]]
    if computer.pk in started:
        _run_executor(computer)
    return started


def test_a_run_on_a_stopped_computer_starts_it_and_starts_once_it_is_ready(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    computer = make_computer(account, "pc-1")
    run = _run_on(account, computer)
    queue_dispatch()
    row = Computer.objects.get(pk="pc-1")
    assert (row.wanted_running, row.host_id) == (True, "h1")
    shown = api.get(f"/api/runs/{run.id}", runner_key).json()
    assert (shown["status"], shown["queue_position"], shown["queue_reason"]) == ("queued", 1, WAIT_STARTING)
    assert api.get("/api/computers/pc-1", runner_key).json()["state"] == "starting"
    orders = _sync(api, "h1", token, capacity=2).json()
    assert [o["computer_id"] for o in orders["start"]] == ["pc-1"]
    _run_executor(computer)  # registered: the run starts (computer_started)
    assert Run.objects.get(pk=run.id).status == Run.Status.RUNNING
    assert api.get(f"/api/runs/{run.id}", runner_key).json()["queue_reason"] is None
    # A running run keeps its computer however long ago it was last touched.
    Computer.objects.filter(pk="pc-1").update(last_used_at=timezone.now() - timedelta(hours=1))
    assert computers_idle_stop() == []
    assert api.get("/api/computers/pc-1", runner_key).json()["state"] == "busy"


def test_a_takeover_or_a_viewer_keeps_a_computer_and_nothing_else_does(
    api: Api, account: Account, make_computer: Callable[..., Computer], make_paused_run: Callable[..., Run]
) -> None:
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=3)
    held, viewed, paused = (make_computer(account, f"pc-{n}") for n in ("held", "viewed", "paused"))
    for computer in (held, viewed, paused):
        computer_start(computer=computer)
    _sync(api, "h1", token, capacity=3)
    for computer in (held, viewed, paused):
        _run_executor(computer)
    make_paused_run(account, held, "takeover")  # the person's CAPTCHA page must survive
    make_paused_run(account, paused, "credential")  # a pause that lets go of the computer
    visual_session_create(account=account, computer_id="pc-viewed", mode="observe")
    Computer.objects.update(last_used_at=timezone.now() - timedelta(hours=1))
    assert computers_idle_stop() == ["pc-paused"]


def test_a_visual_session_for_a_computer_not_ready_is_refused_and_starts_nothing(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    make_computer(account, "pc-1")
    answer = api.client.post(
        "/api/visual/sessions",
        {"computer_id": "pc-1", "mode": "observe", "transport": "jpeg-websocket-v1"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {runner_key}", "X-RAM-Intent": "visual-session"},
    )
    assert answer.status_code == 409, answer.content
    row = Computer.objects.get(pk="pc-1")
    assert (row.wanted_running, row.host_id) == (False, None)
    assert _sync(api, "h1", token, capacity=2).json() == {"start": [], "stop": []}


def test_with_no_free_slot_the_least_recently_used_idle_computer_stops_to_make_room(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    older, newer, wanted = (make_computer(account, f"pc-{n}") for n in ("older", "newer", "wanted"))
    for computer in (older, newer):
        computer_start(computer=computer)
    _sync(api, "h1", token, capacity=2)
    for computer in (older, newer):
        _run_executor(computer)
    Computer.objects.filter(pk="pc-older").update(last_used_at=timezone.now() - timedelta(minutes=10))
    Computer.objects.filter(pk="pc-newer").update(last_used_at=timezone.now() - timedelta(minutes=5))
    run = _run_on(account, wanted)
    queue_dispatch()
    assert not Computer.objects.get(pk="pc-older").wanted_running
    assert Computer.objects.get(pk="pc-newer").wanted_running
    shown = api.get(f"/api/runs/{run.id}", runner_key).json()
    assert (shown["status"], shown["queue_reason"]) == ("queued", WAIT_SLOT_FREEING)
    running = ["pc-older", "pc-newer"]
    assert _sync(api, "h1", token, capacity=2, running=running).json() == {"start": [], "stop": ["pc-older"]}
    orders = _sync(api, "h1", token, capacity=2, running=["pc-newer"], exited=["pc-older"]).json()
    assert [o["computer_id"] for o in orders["start"]] == ["pc-wanted"]
    _run_executor(wanted)
    assert Run.objects.get(pk=run.id).status == Run.Status.RUNNING


def test_when_no_computer_is_idle_a_run_waits_queued_and_says_so_never_refused(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 5
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=1)
    busy, other = make_computer(account, "pc-busy"), make_computer(account, "pc-other")
    first = _run_on(account, busy)
    queue_dispatch()
    _sync(api, "h1", token, capacity=1)
    _run_executor(busy)
    assert Run.objects.get(pk=first.id).status == Run.Status.RUNNING
    second = _run_on(account, other)
    queue_dispatch()
    shown = api.get(f"/api/runs/{second.id}", runner_key).json()
    assert (shown["status"], shown["queue_reason"]) == ("queued", WAIT_NO_SLOT)
    assert Computer.objects.get(pk="pc-busy").wanted_running  # in use: never stopped for another
    # The first run ends: its computer is idle, the second's start stops it (LRU) and takes its slot.
    run_cancel(run=Run.objects.get(pk=first.id))
    Computer.objects.filter(pk="pc-busy").update(last_used_at=timezone.now() - timedelta(minutes=1))
    queue_dispatch()
    assert not Computer.objects.get(pk="pc-busy").wanted_running
    _sync(api, "h1", token, capacity=1, exited=["pc-busy"])
    _run_executor(other)
    assert Run.objects.get(pk=second.id).status == Run.Status.RUNNING


def test_an_account_runs_at_most_its_cap_of_computers(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    settings.RAM_ACCOUNT_MAX_RUNNING_COMPUTERS = 1
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 5
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=3)
    busy, other = make_computer(account, "pc-busy"), make_computer(account, "pc-other")
    _run_on(account, busy)
    queue_dispatch()
    _sync(api, "h1", token, capacity=3)
    _run_executor(busy)
    second = _run_on(account, other)
    queue_dispatch()
    assert Computer.objects.get(pk="pc-other").host_id is None  # free slots, but the account's cap
    assert api.get(f"/api/runs/{second.id}", runner_key).json()["queue_reason"] == WAIT_ACCOUNT_CAP


def test_a_run_waits_while_its_computer_stops_and_starts_it_anew_once_it_is_gone(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    """An idle stop was decided (the executor still reads ready until its host stops it): a run
    created then is not admitted onto the executor going away; once the host reports it gone, the
    run starts the computer again and starts when it is ready."""
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    computer = make_computer(account, "pc-1")
    computer_start(computer=computer)
    _placed_and_ready(api, "h1", token, computer, running=[])
    Computer.objects.filter(pk="pc-1").update(last_used_at=timezone.now() - timedelta(hours=1))
    assert computers_idle_stop() == ["pc-1"]
    assert computer_is_ready(Computer.objects.get(pk="pc-1"))  # its executor has not stopped yet
    run = _run_on(account, computer)
    queue_dispatch()
    assert Run.objects.get(pk=run.id).status == Run.Status.QUEUED
    # The host stops the executor and reports it gone: the run starts the computer anew.
    orders = _sync(api, "h1", token, capacity=2, running=["pc-1"]).json()
    assert orders["stop"] == ["pc-1"]
    orders = _sync(api, "h1", token, capacity=2, running=[]).json()
    assert [o["computer_id"] for o in orders["start"]] == ["pc-1"]
    assert Run.objects.get(pk=run.id).status == Run.Status.QUEUED
    _run_executor(computer)
    assert Run.objects.get(pk=run.id).status == Run.Status.RUNNING


def test_an_idle_stop_decided_after_a_run_took_the_computer_keeps_it(
    account: Account, make_computer: Callable[..., Computer], api: Api
) -> None:
    """The idle stop checks, in the statement that stops, the computer as it is then: a run that
    took it after the idle list was read keeps it (on the code that stopped what it had listed, the
    run's computer stopped under it)."""
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    computer = make_computer(account, "pc-1")
    computer_start(computer=computer)
    _placed_and_ready(api, "h1", token, computer, running=[])
    Computer.objects.filter(pk="pc-1").update(last_used_at=timezone.now() - timedelta(hours=1))
    listed = list(Computer.objects.filter(pk="pc-1").values_list("pk", flat=True))  # what the sweep read
    assert computer_take(computer_id="pc-1")  # a run starts on it now
    assert [pk for pk in listed if computer_stop_if_idle(computer_id=pk, seconds=60)] == []
    assert Computer.objects.get(pk="pc-1").wanted_running
    # Once its stop is decided, nothing takes it.
    Computer.objects.filter(pk="pc-1").update(last_used_at=timezone.now() - timedelta(hours=1))
    assert computer_stop_if_idle(computer_id="pc-1", seconds=60)
    assert not computer_take(computer_id="pc-1")


def test_a_start_of_a_computer_an_executor_started_by_hand_serves_places_it_nowhere(
    api: Api, account: Account, make_computer: Callable[..., Computer]
) -> None:
    """A computer whose executor was started by hand (ready, on no host): starting it leaves it to
    that executor; no host is told to start a second one, which would supersede the first."""
    token = host_token_issue(host_id="h1")
    _sync(api, "h1", token, capacity=2)
    computer = make_computer(account, "pc-hand")
    _run_executor(computer)  # registered by an executor no host started
    computer_start(computer=Computer.objects.get(pk="pc-hand"))
    row = Computer.objects.get(pk="pc-hand")
    assert (row.wanted_running, row.host_id) == (False, None) and computer_is_ready(row)
    assert _sync(api, "h1", token, capacity=2).json() == {"start": [], "stop": []}
