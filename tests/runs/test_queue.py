"""The run queue (runs/queue.py): one run per computer in FIFO order with a visible
``queue_position``, a computer released by every pause but a takeover of it, a
per-account limit of running runs, fair dispatch between accounts, and a sweep that
starts what a lost dispatch left queued."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import account_top_up
from computers.models import Computer
from runs import external, loop, tasks
from runs.apps import check_queue_settings
from runs.contracts import CredentialPause, TakeoverPause
from runs.models import Run, RunEvent, RunStep
from runs.queue import queue_dispatch, queue_position
from runs.services import run_cancel, run_continue, run_create, run_finish, run_pause
from tests.conftest import Api

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def roomy_limit(settings: Any) -> None:
    """A limit high enough that only the computer decides, unless a test lowers it."""
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 5


@pytest.fixture
def new_run(db: None) -> Callable[..., Run]:
    def make(account: Account, computer: Computer, *, agent: str = "scripted") -> Run:
        return run_create(
            account=account,
            computer=computer,
            task={"goal": "test", "steps": [{"tool": "finish", "arguments": {"output": "done"}}]},
            agent_config={"type": agent},
            max_model_calls=3,
            microcredits_per_model_call=0,
        )

    return make


def fresh(run: Run) -> Run:
    return Run.objects.get(pk=run.pk)


def test_a_run_for_a_busy_computer_waits_queued_with_its_position(
    api: Api, runner_key: str, account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    first = new_run(account, computer)
    queue_dispatch()
    second, third = new_run(account, computer), new_run(account, computer)
    queue_dispatch()
    assert (fresh(first).status, fresh(first).holds_computer) == ("running", True)
    assert [fresh(r).status for r in (second, third)] == ["queued", "queued"]
    body = api.get(f"/api/runs/{second.id}", runner_key).json()
    assert (body["status"], body["queue_position"]) == ("queued", 1)
    assert api.get(f"/api/runs/{third.id}", runner_key).json()["queue_position"] == 2
    assert api.get(f"/api/runs/{first.id}", runner_key).json()["queue_position"] is None
    listed = {r["id"]: r["queue_position"] for r in api.get("/api/runs", runner_key).json()["runs"]}
    assert listed == {str(first.id): None, str(second.id): 1, str(third.id): 2}
    assert list(RunEvent.objects.filter(run=third).values_list("kind", flat=True)) == ["run_created", "run_queued"]
    assert RunEvent.objects.get(run=third, kind="run_queued").data == {"queue_position": 2}


def test_runs_start_in_the_order_they_were_queued(account: Account, computer: Computer, new_run: Callable[..., Run]) -> None:
    runs = [new_run(account, computer) for _ in range(4)]
    started = []
    for _ in runs:
        queue_dispatch()
        (running,) = Run.objects.filter(status="running")
        started.append(running.pk)
        run_finish(run=running, output="done")
    assert started == [r.pk for r in runs]
    assert all(RunEvent.objects.filter(run=r, kind="run_started").count() == 1 for r in runs)


def test_the_database_refuses_a_second_holder_of_a_computer(
    account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    first, second = new_run(account, computer), new_run(account, computer)
    queue_dispatch()
    assert fresh(first).holds_computer
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=second.pk).update(holds_computer=True)


def test_a_step_of_a_queued_run_does_nothing_while_its_computer_is_busy(
    account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    first, second = new_run(account, computer), new_run(account, computer)
    assert loop.run_step_advance(run_id=second.id) is False
    assert fresh(second).status == "queued" and not RunStep.objects.filter(run=second).exists()
    assert fresh(first).status == "running"  # the step's dispatch started the first in line instead


def test_a_pause_releases_the_computer_and_the_next_run_starts(
    account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    first, second = new_run(account, computer), new_run(account, computer)
    queue_dispatch()
    run_pause(run=fresh(first), pause=CredentialPause(kind="credential", reason="missing_information", request_id=first.id))
    assert not fresh(first).holds_computer
    queue_dispatch()
    assert (fresh(second).status, fresh(second).holds_computer) == ("running", True)


def test_a_takeover_keeps_the_computer_and_its_continuation_goes_first(
    account: Account, computer: Computer, new_run: Callable[..., Run], make_key: Callable[..., str]
) -> None:
    first, waiting = new_run(account, computer), new_run(account, computer)
    queue_dispatch()
    Run.objects.filter(pk=first.pk).update(executor_lease="lease-of-first")
    run_pause(run=fresh(first), pause=TakeoverPause(kind="takeover", reason="captcha"))
    queue_dispatch()
    assert fresh(first).holds_computer, "a person is on that computer"
    assert fresh(waiting).status == "queued"
    make_key(account)
    run_continue(key=ApiKey.objects.get(account=account), run_id=first.id, idempotency_key="continue-after-takeover")
    continuation = Run.objects.get(continued_from=first)
    assert not fresh(first).holds_computer
    assert continuation.holds_computer and continuation.executor_lease == "lease-of-first"
    assert queue_position(continuation) == 1 and queue_position(fresh(waiting)) == 2
    queue_dispatch()
    assert fresh(continuation).status == "running" and fresh(waiting).status == "queued"


def test_cancelling_frees_the_computer_and_a_cancelled_queued_run_never_starts(
    account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    first, second, third = (new_run(account, computer) for _ in range(3))
    queue_dispatch()
    run_cancel(run=second)
    assert queue_position(fresh(third)) == 1
    run_cancel(run=first)
    queue_dispatch()
    assert [fresh(r).status for r in (first, second, third)] == ["cancelled", "cancelled", "running"]
    assert fresh(second).started_at is None


def test_an_account_over_its_limit_waits_and_other_accounts_start(
    settings: Any,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    new_run: Callable[..., Run],
) -> None:
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 1
    busy, other = make_account("Busy"), make_account("Other")
    a1, a2, b1 = make_computer(busy, "a-1"), make_computer(busy, "a-2"), make_computer(other, "b-1")
    first, over = new_run(busy, a1), new_run(busy, a2)
    theirs = new_run(other, b1)
    queue_dispatch()
    assert [fresh(r).status for r in (first, over, theirs)] == ["running", "queued", "running"]
    assert queue_position(fresh(over)) == 1, "never refused: it keeps its place"
    run_finish(run=fresh(first), output="done")
    queue_dispatch()
    assert fresh(over).status == "running"


def test_when_several_runs_may_start_the_account_with_fewest_running_goes_first(
    settings: Any,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    new_run: Callable[..., Run],
) -> None:
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 2
    flood, small = make_account("Flood"), make_account("Small")
    flooded = [new_run(flood, make_computer(flood, f"f-{i}")) for i in range(3)]
    late = new_run(small, make_computer(small, "s-1"))
    queue_dispatch()
    started = list(RunEvent.objects.filter(kind="run_started").order_by("id").values_list("run_id", flat=True))
    assert started == [flooded[0].id, late.id, flooded[1].id]
    assert fresh(flooded[2]).status == "queued"


def test_the_sweep_starts_a_run_whose_dispatch_was_lost(account: Account, computer: Computer, new_run: Callable[..., Run]) -> None:
    # Inside a test transaction nothing runs after commit: exactly what a process dying there leaves.
    run = new_run(account, computer)
    assert fresh(run).status == "queued"
    tasks.sweep()
    assert fresh(run).status == "running"


def test_a_queued_external_run_refuses_actions_with_its_position_and_charges_nothing(
    api: Api, account: Account, computer: Computer, new_run: Callable[..., Run], make_key: Callable[..., str]
) -> None:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    key = make_key(account)
    holder = new_run(account, computer)
    queue_dispatch()
    harness = new_run(account, computer, agent="external")
    response = api.post(
        f"/api/runs/{harness.id}/actions", {"tool": "finish", "arguments": {"output": "x"}, "idempotency_key": "action-one"}, key
    )
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "run.not_taking_actions" and body["queue_position"] == 1
    assert fresh(harness).model_calls == 0 and not RunStep.objects.filter(run=harness).exists()
    run_finish(run=fresh(holder), output="done")
    response = api.post(
        f"/api/runs/{harness.id}/actions", {"tool": "finish", "arguments": {"output": "x"}, "idempotency_key": "action-one"}, key
    )
    assert response.status_code == 200, response.content
    assert fresh(harness).status == "succeeded"


def test_the_idle_sweep_never_pauses_a_queued_external_run(
    settings: Any, account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    holder = new_run(account, computer)
    queue_dispatch()
    harness = new_run(account, computer, agent="external")
    long_ago = timezone.now() - timedelta(seconds=settings.RAM_EXTERNAL_IDLE_SECONDS + 60)
    Run.objects.filter(pk__in=[holder.pk, harness.pk]).update(updated_at=long_ago)
    assert external.external_runs_idle_pause() == 0
    assert fresh(harness).status == "queued"
    run_finish(run=fresh(holder), output="done")
    queue_dispatch()
    assert fresh(harness).status == "running", "admitted: it holds its computer and waits for actions"
    Run.objects.filter(pk=harness.pk).update(updated_at=long_ago)
    assert external.external_runs_idle_pause() == 1
    paused = fresh(harness)
    assert paused.pause_kind == "continue" and not paused.holds_computer


@pytest.mark.unit
def test_the_check_warns_when_one_account_could_fill_every_worker(settings: Any) -> None:
    settings.RAM_WORKER_CONCURRENCY, settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 4, 3
    assert check_queue_settings() == []
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 4
    assert [m.id for m in check_queue_settings()] == ["runs.W001"]
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 0
    assert [m.id for m in check_queue_settings()] == ["runs.E001"]


def test_a_page_gives_each_queued_run_its_place_in_the_queue_order(
    api: Api, runner_key: str, account: Account, computer: Computer, new_run: Callable[..., Run]
) -> None:
    """``queue_ahead`` counts in three parts (older, same time, the holder after): a page's positions
    are the computer's queue in ``QUEUE_ORDER``, with created_at ties and a queued holder created last."""
    running = new_run(account, computer)
    queue_dispatch()
    waiting = [new_run(account, computer) for _ in range(5)]
    tie = waiting[1].created_at
    Run.objects.filter(pk__in=[waiting[2].pk, waiting[3].pk]).update(created_at=tie)
    # The holder moves to the last queued run (as a takeover's continuation holds it, queued).
    Run.objects.filter(pk=running.pk).update(holds_computer=False, status=Run.Status.FAILED)
    Run.objects.filter(pk=waiting[4].pk).update(holds_computer=True)
    queued = Run.objects.filter(computer=computer, status=Run.Status.QUEUED).order_by("-holds_computer", "created_at", "id")
    expected = {str(run.id): place for place, run in enumerate(queued, start=1)}
    assert len(expected) == 5
    listed = {r["id"]: r["queue_position"] for r in api.get("/api/runs", runner_key).json()["runs"]}
    assert listed == {**expected, str(running.id): None}
    assert all(api.get(f"/api/runs/{run_id}", runner_key).json()["queue_position"] == place for run_id, place in expected.items())
