"""The runs REST API: auth matrix, required_action per kind, descriptor per kind,
listing, continue (idempotency matrix) and cancel."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import account_top_up, api_key_create, api_key_revoke
from computers.models import Computer
from runs.contracts import InterventionEnvelope
from runs.models import CredentialRequest, IdempotencyRecord, Run, RunEvent
from runs.services import _continue_digest, run_create, run_finish
from tests.conftest import Api

pytestmark = pytest.mark.django_db

KINDS = ["takeover", "credential", "connection", "continue", "credits"]


@pytest.fixture
def paused(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> Callable[[str], Run]:
    return lambda kind, **options: make_paused_run(account, computer, kind, **options)


def descriptor_path(run: Run) -> str:
    return f"/api/runs/{run.id}/intervention-descriptor"


# --- Authentication matrix --------------------------------------------------------------


def test_descriptor_without_key_is_401(api: Api, paused: Callable[..., Run]) -> None:
    response = api.get(descriptor_path(paused("credential")))
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()


@pytest.mark.parametrize("header", ["Bearer", "Bearer short", "Basic abc", "bearer ram_rk_x_y", "Bearer ram_rk_ab_" + "x" * 43])
def test_malformed_or_unknown_key_is_401(api: Api, paused: Callable[..., Run], header: str) -> None:
    response = api.client.get(descriptor_path(paused("credential")), headers={"Authorization": header})
    assert response.status_code == 401
    assert set(response.json()) == {"error"}


def test_observer_key_cannot_read_descriptor(api: Api, paused: Callable[..., Run], observer_key: str) -> None:
    response = api.get(descriptor_path(paused("credential")), observer_key)
    assert response.status_code == 403
    assert "task_observer" in response.json()["error"]


def test_runner_key_of_another_account_gets_404(
    api: Api, paused: Callable[..., Run], make_account: Callable[..., Account], make_key: Callable[..., str]
) -> None:
    other = make_key(make_account("Other"))
    run = paused("credential")
    response = api.get(descriptor_path(run), other)
    missing = api.get(f"/api/runs/{uuid.uuid4()}/intervention-descriptor", other)
    assert response.status_code == 404
    assert response.json() == missing.json()


def test_revoked_key_is_401(api: Api, paused: Callable[..., Run], account: Account) -> None:
    key, raw = api_key_create(account=account, kind=ApiKey.Kind.RUNNER)
    run = paused("credential")
    assert api.get(descriptor_path(run), raw).status_code == 200
    api_key_revoke(key=key)
    assert api.get(descriptor_path(run), raw).status_code == 401


def test_inactive_account_is_403(api: Api, paused: Callable[..., Run], account: Account, runner_key: str) -> None:
    run = paused("credential")
    Account.objects.filter(pk=account.pk).update(is_active=False)
    response = api.get(descriptor_path(run), runner_key)
    assert response.status_code == 403
    assert "inactive" in response.json()["error"]


def test_key_is_stored_as_digest_and_records_last_use(api: Api, account: Account, runner_key: str) -> None:
    key = ApiKey.objects.get(account=account, kind="runner")
    assert runner_key not in (key.digest, key.prefix)
    assert len(key.digest) == 64
    assert key.last_used_at is None
    api.get("/api/runs", runner_key)
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_observer_reads_runs_but_cannot_continue_or_cancel(
    api: Api, paused: Callable[..., Run], observer_key: str
) -> None:
    run = paused("takeover")
    assert api.get(f"/api/runs/{run.id}", observer_key).status_code == 200
    assert api.get("/api/runs", observer_key).status_code == 200
    assert api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "key-00001"}, observer_key).status_code == 403
    assert api.post(f"/api/runs/{run.id}/cancel", {}, observer_key).status_code == 403
    assert not Run.objects.filter(continued_from=run).exists()


# --- required_action -------------------------------------------------------------------


def test_required_action_takeover(api: Api, paused: Callable[..., Run], runner_key: str, origin: str) -> None:
    run = paused("takeover")
    action = api.get(f"/api/runs/{run.id}", runner_key).json()["required_action"]
    assert action == {
        "version": 1,
        "resume": "explicit_continue",
        "kind": "takeover",
        "reason": "captcha",
        "viewer": {
            "computer_id": "pc-1",
            "url": f"{origin}/view?computer_id=pc-1",
            "requires_login": True,
        },
        "human_action": {"url": f"{origin}/tasks/{run.id}/intervention", "requires_login": True},
    }


def test_required_action_credential(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("credential")
    request = CredentialRequest.objects.get(run=run)
    action = api.get(f"/api/runs/{run.id}", runner_key).json()["required_action"]
    assert set(action) == {"version", "resume", "kind", "reason", "request_id", "expires_at", "human_action"}
    assert action["kind"] == "credential"
    assert action["request_id"] == str(request.id)
    assert action["expires_at"].endswith("Z")
    assert action["human_action"]["url"].endswith(f"/tasks/{run.id}/intervention")


def test_required_action_connection(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    action = api.get(f"/api/runs/{paused('connection').id}", runner_key).json()["required_action"]
    assert set(action) == {"version", "resume", "kind", "reason", "provider", "capabilities", "human_action"}
    assert action["provider"] == "google"
    assert action["capabilities"] == ["gmail.readonly"]


def test_required_action_continue(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    action = api.get(f"/api/runs/{paused('continue').id}", runner_key).json()["required_action"]
    assert action == {
        "version": 1,
        "resume": "explicit_continue",
        "kind": "continue",
        "reason": "max_model_calls_reached",
        "budget": {"model_calls": 3, "max_model_calls": 3, "remaining_model_calls": 0},
    }


def test_required_action_credits_uses_decimal_strings(
    api: Api, paused: Callable[..., Run], runner_key: str, account: Account
) -> None:
    Account.objects.filter(pk=account.pk).update(microcredit_balance=3_500_000)
    action = api.get(f"/api/runs/{paused('credits').id}", runner_key).json()["required_action"]
    assert action == {
        "version": 1,
        "resume": "explicit_continue",
        "kind": "credits",
        "reason": "insufficient_credits",
        "credits": {
            "required_microcredits": "12000000",
            "available_microcredits": "3500000",
            "missing_microcredits": "8500000",
        },
    }


def test_required_action_absent_when_not_paused_or_continued(
    api: Api, paused: Callable[..., Run], runner_key: str, account: Account, computer: Computer
) -> None:
    queued = run_create(account=account, computer=computer, task={}, max_model_calls=1)
    assert "required_action" not in api.get(f"/api/runs/{queued.id}", runner_key).json()
    run = paused("takeover")
    api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    body = api.get(f"/api/runs/{run.id}", runner_key).json()
    assert "required_action" not in body
    assert body["continued_run_id"] is not None


def test_a_continued_run_ends_continued_and_is_listed_by_that_status(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    run, still_waiting = paused("takeover"), paused("credential")
    created = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key).json()
    body = api.get(f"/api/runs/{run.id}", runner_key).json()
    assert body["status"] == "continued"
    assert body["continued_run_id"] == created["run"]["id"]
    assert "required_action" not in body
    # The result keeps the pause that was answered.
    assert body["result"]["outcome"] == "needs_input" and body["result"]["pause"]["kind"] == "takeover"
    run.refresh_from_db()
    assert run.finished_at is not None
    assert RunEvent.objects.get(run=run, kind="run_continued").data == {"continued_run_id": created["run"]["id"]}
    continued = api.get("/api/runs", runner_key, status="continued").json()
    assert [r["id"] for r in continued["runs"]] == [str(run.id)]
    waiting = api.get("/api/runs", runner_key, status="waiting_for_input").json()
    assert [r["id"] for r in waiting["runs"]] == [str(still_waiting.id)]
    assert all("required_action" in r for r in waiting["runs"])
    # A continued run is over: cancel names its continuation, and a second continue too.
    cancel = api.post(f"/api/runs/{run.id}/cancel", {}, runner_key)
    assert cancel.status_code == 409 and cancel.json()["continued_run_id"] == created["run"]["id"]
    run.refresh_from_db()
    assert run.status == "continued"


def test_an_unknown_status_filter_names_every_status(api: Api, runner_key: str) -> None:
    response = api.get("/api/runs", runner_key, status="paused")
    assert response.status_code == 400
    assert "continued" in response.json()["error"]


def test_list_includes_required_action_and_filters(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    runs = {kind: paused(kind) for kind in KINDS}
    body = api.get("/api/runs", runner_key).json()
    assert body["count"] == 5
    assert body["next_offset"] is None
    kinds = {r["id"]: r["required_action"]["kind"] for r in body["runs"]}
    assert kinds == {str(run.id): kind for kind, run in runs.items()}
    only = api.get("/api/runs", runner_key, kind="credits").json()
    assert [r["id"] for r in only["runs"]] == [str(runs["credits"].id)]
    waiting = api.get("/api/runs", runner_key, status="waiting_for_input", limit="2").json()
    assert waiting["count"] == 5 and len(waiting["runs"]) == 2 and waiting["next_offset"] == 2
    last = api.get("/api/runs", runner_key, limit="2", offset="4").json()
    assert len(last["runs"]) == 1 and last["next_offset"] is None


@pytest.mark.parametrize(
    "params", [{"status": "paused"}, {"kind": "login"}, {"limit": "0"}, {"limit": "101"}, {"offset": "-1"}, {"limit": "x"}]
)
def test_list_rejects_bad_filters(api: Api, runner_key: str, params: dict[str, str]) -> None:
    response = api.get("/api/runs", runner_key, **params)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid request")


def test_list_is_scoped_to_the_account(
    api: Api, paused: Callable[..., Run], make_account: Callable[..., Account], make_key: Callable[..., str]
) -> None:
    paused("takeover")
    other = make_key(make_account("Other"))
    assert api.get("/api/runs", other).json() == {"runs": [], "count": 0, "next_offset": None}


# --- Descriptor per kind ---------------------------------------------------------------


def test_credential_descriptor(api: Api, paused: Callable[..., Run], runner_key: str, origin: str) -> None:
    run = paused("credential")
    request = CredentialRequest.objects.get(run=run)
    body = api.get(descriptor_path(run), runner_key).json()
    InterventionEnvelope.model_validate(body)
    intervention = body["intervention"]
    assert intervention["kind"] == "credential"
    assert intervention["state"] == "pending"
    assert intervention["request_id"] == str(request.id)
    assert intervention["computer_id"] == "pc-1"
    assert intervention["human_action"] == {
        "url": f"{origin}/tasks/{run.id}/intervention",
        "requires_login": True,
    }


def test_human_control_descriptor_has_no_request_fields(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    intervention = api.get(descriptor_path(paused("takeover")), runner_key).json()["intervention"]
    assert intervention["kind"] == "human_control"
    assert intervention["reason"] == "captcha"
    assert "request_id" not in intervention and "expires_at" not in intervention


def test_google_descriptor_request_id_is_run_id(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("connection")
    intervention = api.get(descriptor_path(run), runner_key).json()["intervention"]
    assert intervention["kind"] == "google_connection"
    assert intervention["request_id"] == str(run.id)
    assert "expires_at" not in intervention


@pytest.mark.parametrize("kind", ["continue", "credits"])
def test_continue_and_credits_have_no_descriptor(
    api: Api, paused: Callable[..., Run], runner_key: str, kind: str
) -> None:
    response = api.get(descriptor_path(paused(kind)), runner_key)
    assert response.status_code == 409
    assert kind in response.json()["error"]


def test_saved_credential_moves_descriptor_to_credential_saved(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    run = paused("credential")
    CredentialRequest.objects.filter(run=run).update(state="credential_saved", saved_at=timezone.now())
    intervention = api.get(descriptor_path(run), runner_key).json()["intervention"]
    assert intervention["state"] == "credential_saved"
    assert "saved" in intervention["progress"]
    assert api.get(f"/api/runs/{run.id}", runner_key).json()["required_action"]["kind"] == "credential"


def test_expired_request_makes_descriptor_unavailable(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("credential")
    CredentialRequest.objects.filter(run=run).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api.get(descriptor_path(run), runner_key)
    assert response.status_code == 409
    assert "expired" in response.json()["error"]


def test_revoked_computer_binding_makes_descriptor_unavailable(
    api: Api, paused: Callable[..., Run], runner_key: str, computer: Computer
) -> None:
    run = paused("takeover")
    Computer.objects.filter(pk=computer.pk).update(is_active=False)
    response = api.get(descriptor_path(run), runner_key)
    assert response.status_code == 409
    assert "binding" in response.json()["error"]


def test_computer_of_another_account_makes_descriptor_unavailable(
    api: Api,
    paused: Callable[..., Run],
    runner_key: str,
    computer: Computer,
    make_account: Callable[..., Account],
) -> None:
    run = paused("takeover")
    Computer.objects.filter(pk=computer.pk).update(account=make_account("Other"))
    assert api.get(descriptor_path(run), runner_key).status_code == 409


def test_cancel_makes_descriptor_unavailable(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("credential")
    response = api.post(f"/api/runs/{run.id}/cancel", {}, runner_key)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert "required_action" not in response.json()
    assert CredentialRequest.objects.get(run=run).state == "cancelled"
    assert api.get(descriptor_path(run), runner_key).status_code == 409
    # Cancelling again changes nothing and says so plainly.
    assert api.post(f"/api/runs/{run.id}/cancel", {}, runner_key).json()["status"] == "cancelled"


def test_continue_makes_descriptor_unavailable(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    created = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    assert created.status_code == 201
    response = api.get(descriptor_path(run), runner_key)
    assert response.status_code == 409
    assert response.json()["continued_run_id"] == created.json()["run"]["id"]


def test_cancel_of_finished_run_is_409(
    api: Api, account: Account, computer: Computer, runner_key: str
) -> None:
    run = run_finish(run=run_create(account=account, computer=computer, task={}, max_model_calls=1), output="done")
    response = api.post(f"/api/runs/{run.id}/cancel", {}, runner_key)
    assert response.status_code == 409
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_cancel_rejects_body_fields(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    assert api.post(f"/api/runs/{run.id}/cancel", {"force": True}, runner_key).status_code == 400
    assert Run.objects.get(pk=run.pk).status == "waiting_for_input"


# --- Continue --------------------------------------------------------------------------


def test_continue_creates_one_continuation_with_same_limits(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    run = paused("continue")
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    assert response.status_code == 201
    body = response.json()
    assert body["continued_from"] == str(run.id)
    new = Run.objects.get(pk=body["run"]["id"])
    assert new.continued_from_id == run.id
    assert new.max_model_calls == run.max_model_calls
    assert new.model_calls == 0
    assert new.status == "queued"
    assert body["run"]["continued_from"] == str(run.id)


def test_the_database_itself_refuses_a_second_continuation(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    """The promise does not rest on the service's checks alone: the schema makes a second row impossible."""
    run = paused("continue")
    assert api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key).status_code == 201
    twin = Run.objects.get(continued_from=run)
    twin.pk = uuid.uuid4()
    with pytest.raises(IntegrityError), transaction.atomic():
        twin.save(force_insert=True)
    assert Run.objects.filter(continued_from=run).count() == 1


