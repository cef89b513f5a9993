"""The low-level writes of a run's own state: its append-only, secret-free
event log and its validated result (pause, success, failure, cancel).

Services, the run loop and the pause kinds (``runs/pauses/``) all write
through here; the transitions that check who may do what stay in services.
A pause is written through its kind's record (``runs.pauses.run_pause``),
which says whether the run keeps its computer: nothing here names a kind.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from core.metrics import RUN_PAUSES, RUNS_FINISHED
from runs.contracts import RUN_RESULT, NeedsInputResult, Pause, ToolResult
from runs.models import Run, RunEvent

# Sent after commit when a run pauses: ``run_id`` and ``kind`` (people are told, see notifications).
run_paused = Signal()
# Sent before a pause is written, while the run still holds its computer (``run``): its page is
# captured then, before the pause can release the computer to the next run in the queue (``runs.signals``).
run_pausing = Signal()
# Sent after commit when a run lets go of its computer (``run_id``, ``computer_id``, ``executor_lease``):
# the lease is released on the executor and the run queue moves (``runs.signals``).
computer_released = Signal()
# Sent inside the transaction that appends a run event, with ``event``: what must commit with
# the event itself (the webhook outbox) listens here.
run_event_appended = Signal()

_SECRET_WORDS = ("password", "secret", "token", "invite", "ticket", "authorization", "api_key", "totp")


def _assert_secret_free(data: Any, path: str = "") -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if any(word in str(key).lower() for word in _SECRET_WORDS):
                raise ValueError(f"Run events are secret-free; refusing field {path}{key!r}.")
            _assert_secret_free(value, f"{path}{key}.")
    elif isinstance(data, list):
        for item in data:
            _assert_secret_free(item, path)


def run_event_append(*, run: Run, kind: str, data: dict[str, Any] | None = None) -> RunEvent:
    """Append one secret-free event to the run's log."""
    payload = data or {}
    _assert_secret_free(payload)
    with transaction.atomic(savepoint=False):
        event = RunEvent.objects.create(run=run, kind=kind, data=payload)
        run_event_appended.send(sender=RunEvent, event=event)
    return event


def run_mark_continued(*, run: Run, continuation: Run) -> Run:
    """End a paused run (locked by the caller) as ``continued``: its continuation goes on.

    The result keeps the pause that was answered; ``required_action`` is gone.
    """
    run.status = Run.Status.CONTINUED
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at", "updated_at"])
    run_event_append(run=run, kind="run_continued", data={"continued_run_id": str(continuation.id)})
    transaction.on_commit(lambda: RUNS_FINISHED.labels(status=Run.Status.CONTINUED).inc())
    return run


def run_result_set(run: Run, result: Any, status: str, *, keeps_computer: bool = False) -> None:
    """Validate and store the run's result and status; a run that is no longer running lets go of
    its computer unless it waits on a pause that keeps it (``keeps_computer``, its kind's)."""
    validated = RUN_RESULT.validate_python(result)
    # Exactly the fields given (an optional field left out stays out of the stored result).
    run.result = validated.model_dump(mode="json", exclude_unset=True)
    run.status = status
    run.pause_kind = validated.pause.kind if isinstance(validated, NeedsInputResult) else ""
    if status in Run.TERMINAL:
        run.finished_at = timezone.now()
    run.save(update_fields=["result", "status", "pause_kind", "finished_at", "updated_at"])
    keeps = status == Run.Status.RUNNING or (status == Run.Status.WAITING_FOR_INPUT and keeps_computer)
    if not keeps:
        _computer_release(run)
    if status in Run.TERMINAL:
        transaction.on_commit(lambda: RUNS_FINISHED.labels(status=status).inc())


def _computer_release(run: Run) -> None:
    """Let go of the computer if the run holds it (read from the row, whatever the instance says);
    after commit its agent lease ends and the queue moves."""
    lease = Run.objects.filter(pk=run.pk, holds_computer=True).values_list("executor_lease", flat=True).first()
    run.holds_computer, run.executor_lease = False, ""
    if lease is None:
        return
    Run.objects.filter(pk=run.pk).update(holds_computer=False, executor_lease="")
    run_id, computer_id = run.id, run.computer_id

    def released() -> None:
        computer_released.send(sender=Run, run_id=run_id, computer_id=computer_id, executor_lease=lease)

    transaction.on_commit(released)


def run_computer_let_go(*, run: Run) -> None:
    """A paused run lets go of its computer although its pause is a takeover (the demo's
    takeover, whose screen holds nothing to come back to): runs queued for the computer start,
    and the run's continuation queues like any other."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.WAITING_FOR_INPUT:
            _computer_release(run)


def run_pause_write(*, run: Run, pause: Pause, keeps_computer: bool) -> Run:
    """Persist a validated pause; the run waits for an explicit continuation. Its kind's record
    says whether it keeps its computer (``PauseKind.pause``; callers use ``runs.pauses.run_pause``)."""
    run_pausing.send(sender=Run, run=run)
    with transaction.atomic():
        run_result_set(
            run,
            {"outcome": "needs_input", "pause": pause.model_dump(mode="json")},
            Run.Status.WAITING_FOR_INPUT,
            keeps_computer=keeps_computer,
        )
        run_event_append(run=run, kind="run_paused", data={"kind": pause.kind, "reason": pause.reason})
        run_id, kind = run.id, pause.kind

        def paused() -> None:
            RUN_PAUSES.labels(kind=kind).inc()
            run_paused.send(sender=Run, run_id=run_id, kind=kind)

        transaction.on_commit(paused)
    return run


def run_finish(*, run: Run, output: Any = None, error: str | None = None) -> Run:
    with transaction.atomic():
        if error is None:
            run_result_set(run, {"outcome": "succeeded", "output": output}, Run.Status.SUCCEEDED)
            run_event_append(run=run, kind="run_succeeded")
        else:
            run_result_set(run, {"outcome": "failed", "error": error}, Run.Status.FAILED)
            run_event_append(run=run, kind="run_failed")
    return run




def run_fail_tool_error(*, run: Run, step_index: int, tool: str, result: ToolResult) -> Run:
    """End the run ``failed`` with a tool's error: its message, code and category, and the step."""
    label = ", ".join(part for part in (result.code, result.category) if part)
    error = f"Step {step_index + 1} ({tool}) failed" + (f" [{label}]" if label else "") + f": {result.content}"
    failed: dict[str, Any] = {"outcome": "failed", "error": error[:2000], "step": step_index, "tool": tool}
    if result.code:
        failed["code"] = result.code
    if result.category:
        failed["category"] = result.category
    with transaction.atomic():
        run_result_set(run, failed, Run.Status.FAILED)
        run_event_append(
            run=run,
            kind="run_failed",
            data={"step": step_index, "tool": tool, **({"code": result.code} if result.code else {})},
        )
    return run
