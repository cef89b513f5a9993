"""The run loop with the scripted agent: pauses of every kind reached by real
steps, budgets and credits, continuation without replay, and a step left by a
dead worker that is never repeated."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import account_top_up
from computers.models import Computer
from core.clock import ManualClock
from runs import loop
from runs.models import CredentialRequest, IdempotencyRecord, Run, RunEvent, RunStep
from runs.selectors import run_required_action as required_action_model
from runs.services import run_cancel, run_continue, run_create
from runs.tasks import sweep
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def tolerant(tool: str, **arguments: Any) -> dict[str, Any]:
    """A step whose tool error does not end the run (these computers have no executor)."""
    return {"tool": tool, "arguments": arguments, "on_error": "continue"}


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


@pytest.fixture
def start(funded: Account, computer: Computer) -> Callable[..., Run]:
    def make(steps: list[dict[str, Any]], max_model_calls: int = 10, price: int = 1000) -> Run:
        return run_create(
            account=funded,
            computer=computer,
            task={"goal": "test", "steps": steps},
            max_model_calls=max_model_calls,
            microcredits_per_model_call=price,
        )

    return make


def run_required_action(*, run: Run) -> dict[str, Any] | None:
    """The run's ``required_action`` as it goes on the wire."""
    action = required_action_model(run=run)
    return action.model_dump(mode="json") if action is not None else None


def drive(run: Run, limit: int = 50) -> Run:
    """Advance the run step by step, as the Celery task does, until it stops."""
    for _ in range(limit):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def test_request_credential_pauses_with_a_request(start: Callable[..., Run], funded: Account) -> None:
    run = drive(start([step("request_credential", portal_origin="https://portal.example.com", label="Portal")]))
    assert run.status == "waiting_for_input"
    request = CredentialRequest.objects.get(run=run)
    assert request.portal_origin == "https://portal.example.com"
    action = run_required_action(run=run)
    assert action is not None and action["kind"] == "credential"
    assert action["request_id"] == str(request.id)
    assert run.model_calls == 1
    funded.refresh_from_db()
    assert funded.microcredit_balance == 1_000_000 - 1000


@pytest.mark.parametrize(
    "tool,arguments,kind",
    [
        ("request_takeover", {"reason": "captcha"}, "takeover"),
        ("request_connection", {"capabilities": ["gmail.readonly"]}, "connection"),
    ],
)
def test_requests_for_a_person_pause(start: Callable[..., Run], tool: str, arguments: dict[str, Any], kind: str) -> None:
    run = drive(start([step(tool, **arguments)]))
    action = run_required_action(run=run)
    assert action is not None and action["kind"] == kind


def test_finish_and_fail(start: Callable[..., Run]) -> None:
    done = drive(start([step("finish", output={"answer": 42})]))
    assert done.status == "succeeded"
    assert done.result == {"outcome": "succeeded", "output": {"answer": 42}}
    failed = drive(start([step("fail", error="The portal is down.")]))
    assert failed.status == "failed"
    assert failed.result == {"outcome": "failed", "error": "The portal is down."}


def test_budget_pauses_then_continuation_resumes_without_replay(
    start: Callable[..., Run], runner_key: str, account: Account
) -> None:
    steps = [tolerant("navigate", url=f"http://127.0.0.1:9/{i}") for i in range(3)]
    run = drive(start(steps, max_model_calls=2))
    assert run.status == "waiting_for_input"
    assert run_required_action(run=run) == {
        "version": 1,
        "resume": "explicit_continue",
        "kind": "continue",
        "reason": "max_model_calls_reached",
        "budget": {"model_calls": 2, "max_model_calls": 2, "remaining_model_calls": 0},
    }
    key = ApiKey.objects.get(account=account, kind="runner")
    continued = run_continue(key=key, run_id=run.id, idempotency_key="continue-budget")
    assert not continued.replayed
    continuation = drive(Run.objects.get(continued_from=run))
    assert continuation.status == "succeeded"
    # The continuation played only the third navigate and then finished.
    assert [s.summary.get("url") for s in continuation.steps.all()] == ["http://127.0.0.1:9/2", None]
    assert [s.tool for s in continuation.steps.all()] == ["navigate", "finish"]
    assert continuation.model_calls == 2


