"""``GET /api/computers`` and ``GET /api/computers/{id}``: each computer's ``state`` beside ``available``
(exactly "a visual session can be created now"), for the account's runner keys only."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from computers.models import Computer
from runs.contracts import TakeoverPause
from runs.pauses import run_pause
from runs.queue import queue_dispatch
from runs.services import run_cancel, run_create
from visual.services import visual_session_create, visual_session_end, visual_ticket_consume

pytestmark = pytest.mark.db


def ready(computer: Computer) -> Computer:
    Computer.objects.filter(pk=computer.pk).update(
        status=Computer.Status.READY,
        generation=uuid.uuid4(),
        executor_address="127.0.0.1:9",
        last_heartbeat_at=timezone.now(),
    )
    computer.refresh_from_db()
    return computer


def _get(client: Client, key: str, computer_id: str) -> Any:
    return client.get(f"/api/computers/{computer_id}", headers={"Authorization": f"Bearer {key}"})


def _listed(client: Client, key: str) -> dict[str, tuple[bool, str, str | None]]:
    response = client.get("/api/computers", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    return {c["id"]: (c["available"], c["state"], c["state_reason"]) for c in response.json()["computers"]}


def test_a_computer_reads_as_listed_with_its_state(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    ready(make_computer(account, "pc-1"))
    make_computer(account, "pc-2")
    listed = client.get("/api/computers", headers={"Authorization": f"Bearer {runner_key}"}).json()["computers"]
    one = _get(client, runner_key, "pc-1")
    assert one.status_code == 200 and one.json() == listed[0]
    assert one.json()["state"] == "ready" and one.json()["state_reason"] is None and one.json()["available"] is True
    assert _get(client, runner_key, "pc-2").json() | {"browser": None, "settings": None} == {
        "id": "pc-2",
        "name": "pc-2",
        "available": False,
        "status": "offline",
        "state": "stopped",
        "state_reason": None,
        "browser": None,
        "settings": None,
    }


def test_another_accounts_computer_and_an_unknown_or_revoked_id_answer_404_alike(
    client: Client,
    runner_key: str,
    account: Account,
    make_computer: Callable[..., Computer],
    make_account: Callable[..., Account],
) -> None:
    ready(make_computer(make_account("Other"), "theirs"))
    revoked = make_computer(account, "revoked")
    Computer.objects.filter(pk=revoked.pk).update(is_active=False)
    answers = [_get(client, runner_key, computer_id) for computer_id in ("theirs", "nobody", "revoked")]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert answers[0].json() == answers[1].json() == answers[2].json() and set(answers[0].json()) == {"error"}


def test_only_runner_keys_read_a_computer(
    client: Client, observer_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-1")
    assert _get(client, observer_key, "pc-1").status_code == 403
    assert client.get("/api/computers/pc-1").status_code == 401


def test_a_computer_a_run_holds_is_busy_and_still_available_until_the_run_lets_go(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    computer = ready(make_computer(account, "pc-1"))
    run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
    assert _listed(client, runner_key)["pc-1"] == (True, "ready", None), "a queued run holds nothing yet"
    queue_dispatch()
    run.refresh_from_db()
    assert run.holds_computer
    assert _listed(client, runner_key)["pc-1"] == (True, "busy", None)
    run = run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
    assert _get(client, runner_key, "pc-1").json()["state"] == "busy", "a takeover keeps the computer"
    run_cancel(run=run)
    assert _listed(client, runner_key)["pc-1"] == (True, "ready", None)


def test_a_persons_open_control_session_makes_the_computer_busy(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    ready(make_computer(account, "pc-1"))
    key = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)[0]
    _, observe_ticket = visual_session_create(account=account, computer_id="pc-1", mode="observe", api_key=key)
    visual_ticket_consume(raw_ticket=observe_ticket, origin=None)
    assert _listed(client, runner_key)["pc-1"] == (True, "ready", None), "watching holds nothing"
    controlling, control_ticket = visual_session_create(account=account, computer_id="pc-1", mode="control", api_key=key)
    assert _listed(client, runner_key)["pc-1"] == (True, "ready", None), "a ticket not yet used holds nothing"
    visual_ticket_consume(raw_ticket=control_ticket, origin=None)
    assert _listed(client, runner_key)["pc-1"] == (True, "busy", None)
    visual_session_end(session_id=str(controlling.id), reason="closed")
    assert _listed(client, runner_key)["pc-1"] == (True, "ready", None)


def test_a_failed_browser_and_a_silent_executor_are_failed_with_a_reason(
    client: Client, runner_key: str, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    ready(make_computer(account, "broken"))
    Computer.objects.filter(pk="broken").update(status=Computer.Status.FAILED)
    ready(make_computer(account, "silent"))
    stale = timezone.now() - timedelta(seconds=float(settings.RAM_EXECUTOR_STALE_SECONDS) + 1)
    Computer.objects.filter(pk="silent").update(last_heartbeat_at=stale)
    listed = _listed(client, runner_key)
    available, state, reason = listed["broken"]
    assert (available, state) == (False, "failed") and reason and "browser failed" in reason
    available, state, reason = listed["silent"]
    assert (available, state) == (False, "failed") and reason and "not been heard from" in reason