def test_same_key_and_body_replays_bytes(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    first = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    second = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    assert first.status_code == second.status_code == 201
    assert first.content == second.content
    assert Run.objects.filter(continued_from=run).count() == 1


def test_same_key_different_request_is_422(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    first, second = paused("takeover"), paused("takeover")
    assert api.post(f"/api/runs/{first.id}/continue", {"idempotency_key": "continue-1"}, runner_key).status_code == 201
    response = api.post(f"/api/runs/{second.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    assert response.status_code == 422
    assert not Run.objects.filter(continued_from=second).exists()


def test_a_key_reused_on_other_runs_is_422_whichever_way_their_requests_sort(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    """The stored request and the new one must be equal: neither an earlier nor a later one passes."""
    first = paused("takeover")
    assert api.post(f"/api/runs/{first.id}/continue", {"idempotency_key": "continue-1"}, runner_key).status_code == 201
    stored = IdempotencyRecord.objects.get(key="continue-1").request_digest
    below, above = None, None
    while below is None or above is None:
        other = paused("takeover")
        if _continue_digest(other.id, "continue-1") < stored:
            below = below or other
        else:
            above = above or other
    for other in (below, above):
        response = api.post(f"/api/runs/{other.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
        assert response.status_code == 422
        assert not Run.objects.filter(continued_from=other).exists()


def test_a_continuation_resumes_at_the_cursor_and_takes_the_lease_afresh(
    api: Api, paused: Callable[..., Run], runner_key: str
) -> None:
    """The agent's state is carried over whole (keys sorting before and after it), except ``has_leased``."""
    run = paused("takeover")
    state = {"cursor": 4, "has_leased": True, "last_result": {"ok": True}}
    Run.objects.filter(pk=run.pk).update(agent_state=state)
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key)
    assert response.status_code == 201
    continuation = Run.objects.get(continued_from=run)
    assert continuation.agent_state == {"cursor": 4, "last_result": {"ok": True}}


def test_other_key_after_continuation_is_409_naming_it(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    created = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-1"}, runner_key).json()
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-2"}, runner_key)
    assert response.status_code == 409
    assert response.json()["continued_run_id"] == created["run"]["id"]
    assert Run.objects.filter(continued_from=run).count() == 1


def test_keys_are_scoped_to_the_account(
    api: Api,
    paused: Callable[..., Run],
    runner_key: str,
    make_account: Callable[..., Account],
    make_key: Callable[..., str],
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
) -> None:
    other_account = make_account("Other")
    other_run = make_paused_run(other_account, make_computer(other_account, "pc-2"), "takeover")
    run = paused("takeover")
    assert api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "shared-key"}, runner_key).status_code == 201
    other = api.post(f"/api/runs/{other_run.id}/continue", {"idempotency_key": "shared-key"}, make_key(other_account))
    assert other.status_code == 201


def test_credits_continue_requires_the_balance(
    api: Api, paused: Callable[..., Run], runner_key: str, account: Account
) -> None:
    Account.objects.filter(pk=account.pk).update(microcredit_balance=3_500_000)
    run = paused("credits")
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "credits-1"}, runner_key)
    assert response.status_code == 409
    assert response.json()["missing_microcredits"] == "8500000"
    assert not Run.objects.filter(continued_from=run).exists()
    assert not IdempotencyRecord.objects.exists()

    account_top_up(account=account, microcredits=8_500_000, actor="test")
    # The same key works once the balance covers the requirement: refusals are not stored.
    assert api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "credits-1"}, runner_key).status_code == 201


