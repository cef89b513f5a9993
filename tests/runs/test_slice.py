"""One task of the run loop takes several steps of a run, within its time slice, on a real
executor: each step is still recorded before its tool runs and settled after, and a slice
that ends hands the run back to the broker instead of keeping the worker."""

from __future__ import annotations

import json
from typing import Any

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run, RunEvent
from runs.services import run_create
from tests.support.screen import reset_executor


def _run(account: Account, steps: int) -> Run:
    account_top_up(account=account, microcredits=100_000, actor="test")
    return run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "read", "steps": [{"tool": "extract_text", "arguments": {"selector": "#t"}}] * steps},
        max_model_calls=20,
        microcredits_per_model_call=1,
    )


def test_one_slice_takes_every_step_of_a_short_run(screen: Any, account: Account, settings: Any) -> None:
    settings.RAM_RUN_SLICE_SECONDS = 60
    reset_executor(screen, "<title>Slice</title><p id=t>sliced</p>")
    run = _run(account, 5)
    assert loop.run_slice(run_id=run.id) is False, "nothing left for another task"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": "sliced"}
    kinds = list(RunEvent.objects.filter(run=run, kind__startswith="step_").values_list("kind", flat=True))
    assert kinds == ["step_started", "step_completed"] * 6, "each step recorded, then settled, one after the other"


def test_a_slice_that_ends_hands_the_run_back(screen: Any, account: Account, settings: Any) -> None:
    settings.RAM_RUN_SLICE_SECONDS = 0
    reset_executor(screen, "<title>Slice</title><p id=t>sliced</p>")
    run = _run(account, 5)
    assert loop.run_slice(run_id=run.id) is True, "the run goes on in a new task"
    run.refresh_from_db()
    assert (run.status, run.step_count) == ("running", 1)


def test_a_slice_keeps_one_connection_and_asks_the_executor_only_for_the_steps(
    screen: Any, account: Account, settings: Any, monkeypatch: Any
) -> None:
    """Within a slice, one connection to the executor (one greeting), no page observation for the
    scripted agent (it never reads it), the lease taken once and not renewed while it is fresh."""
    settings.RAM_RUN_SLICE_SECONDS = 60
    reset_executor(screen, "<title>Slice</title><p id=t>sliced</p>")
    ops: list[str] = []
    serve = screen.rpc.serve_request

    async def recording(peer: Any, message: str) -> None:
        ops.append(json.loads(message)["op"])
        await serve(peer, message)

    monkeypatch.setattr(screen.rpc, "serve_request", recording)
    run = _run(account, 5)
    assert loop.run_slice(run_id=run.id) is False
    run.refresh_from_db()
    assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": "sliced"}
    # The release follows the run's end, and so does the end of its recording.
    during = [op for op in ops if op not in ("lease_release", "recording_stop")]
    # Before a step is recorded, its strings are checked for a secret the browser holds
    # (``arguments_check``, at most once per step, the closing finish's output too): it takes no
    # lease and opens no connection.
    assert during.count("arguments_check") <= 6, ops
    # Its recording starts with its first browser step (``runs/recordings.py``), once.
    assert [op for op in during if op != "arguments_check"] == ["hello", "lease_acquire", "recording_start"] + [
        "agent"
    ] * 5, ops
    assert ops.count("hello") == 1, "one connection for the whole slice"