def test_a_tool_error_fails_the_scripted_run_with_the_tools_error(start: Callable[..., Run]) -> None:
    run = drive(start([step("navigate", url="http://127.0.0.1:9/"), step("extract_text")]))
    assert run.status == "failed"
    assert run.steps.count() == 1, "no step runs after the failed one"
    first = run.steps.get(index=0)
    assert first.summary["isError"] is True
    assert run.result is not None
    assert run.result["step"] == 0 and run.result["tool"] == "navigate"
    assert run.result["category"] == "unprocessable" and "code" not in run.result
    assert run.result["error"].startswith("Step 1 (navigate) failed [unprocessable]: The computer is not available")
    event = RunEvent.objects.get(run=run, kind="run_failed")
    assert event.data == {"step": 0, "tool": "navigate"}


def test_a_step_with_on_error_continue_goes_on_and_the_agent_sees_the_error(start: Callable[..., Run]) -> None:
    run = drive(start([tolerant("navigate", url="http://127.0.0.1:9/"), tolerant("extract_text")]))
    assert run.status == "succeeded"
    first = run.steps.get(index=0)
    assert first.summary["isError"] is True
    assert run.result is not None and "not available" in run.result["output"]


def test_on_error_accepts_only_fail_or_continue(api: Api, computer: Computer, runner_key: str) -> None:
    bad = {"tool": "navigate", "arguments": {"url": "https://example.com/"}, "on_error": "ignore"}
    response = api.post("/api/runs", {"task": {"goal": "x", "steps": [bad]}, "computer_id": computer.id}, runner_key)
    assert response.status_code == 400
    assert not Run.objects.exists()


def test_short_balance_pauses_for_credits_with_exact_amounts(
    start: Callable[..., Run], funded: Account, runner_key: str
) -> None:
    Account.objects.filter(pk=funded.pk).update(microcredit_balance=1500)
    run = drive(start([tolerant("navigate", url="http://127.0.0.1:9/")] * 3))
    assert run.model_calls == 1
    assert run_required_action(run=run) == {
        "version": 1,
        "resume": "explicit_continue",
        "kind": "credits",
        "reason": "insufficient_credits",
        "credits": {"required_microcredits": "1000", "available_microcredits": "500", "missing_microcredits": "500"},
    }
    funded.refresh_from_db()
    assert funded.microcredit_balance == 500


def test_credits_continuation_after_top_up(api: Api, start: Callable[..., Run], funded: Account, runner_key: str) -> None:
    Account.objects.filter(pk=funded.pk).update(microcredit_balance=500)
    run = drive(start([step("finish", output="ok")]))
    assert run.pause_kind == "credits"
    refused = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "credits-key"}, runner_key)
    assert refused.status_code == 409 and refused.json()["missing_microcredits"] == "500"
    account_top_up(account=funded, microcredits=500, actor="test")
    created = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": "credits-key"}, runner_key)
    assert created.status_code == 201
    continuation = drive(Run.objects.get(pk=created.json()["run"]["id"]))
    assert continuation.status == "succeeded"
    funded.refresh_from_db()
    assert funded.microcredit_balance == 0


def test_cancelled_run_takes_no_further_step(start: Callable[..., Run]) -> None:
    run = start([tolerant("navigate", url="http://127.0.0.1:9/")] * 5)
    assert loop.run_step_advance(run_id=run.id) is True
    run_cancel(run=run)
    assert loop.run_step_advance(run_id=run.id) is False
    assert RunStep.objects.filter(run=run).count() == 1