def test_continue_of_running_or_cancelled_run_is_409(
    api: Api, paused: Callable[..., Run], runner_key: str, account: Account, computer: Computer
) -> None:
    queued = run_create(account=account, computer=computer, task={}, max_model_calls=1)
    assert api.post(f"/api/runs/{queued.id}/continue", {"idempotency_key": "continue-1"}, runner_key).status_code == 409
    run = paused("takeover")
    api.post(f"/api/runs/{run.id}/cancel", {}, runner_key)
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "continue-2"}, runner_key)
    assert response.status_code == 409
    assert "cancelled" in response.json()["error"]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[]",
        b"{}",
        json.dumps({"idempotency_key": "short"}).encode(),
        json.dumps({"idempotency_key": "x" * 201}).encode(),
        json.dumps({"idempotency_key": "has spaces here"}).encode(),
        json.dumps({"idempotency_key": 12345678}).encode(),
        json.dumps({"idempotency_key": "continue-1", "extra": 1}).encode(),
    ],
)
def test_continue_rejects_bad_bodies_and_changes_nothing(
    api: Api, paused: Callable[..., Run], runner_key: str, raw: bytes
) -> None:
    run = paused("takeover")
    response = api.post(f"/api/runs/{run.id}/continue", key=runner_key, raw=raw)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert not Run.objects.filter(continued_from=run).exists()


