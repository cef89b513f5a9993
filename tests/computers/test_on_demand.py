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
    computer_start,
    computer_wait_reason,
    computers_idle_stop,
    host_token_issue,
)
from computers.services import executor_register
from tests.conftest import Api

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
    from computers.tokens import executor_token_digest

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