def test_step_left_by_a_dead_worker_is_never_replayed(
    start: Callable[..., Run], settings: Any, api: Api, runner_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.RAM_STEP_MAX_SECONDS = 60
    run = start([tolerant("navigate", url="http://127.0.0.1:9/"), step("finish")])
    claimed = loop._claim(run.id)  # phase 1 only: the worker died before acting
    assert claimed is not None
    # The step's age is decided on the loop's clock, from when the step was recorded.
    clock = ManualClock(wall=RunStep.objects.get(run=run).started_at)
    monkeypatch.setattr(loop, "CLOCK", clock)
    clock.advance(59)
    assert loop.run_step_advance(run_id=run.id) is False  # still possibly in flight elsewhere
    assert RunStep.objects.get(run=run).state == "started"
    clock.advance(1)
    assert loop.run_step_advance(run_id=run.id) is False
    run.refresh_from_db()
    assert RunStep.objects.filter(run=run).count() == 1
    assert RunStep.objects.get(run=run).state == "uncertain"
    assert run.status == "waiting_for_input"
    assert run_required_action(run=run)["kind"] == "takeover"  # type: ignore[index]
    assert RunEvent.objects.filter(run=run, kind="step_uncertain").count() == 1
    listed = api.get(f"/api/runs/{run.id}/steps", runner_key).json()["steps"]
    assert [(s["tool"], s["state"], s["result"]) for s in listed] == [("navigate", "uncertain", None)]


def test_events_and_results_carry_no_typed_text(start: Callable[..., Run]) -> None:
    secret = "s3cr3t-typed-value"
    run = drive(start([step("type", selector="#q", text=secret)]))
    dump = str(list(RunEvent.objects.filter(run=run).values())) + str(list(run.steps.values())) + str(run.result)
    assert secret not in dump
    assert run.steps.get(index=0).summary["characters"] == len(secret)


# --- POST /api/runs ---------------------------------------------------------------------


def test_create_run_through_the_api(api: Api, funded: Account, computer: Computer, runner_key: str) -> None:
    body = {
        "task": {"goal": "Say hi", "steps": [step("finish", output="hi")]},
        "computer_id": computer.id,
        "agent": {"type": "scripted", "browser": {"provider": "self_hosted", "solveCaptcha": True}},
        "max_model_calls": 3,
    }
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["status"] == "queued"
    run = drive(Run.objects.get(pk=created["id"]))
    assert run.status == "succeeded"
    assert run.agent_config == {"type": "scripted", "browser": {"provider": "self_hosted", "solveCaptcha": True}}


@pytest.mark.parametrize(
    "change",
    [
        {"task": {"goal": "", "steps": []}},
        {"task": {"goal": "x", "steps": [step("teleport")]}},
        {"task": {"goal": "x", "steps": [step("navigate", url="file:///etc/passwd")]}},
        {"task": {"goal": "x", "steps": [step("navigate", url="https://user:pw@example.com/")]}},
        {"task": {"goal": "x", "steps": [step("click")]}},
        {"task": {"goal": "x", "steps": [step("click", selector="#a", x=1, y=2)]}},
        {"task": {"goal": "x", "steps": [step("browser_login", credentialId="../etc")]}},
        {"task": {"goal": "x", "steps": [step("request_credential", portal_origin="https://a.example/path", label="x")]}},
        {"max_model_calls": 0},
        {"agent": {"type": "gpt"}},
        {"agent": {"browser": {"provider": "other"}}},
        {"extra": True},
    ],
)
def test_create_run_rejects_bad_input_and_creates_nothing(
    api: Api, computer: Computer, runner_key: str, change: dict[str, Any]
) -> None:
    body = {"task": {"goal": "x", "steps": [step("finish", output="x")]}, "computer_id": computer.id, **change}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert not Run.objects.exists()


@pytest.mark.parametrize("task", [{"goal": "just a goal"}, {"goal": "just a goal", "steps": []}])
def test_a_scripted_run_without_steps_is_refused_at_creation(
    api: Api, computer: Computer, runner_key: str, task: dict[str, Any]
) -> None:
    """The scripted agent (the default) plays task.steps only: with none it would "succeed" doing nothing."""
    for agent in ({}, {"agent": {"type": "scripted"}}):
        response = api.post("/api/runs", {"task": task, "computer_id": computer.id, **agent}, runner_key)
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert set(response.json()) == {"error"}
        assert "nothing for it to do" in error and "task.steps" in error
        assert '"external"' in error and '"openai_compatible"' in error
    assert not Run.objects.exists()
    # Another agent takes a goal alone.
    external = {"task": task, "computer_id": computer.id, "agent": {"type": "external"}}
    assert api.post("/api/runs", external, runner_key).status_code == 201


def test_create_run_on_foreign_or_unknown_computer_is_404(
    api: Api,
    runner_key: str,
    observer_key: str,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
) -> None:
    foreign = make_computer(make_account("Other"), "theirs")
    for computer_id in ("theirs", "missing"):
        body = {"task": {"goal": "x", "steps": [{"tool": "finish", "arguments": {"output": "x"}}]}, "computer_id": computer_id}
        assert api.post("/api/runs", body, runner_key).status_code == 404
    assert api.post("/api/runs", {"task": {"goal": "x", "steps": [{"tool": "finish", "arguments": {"output": "x"}}]}, "computer_id": foreign.id}, observer_key).status_code == 403
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "kind,steps,max_model_calls,price",
    [
        ("takeover", [step("request_takeover", reason="captcha")], 5, 1000),
        ("credential", [step("request_credential", portal_origin="https://portal.example", label="Portal")], 5, 1000),
        ("connection", [step("request_connection", capabilities=["gmail.readonly"])], 5, 1000),
        ("continue", [tolerant("navigate", url="http://127.0.0.1:9/")], 1, 1000),
        ("credits", [], 5, 2_000_000),
    ],
)
def test_every_pause_kind_is_reached_by_a_real_run_and_continued(
    api: Api,
    funded: Account,
    computer: Computer,
    runner_key: str,
    kind: str,
    steps: list[dict[str, Any]],
    max_model_calls: int,
    price: int,
) -> None:
    run = drive(
        run_create(
            account=funded,
            computer=computer,
            task={"goal": "x", "steps": steps},
            max_model_calls=max_model_calls,
            microcredits_per_model_call=price,
        )
    )
    assert run.status == "waiting_for_input"
    assert run_required_action(run=run)["kind"] == kind  # type: ignore[index]
    if kind == "credits":
        account_top_up(account=funded, microcredits=2_000_000, actor="test")
    response = api.post(f"/api/runs/{run.id}/continue", {"idempotency_key": f"continue-{kind}"}, runner_key)
    assert response.status_code == 201, response.content
    continuation = drive(Run.objects.get(pk=response.json()["run"]["id"]))
    assert continuation.status == "succeeded"
    assert [s.tool for s in continuation.steps.all()] == ["finish"]


