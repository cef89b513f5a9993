"""``POST /api/computers`` and ``DELETE /api/computers/{id}``: ids are per account (one account learns
nothing of another's), an id once used is never given again in its account, the per-account cap,
closed bodies, and what a deletion ends: its open runs, their links, its generation, its profile."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import Account
from computers.errors import ComputerNotFound
from computers.models import Computer
from computers.services import executor_heartbeat, executor_register, executor_token_issue
from runs.models import Run
from runs.services import run_create
from tests.conftest import Api
from visual.errors import ComputerNotReady
from visual.services import visual_session_create

pytestmark = pytest.mark.db


def _delete(api: Api, key: str, computer_id: str) -> Any:
    return api.client.delete(f"/api/computers/{computer_id}", headers={"Authorization": f"Bearer {key}"})


def _ready(computer: Computer) -> Computer:
    Computer.objects.filter(pk=computer.pk).update(
        status=Computer.Status.READY, generation=uuid.uuid4(), executor_address="127.0.0.1:9", last_heartbeat_at=timezone.now()
    )
    computer.refresh_from_db()
    return computer


def test_a_created_computer_is_the_accounts_own_and_stopped(api: Api, runner_key: str, account: Account) -> None:
    created = api.post("/api/computers", {"id": "worker-1", "name": "Worker"}, runner_key)
    assert created.status_code == 201, created.content
    assert created.json() | {"browser": None, "settings": None} == {
        "id": "worker-1",
        "name": "Worker",
        "available": False,
        "status": "offline",
        "state": "stopped",
        "state_reason": None,
        "browser": None,
        "settings": None,
    }
    assert api.get("/api/computers/worker-1", runner_key).json() == created.json()
    assert [c["id"] for c in api.get("/api/computers", runner_key).json()["computers"]] == ["worker-1"]
    row = Computer.objects.get(account=account, handle="worker-1")
    # The executor side knows it by an opaque global key, never by the account's id.
    assert row.pk != "worker-1" and row.pk.startswith("c-")


def test_two_accounts_may_use_the_same_id_and_neither_learns_of_the_other(
    api: Api, runner_key: str, account: Account, make_account: Callable[..., Account], make_key: Callable[..., str]
) -> None:
    other = make_account("Other")
    other_key = make_key(other)
    assert api.post("/api/computers", {"id": "shared"}, other_key).status_code == 201
    # An id another account holds is no conflict here: no 409, the same 201 as any free id.
    assert api.post("/api/computers", {"id": "shared"}, runner_key).status_code == 201
    mine, theirs = Computer.objects.get(account=account, handle="shared"), Computer.objects.get(account=other, handle="shared")
    assert mine.pk != theirs.pk
    # Runs name it within their caller's account.
    mine_run = api.post("/api/runs", {"task": {"goal": "g", "steps": []}, "computer_id": "shared", "agent": {"type": "external"}}, runner_key)
    assert mine_run.status_code == 201, mine_run.content
    assert mine_run.json()["computer_id"] == "shared"
    assert Run.objects.get(pk=mine_run.json()["id"]).computer_id == mine.pk
    listed = api.get("/api/runs", runner_key, computer_id="shared").json()["runs"]
    assert [r["id"] for r in listed] == [mine_run.json()["id"]]
    # Deleting its own leaves the other account's alone; a foreign or unknown id is 404 alike.
    assert _delete(api, runner_key, "shared").status_code == 204
    assert api.get("/api/computers/shared", other_key).status_code == 200
    assert [_delete(api, runner_key, name).status_code for name in ("shared", "nobody")] == [404, 404]
    assert api.get("/api/computers/shared", runner_key).status_code == 404


def test_an_id_is_never_given_twice_in_an_account(
    api: Api, runner_key: str, account: Account, make_account: Callable[..., Account], make_key: Callable[..., str]
) -> None:
    assert api.post("/api/computers", {"id": "once"}, runner_key).status_code == 201
    again = api.post("/api/computers", {"id": "once"}, runner_key)
    assert again.status_code == 409 and set(again.json()) >= {"error"}
    assert _delete(api, runner_key, "once").status_code == 204
    retired = api.post("/api/computers", {"id": "once"}, runner_key)
    assert retired.status_code == 409 and "never given twice" in retired.json()["error"]
    assert Computer.objects.filter(account=account, handle="once").count() == 1
    # Another account may still take it.
    assert api.post("/api/computers", {"id": "once"}, make_key(make_account("Other"))).status_code == 201


def test_a_staff_made_computer_s_id_is_taken_in_its_account(
    api: Api, runner_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-1")
    assert api.post("/api/computers", {"id": "pc-1"}, runner_key).status_code == 409


def test_the_account_cap_answers_429_and_a_deletion_frees_a_place(
    api: Api, runner_key: str, account: Account, settings: Any
) -> None:
    settings.RAM_ACCOUNT_MAX_COMPUTERS = 2
    assert [api.post("/api/computers", {"id": f"pc-{n}"}, runner_key).status_code for n in (1, 2)] == [201, 201]
    over = api.post("/api/computers", {"id": "pc-3"}, runner_key)
    assert over.status_code == 429 and isinstance(over.json()["error"], str)
    assert not Computer.objects.filter(account=account, handle="pc-3").exists()
    assert _delete(api, runner_key, "pc-1").status_code == 204
    assert api.post("/api/computers", {"id": "pc-3"}, runner_key).status_code == 201


@pytest.mark.parametrize(
    "body",
    [
        {"id": "ok", "unknown": 1},
        {"id": "ok", "browser": {"backend": "local"}},
        {},
        {"id": ""},
        {"id": "-starts-with-dash"},
        {"id": "has space"},
        {"id": "x" * 129},
        {"id": 7},
        {"id": "ok", "name": "n" * 201},
    ],
)
def test_a_closed_body_refuses_anything_else_and_changes_nothing(
    api: Api, runner_key: str, account: Account, body: dict[str, Any]
) -> None:
    response = api.post("/api/computers", body, runner_key)
    assert response.status_code == 400 and isinstance(response.json()["error"], str)
    assert not Computer.objects.filter(account=account).exists()


def test_only_runner_keys_create_or_delete(
    api: Api, observer_key: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-1")
    assert api.post("/api/computers", {"id": "mine"}, observer_key).status_code == 403
    assert api.post("/api/computers", {"id": "mine"}).status_code == 401
    assert _delete(api, observer_key, "pc-1").status_code == 403
    assert Computer.objects.filter(account=account).count() == 1


def test_a_deletion_cancels_its_runs_ends_its_generation_and_its_executor(
    api: Api,
    runner_key: str,
    account: Account,
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
) -> None:
    computer = _ready(make_computer(account, "pc-1"))
    old_profile = computer.profile_generation
    paused = make_paused_run(account, computer, "takeover")
    queued = run_create(account=account, computer=computer, task={"goal": "later"}, max_model_calls=3)
    session, _ticket = visual_session_create(account=account, computer_id="pc-1", mode="observe")
    assert api.get(f"/api/runs/{paused.id}", runner_key).json()["required_action"]["viewer"]["computer_id"] == "pc-1"

    assert _delete(api, runner_key, "pc-1").status_code == 204

    assert {Run.objects.get(pk=paused.pk).status, Run.objects.get(pk=queued.pk).status} == {Run.Status.CANCELLED}
    assert (api.get(f"/api/runs/{paused.id}", runner_key).json().get("required_action") or {}).get("viewer") is None
    assert api.get(f"/api/runs/{paused.id}/intervention-descriptor", runner_key).status_code == 409
    assert api.get(f"/api/runs/{paused.id}/viewer", runner_key).status_code == 409
    # The runs keep their computer's name in their history.
    assert api.get(f"/api/runs/{paused.id}", runner_key).json()["computer_id"] == "pc-1"
    row = Computer.objects.get(pk="pc-1")
    assert row.deleted_at is not None and row.generation is None and row.status == Computer.Status.OFFLINE
    assert row.profile_generation != old_profile
    # No new visual session, no new run.
    assert api.post(
        "/api/runs", {"task": {"goal": "g", "steps": []}, "computer_id": "pc-1", "agent": {"type": "external"}}, runner_key
    ).status_code == 404

    with pytest.raises((ComputerNotReady, ComputerNotFound)):
        visual_session_create(account=account, computer_id="pc-1", mode="observe")
    assert session.computer_id == "pc-1"
    # And the id answers 404 as if it never existed.
    assert api.get("/api/computers/pc-1", runner_key).status_code == 404
    assert "pc-1" not in [c["id"] for c in api.get("/api/computers", runner_key).json()["computers"]]


def test_a_deleted_computers_executor_wipes_its_profile_then_is_refused_and_stops(
    transactional_db: None, api: Api, account: Account, make_key: Callable[..., str]
) -> None:
    key = make_key(account)
    assert api.post("/api/computers", {"id": "pc-1"}, key).status_code == 201
    computer = Computer.objects.get(account=account, handle="pc-1")
    token = executor_token_issue(computer_id=computer.pk)
    generation = uuid.uuid4()
    assert executor_register(computer_id=computer.pk, generation=generation, address="127.0.0.1:9") is True
    assert _delete(api, key, "pc-1").status_code == 204
    # Its generation ended: the executor wipes the browser profile and starts a new one ...
    assert executor_heartbeat(computer_id=computer.pk, generation=generation) == "ended"
    # ... whose registration is refused; its token ends there, and its next heartbeat, refused, stops it.
    assert executor_register(computer_id=computer.pk, generation=uuid.uuid4(), address="127.0.0.1:9") is False
    assert Computer.objects.get(pk=computer.pk).executor_token_digest == ""
    refused = api.client.post(
        f"/internal/executors/{computer.pk}/heartbeat",
        data={"generation": str(generation)},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert refused.status_code == 401


def test_staff_cannot_move_a_computer_into_an_account_that_has_or_had_its_id(
    client: Any, account: Account, make_account: Callable[..., Account], make_computer: Callable[..., Computer]
) -> None:
    other = make_account("Other")
    Computer.objects.create(id="c-elsewhere", handle="pc-1", account=other, deleted_at=timezone.now(), is_active=False)
    make_computer(account, "pc-1")
    User.objects.create_superuser(username="staff", password="correct horse battery")
    assert client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"}).status_code in (302, 303)
    response = client.post(
        "/admin/computers/computer/pc-1/change/", {"id": "pc-1", "account": str(other.pk), "name": "pc-1", "is_active": "on"}
    )
    assert response.status_code == 200 and "has or had the id" in response.content.decode()
    assert Computer.objects.get(pk="pc-1").account_id == account.pk
    # A deleted computer is shown, never changed.
    assert client.get("/admin/computers/computer/c-elsewhere/change/").status_code == 200
    refused = client.post(
        "/admin/computers/computer/c-elsewhere/change/", {"id": "c-elsewhere", "account": str(other.pk), "is_active": "on"}
    )
    assert refused.status_code == 403
    assert Computer.objects.get(pk="c-elsewhere").is_active is False
