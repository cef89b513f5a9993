"""The capture of a pause through the real run loop, on a real executor: taken while no row is
locked, and under a lease the run waits for when the computer's previous holder has let go of it
in the database and its lease on the executor has not ended yet."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, transaction

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer, DiagnosticArtifact
from executor.control import ControlError
from runs import loop
from runs.models import Run, RunEvent
from runs.services import run_create
from tests.runs.test_history import on_capture_stored
from tests.support.screen import on_executor, reset_executor

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "<title>Portal</title><h1 id=t>Sign in to the portal</h1>"


def start(account: Account, steps: list[dict[str, Any]], *, max_model_calls: int = 10) -> Run:
    account_top_up(account=account, microcredits=100_000, actor="test")
    return run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "pause captures", "steps": steps},
        max_model_calls=max_model_calls,
        microcredits_per_model_call=1,
    )


def row_locked(run_id: Any) -> bool:
    """Whether another transaction holds the run's row locked (asked without waiting)."""
    try:
        with transaction.atomic():
            list(Run.objects.select_for_update(nowait=True).filter(pk=run_id))
    except DatabaseError:
        return True
    return False


def kinds_and_data(run_id: Any) -> list[tuple[str, dict[str, Any]]]:
    return list(RunEvent.objects.filter(run_id=run_id).order_by("id").values_list("kind", "data"))


def test_a_budget_pause_the_settle_of_a_step_reaches_is_captured_before_its_transaction(
    screen: Any, account: Account
) -> None:
    """The step's settle checks the next step under the run's lock and finds the budget spent: the
    pause's capture was taken before that transaction (on SQLite the executor's upload of it
    would wait for the transaction's own write lock until the capture's timeout)."""
    reset_executor(screen, PAGE)
    step = {"tool": "extract_text", "arguments": {"selector": "#t"}}
    run = start(account, [step, step], max_model_calls=1)
    seen: list[tuple[str, bool]] = []
    with on_capture_stored(lambda artifact: seen.append((Run.objects.get(pk=run.id).status, row_locked(run.id)))):
        assert loop.run_step_advance(run_id=run.id) is False
    run.refresh_from_db()
    assert (run.status, run.pause_kind) == ("waiting_for_input", "continue")
    assert seen == [("running", False)], "captured once, before the pause, with no row locked"
    events = kinds_and_data(run.id)
    kinds = [kind for kind, _ in events]
    captured = kinds.index("screenshot_captured")
    assert captured < kinds.index("run_paused"), kinds
    assert events[captured][1]["trigger"] == "paused"
    assert DiagnosticArtifact.objects.filter(pk=events[captured][1]["artifact_id"], kind="screenshot").exists()


@pytest.mark.parametrize(
    "step",
    [
        {"tool": "extract_text", "arguments": {"selector": "#t"}},  # a step's first lease
        {"tool": "request_connection", "arguments": {"capabilities": ["gmail.readonly"]}},  # captured ahead
        {"tool": "request_takeover", "arguments": {"reason": "captcha"}},  # captured after, computer kept
    ],
    ids=lambda step: step["tool"],
)
def test_the_previous_holders_lease_is_waited_for_never_a_reason_to_fail(
    screen: Any, account: Account, monkeypatch: Any, step: dict[str, Any]
) -> None:
    """The run that held the computer before let go of it in a transaction that committed, and its
    lease on the executor ends just after (released after commit, or lapsed): here it ends right
    after the new holder's first request for a lease was refused. The new holder waits for it."""
    reset_executor(screen, PAGE)

    async def previous_holder() -> str:
        return screen.control.lease_acquire().id

    stale = on_executor(screen, previous_holder)
    control = screen.control
    acquire = control.lease_acquire
    refused: list[str] = []

    def released_after_a_refusal() -> Any:
        try:
            return acquire()
        except ControlError as exc:
            if exc.reason == "leased" and not refused:
                refused.append(exc.reason)
                control.lease_release(stale)  # the previous holder's release lands now
            raise

    monkeypatch.setattr(control, "lease_acquire", released_after_a_refusal)
    run = start(account, [step])
    while loop.run_step_advance(run_id=run.id):
        pass
    run.refresh_from_db()
    assert refused == ["leased"], "the run asked while the previous holder's lease was still active"
    if step["tool"] == "extract_text":
        assert (run.status, run.result) == ("succeeded", {"outcome": "succeeded", "output": "Sign in to the portal"})
    else:
        assert run.status == "waiting_for_input"
        paused = [data for kind, data in kinds_and_data(run.id) if kind == "screenshot_captured"]
        assert len(paused) == 1 and paused[0]["trigger"] == "paused", kinds_and_data(run.id)