def test_step_records_keep_no_query_or_fragment_of_a_navigation(start: Callable[..., Run]) -> None:
    run = drive(start([step("navigate", url="https://portal.example/magic?token=abc123#frag")]))
    navigate = run.steps.get(index=0)
    assert navigate.summary["url"] == "https://portal.example/magic"
    events = str(list(RunEvent.objects.filter(run=run).values_list("data", flat=True)))
    assert "abc123" not in events and "abc123" not in str(navigate.summary)


def test_sweep_expires_requests_and_forgets_old_keys(start: Callable[..., Run], settings: Any) -> None:
    run = drive(start([step("request_credential", portal_origin="https://portal.example", label="Portal")]))
    CredentialRequest.objects.filter(run=run).update(expires_at=timezone.now() - timedelta(seconds=1))
    IdempotencyRecord.objects.create(
        account=run.account, key="old-key-1", request_digest="x", status_code=201, response_body=b"{}"
    )
    IdempotencyRecord.objects.filter(key="old-key-1").update(created_at=timezone.now() - timedelta(hours=49))
    IdempotencyRecord.objects.create(
        account=run.account, key="new-key-1", request_digest="x", status_code=201, response_body=b"{}"
    )
    result = sweep()
    assert result["expired_requests"] == 1 and result["expired_keys"] == 1
    assert CredentialRequest.objects.get(run=run).state == "expired"
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["new-key-1"]