def test_continue_requires_json_content_type(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    response = api.client.post(
        f"/api/runs/{run.id}/continue",
        data="idempotency_key=continue-1",
        content_type="application/x-www-form-urlencoded",
        headers={"Authorization": f"Bearer {runner_key}"},
    )
    assert response.status_code == 400


# --- Errors ------------------------------------------------------------------------------


def test_unknown_api_path_is_json_404(api: Api, runner_key: str) -> None:
    response = api.get("/api/nothing-here", runner_key)
    assert response.status_code == 404
    assert response.json() == {"error": "Not found."}


def test_wrong_method_is_json_405(api: Api, runner_key: str) -> None:
    response = api.post("/api/runs/" + str(uuid.uuid4()), {}, runner_key)
    assert response.status_code == 405
    assert "error" in response.json()


def test_malformed_run_id_is_404(api: Api, runner_key: str) -> None:
    response = api.get("/api/runs/not-a-uuid", runner_key)
    assert response.status_code == 404
    assert response.json() == {"error": "No such run."}


def test_openapi_lists_every_endpoint(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    for path, method in [
        ("/api/runs", "get"),
        ("/api/runs/{run_id}", "get"),
        ("/api/runs/{run_id}/intervention-descriptor", "get"),
        ("/api/runs/{run_id}/continue", "post"),
        ("/api/runs/{run_id}/cancel", "post"),
    ]:
        assert method in document["paths"][path]
    schema = document["components"]["schemas"]["InterventionDescriptor"]
    assert schema["additionalProperties"] is False


def test_descriptor_failing_its_contract_is_a_json_500_without_secrets(
    account: Account, make_paused_run: Callable[..., Run], runner_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A computer id the contract refuses (written around the model's validators).
    bad = Computer.objects.create(id="bad id!", account=account)
    run = make_paused_run(account, bad, "takeover")
    client = Client(raise_request_exception=False)
    response = client.get(descriptor_path(run), headers={"Authorization": f"Bearer {runner_key}"})
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) == {"error"}
    assert runner_key not in caplog.text


@pytest.mark.parametrize("value", ["²", "1e3", " 5", "99999999999"])
def test_list_refuses_non_ascii_or_huge_numbers(api: Api, runner_key: str, value: str) -> None:
    response = api.get("/api/runs", runner_key, limit=value)
    assert response.status_code == 400


# --- The OpenAPI document says which query values are accepted, and the server agrees -------------


def _query_schemas(document: dict[str, Any], path: str, method: str = "get") -> dict[str, dict[str, Any]]:
    return {p["name"]: p["schema"] for p in document["paths"][path][method]["parameters"] if p["in"] == "query"}


def test_openapi_gives_each_runs_filter_its_values(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    runs = _query_schemas(document, "/api/runs")
    assert runs["limit"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert runs["offset"] == {"type": "integer", "minimum": 0, "maximum": 10**9}
    assert set(runs["status"]["enum"]) == set(Run.Status.values)
    assert set(runs["kind"]["enum"]) == set(KINDS)
    assert runs["computer_id"]["pattern"].startswith("^")
    events = _query_schemas(document, "/api/runs/{run_id}/events")
    assert events["after"] == {"type": "integer", "minimum": 0, "maximum": 10**12}
    upload = next(p for p in document["paths"]["/api/artifacts"]["post"]["parameters"] if p["name"] == "filename")
    assert upload["required"] is True


@pytest.mark.parametrize("params", [{"status": ""}, {"kind": ""}, {"computer_id": ""}, {"limit": ""}, {"offset": ""}])
def test_list_refuses_an_empty_filter_that_the_document_does_not_allow(
    api: Api, runner_key: str, params: dict[str, str]
) -> None:
    response = api.get("/api/runs", runner_key, **params)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid request")


def test_list_refuses_a_computer_id_that_is_not_one(api: Api, runner_key: str) -> None:
    response = api.get("/api/runs", runner_key, computer_id="pc\x00one")
    assert response.status_code == 400
    assert response.json()["error"] == "Invalid request: computer_id is not a computer id."


def test_events_accept_every_after_the_document_allows(api: Api, paused: Callable[..., Run], runner_key: str) -> None:
    run = paused("takeover")
    response = api.get(f"/api/runs/{run.id}/events", runner_key, after=str(10**12))
    assert response.status_code == 200
    assert response.json()["events"] == []
    assert api.get(f"/api/runs/{run.id}/events", runner_key, after=str(10**12 + 1)).status_code == 400


def test_every_operation_with_a_body_or_query_documents_its_400(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    checked = 0
    for path, item in document["paths"].items():
        for method, entry in item.items():
            if "requestBody" in entry or any(p["in"] == "query" for p in entry["parameters"]):
                assert "400" in entry["responses"], f"{method.upper()} {path}"
                checked += 1
    assert checked > 10
    assert "400" in document["paths"]["/api/sessions/delegate"]["post"]["responses"]


def test_delegate_without_a_json_body_is_the_documented_400(api: Api, runner_key: str) -> None:
    response = api.client.post(
        "/api/sessions/delegate", data=b"", content_type="text/plain", headers={"Authorization": f"Bearer {runner_key}"}
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid request: Content-Type must be application/json."}


def test_a_created_run_links_to_every_operation_on_it(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    links = document["paths"]["/api/runs"]["post"]["responses"]["201"]["links"]
    assert links["get_run_id"] == {
        "operationRef": "#/paths/~1api~1runs~1{run_id}/get",
        "parameters": {"run_id": "$response.body#/id"},
    }
    assert links["post_run_id_continue"]["operationRef"] == "#/paths/~1api~1runs~1{run_id}~1continue/post"
    # Each link names an operation of the document; none needs a second parameter.
    for link in links.values():
        path, method = link["operationRef"].removeprefix("#/paths/").rsplit("/", 1)
        assert method in document["paths"][path.replace("~1", "/").replace("~0", "~")]
    assert not any("step_id" in name for name in links)


def test_a_key_stored_before_the_snapshot_replays_byte_for_byte_after_migrating(
    api: Api, paused: Callable[..., Run], runner_key: str, account: Account
) -> None:
    """A continue record written before 0012 (REST's status and bytes) still replays: the same 201 and
    bytes, its digest unchanged, and no second continuation."""
    run = paused("takeover")
    first = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "first-answer"}, runner_key)
    assert first.status_code == 201
    first_bytes = first.content
    IdempotencyRecord.objects.all().delete()
    with connection.cursor() as cursor:  # the test's transaction: no row change may wait to be checked
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    executor = MigrationExecutor(connection)
    executor.migrate([("runs", "0011_long_wait")])
    before = executor.loader.project_state([("runs", "0011_long_wait")]).apps.get_model("runs", "IdempotencyRecord")
    # As the code before the upgrade stored it: the REST status and the exact response bytes.
    before.objects.create(
        account_id=account.pk,
        key="pre-upgrade-key",
        request_digest=_continue_digest(run.id, "pre-upgrade-key"),
        status_code=201,
        response_body=first_bytes,
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    replay = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "pre-upgrade-key"}, runner_key)
    assert replay.status_code == 201 and replay.content == first_bytes
    assert Run.objects.filter(continued_from=run).count() == 1
    other = paused("takeover")
    reused = api.post(f"/api/runs/{other.id}/continue", {"idempotency_key": "pre-upgrade-key"}, runner_key)
    assert reused.status_code == 422
    assert not Run.objects.filter(continued_from=other).exists()
