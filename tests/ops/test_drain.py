"""Draining a computer before its executor restarts (the upgrade procedure)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from computers.services import executor_register
from runs import loop
from runs.models import Run, RunStep
from runs.services import run_create


def drain(computer_id: str, wait: str = "1") -> dict[str, object]:
    out = io.StringIO()
    call_command("drain_executor", "--computer", computer_id, "--wait", wait, stdout=out)
    return dict(json.loads(out.getvalue()))


def test_a_drained_computer_takes_no_new_step_until_its_executor_restarts(
    transactional_db: None, account: Account, make_computer: Callable[..., Computer]
) -> None:
    computer = make_computer(account, "pc-1")
    account_top_up(account=account, microcredits=10_000, actor="test")
    run = run_create(
        account=account,
        computer=computer,
        task={"goal": "finish", "steps": [{"tool": "finish", "arguments": {"output": "ok"}}]},
        max_model_calls=3,
        microcredits_per_model_call=100,
    )
    assert drain("pc-1") == {"computer_id": "pc-1", "draining": True, "steps_in_flight": 0}

    assert loop.run_step_advance(run_id=run.id) is False
    run.refresh_from_db()
    # Admitted before the drain, the run holds its computer but takes no step.
    assert (run.status, run.step_count, run.model_calls) == ("running", 0, 0)
    assert Account.objects.get(pk=account.pk).microcredit_balance == 10_000  # nothing charged

    # The executor restarts: a new generation registers and the drain ends.
    executor_register(computer_id="pc-1", generation=uuid.uuid4(), address="127.0.0.1:9")
    assert Computer.objects.get(pk="pc-1").draining is False
    while loop.run_step_advance(run_id=run.id):
        pass
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_drain_waits_for_a_step_in_flight(
    transactional_db: None, account: Account, make_computer: Callable[..., Computer]
) -> None:
    computer = make_computer(account, "pc-1")
    run = Run.objects.create(account=account, computer=computer, status="running", task={"goal": "x"})
    step = RunStep.objects.create(run=run, index=0, tool="navigate")
    with pytest.raises(CommandError, match="1 step\\(s\\) still in flight"):
        drain("pc-1", wait="0.6")
    assert Computer.objects.get(pk="pc-1").draining is True
    RunStep.objects.filter(pk=step.pk).update(state=RunStep.State.SUCCEEDED)
    assert drain("pc-1")["steps_in_flight"] == 0


def test_draining_an_unknown_computer_is_refused(transactional_db: None) -> None:
    with pytest.raises(CommandError, match="No computer 'nope'"):
        drain("nope")
