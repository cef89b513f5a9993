"""Bring your own agent: a harness decides, RAM runs each action with its loop's guarantees.

A run created with ``agent.type`` ``external`` takes no decision of its own.
Each ``POST /api/runs/{id}/actions`` is one tool call of the registry, and it
goes through the same step machinery as the built-in loop (``runs.loop``):

- a queued run starts if the run queue admits it now (``runs.queue``: one run
  per computer, the account's limit); otherwise the action is refused with the
  run's ``queue_position`` and nothing is charged; a step a dead worker left is settled as ``uncertain``
  (and the run pauses for a person), and the budget and credits are checked
  exactly as before a built-in decision (``continue`` and ``credits`` pauses);
- under the run's and the account's row locks, one model call is debited and
  the step is recorded as ``started`` with the action's idempotency key before
  anything touches the computer;
- the tool runs and the step is settled: a structured, secret-free result,
  ``request_*`` tools pause the run, ``finish``/``fail`` end it, a person's
  control of the computer makes the action fail cleanly and pauses the run.

The key identifies the action within the run: the same key always answers the
first action's step (``started`` while it runs, then its result) and never
runs the tool again; a lost answer never authorises a second effect. No
request waits longer than ``RAM_EXTERNAL_ACTION_WAIT_SECONDS`` (≤ 25 s): a
longer action answers 202 with its step, which the harness reads later with a
bounded long-poll (``action_wait``). Both waits hold no thread: the request
answers a ``StepWait`` that its edge awaits on the event loop
(``step_waited``, ``core.waits``), and an account holds at most
``RAM_ACCOUNT_MAX_LONG_WAITS`` of them at once over every web process; beyond
that the action is still recorded and started and answers 202 at once, and a
long-poll answers the step's current state at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone
from pydantic import ValidationError

from accounts.models import Account
from computers.client import ExecutorClient, ExecutorError
from core import waits
from core.api import validation_message
from core.json import json_bytes
from core.waits import Hop
from executor import ops
from runs import loop
from runs.browser import dialogs_observed, tabs_observed, url_observed
from runs.contracts import (
    OBSERVED_WAITING,
    ActionOut,
    ContinuePause,
    ObservationOut,
    ObservedTab,
    ToolResult,
)
from runs.errors import (
    ActionInProgress,
    ComputerDraining,
    InvalidAction,
    NotExternalRun,
    RunNotFound,
    RunNotTakingActions,
    StepNotFound,
)
from runs.loop import (
    Claimed,
    budget_pause_captured_ahead,
    run_ready,
    step_execute,
    step_record,
    step_topic,
)
from runs.models import LongWait, Run, RunStep
from runs.pauses import run_pause
from runs.queue import queue_position
from runs.selectors import continuation_id, run_latest_screenshot_id, run_required_action
from runs.state import run_event_append
from runs.step_checks import step_checked
from runs.tool_calls import ActionIn, ToolCall
from runs.tools import TOOLS

logger = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 25.0
# A long wait's slot outlives its wait by this much: then it is free even if its holder died.
SLOT_GRACE_SECONDS = 30.0


def is_external(run: Run) -> bool:
    return (run.agent_config or {}).get("type") == "external"


def _digest(call: ToolCall) -> str:
    return hashlib.sha256(json_bytes({"tool": call.tool, "arguments": call.arguments})).hexdigest()


def _tool_call(body: ActionIn) -> ToolCall:
    if body.tool not in TOOLS:
        raise InvalidAction(f"Invalid request: no tool named {body.tool!r}; the tools are {', '.join(TOOLS)}.")
    try:
        return ToolCall(tool=body.tool, arguments=body.arguments)
    except ValidationError as exc:
        raise InvalidAction(validation_message(exc).replace("Invalid request: ", f"Invalid request: {body.tool}: ")) from None


def action_out(step: RunStep, run: Run) -> ActionOut:
    """The step as the harness sees it; ``required_action`` when the run now waits for a person."""
    result = ToolResult.model_validate(step.result) if step.result is not None else None
    return ActionOut(
        step_id=step.pk,
        index=step.index,
        tool=step.tool,
        state=step.state,  # type: ignore[arg-type]
        result=result,
        run_status=run.status,  # type: ignore[arg-type]
        required_action=run_required_action(run=run),
    )


def _refusal(run: Run) -> RunNotTakingActions:
    """Why ``run`` takes no action now (it is not running)."""
    next_id = continuation_id(run)
    if next_id is not None:
        return RunNotTakingActions(
            f"The run was continued as {next_id}; send actions to that run.", continued_run_id=str(next_id)
        )
    if run.status == Run.Status.QUEUED:
        position = queue_position(run)
        return RunNotTakingActions(
            f"The run is queued for its computer (queue_position {position}): another run holds it, or the "
            "account's running runs are at their limit. Retry the action once the run is running.",
            queue_position=position,
        )
    if run.status == Run.Status.WAITING_FOR_INPUT:
        action = run_required_action(run=run)
        return RunNotTakingActions(
            "The run is waiting for input (see required_action); continue it explicitly, then act on the new run.",
            required_action=action.model_dump(mode="json") if action is not None else None,
        )
    return RunNotTakingActions(f"The run is {run.status}; it takes no more actions.")


def _existing(run: Run, key: str, digest: str) -> RunStep | None:
    step = RunStep.objects.filter(run=run, idempotency_key=key).first()
    if step is not None and step.request_digest != digest:
        raise InvalidAction("This idempotency_key was already used for a different action in this run.")
    return step


def _record(run_id: uuid.UUID, call: ToolCall, key: str, digest: str) -> tuple[RunStep, Claimed | None]:
    """Debit one model call and record the step as started (``runs.loop.step_record``, the loop's
    own); or the step this key already recorded. A refusal is raised as the harness reads it."""
    # Checked by the computer before the transaction (it waits for it): a right guess is never recorded.
    checked = step_checked(Run.objects.select_related("computer").get(pk=run_id), call)
    with budget_pause_captured_ahead(run_id=run_id):
        recorded = step_record(
            run_id=run_id,
            call=call,
            summary=checked.summary,
            refused=checked.refused,
            idempotency_key=key,
            request_digest=digest,
        )
    if isinstance(recorded, Claimed):
        return RunStep.objects.get(pk=recorded.step_id), recorded
    if isinstance(recorded, RunStep):
        if recorded.request_digest != digest:
            raise InvalidAction("This idempotency_key was already used for a different action in this run.")
        return recorded, None
    if recorded.reason == "in_flight":
        assert recorded.in_flight is not None  # noqa: S101 - set with this reason
        raise ActionInProgress(
            "Another action of this run is still running; wait for it (one action at a time).",
            step_id=recorded.in_flight.pk,
        )
    if recorded.reason == "draining":
        raise ComputerDraining()
    # Not running, or paused just now for its budget or credits.
    raise _refusal(Run.objects.select_related("account").get(pk=run_id))


def _execute_in_background(claimed: Claimed) -> None:
    """Run the step's tool and settle it in a thread of its own (settling publishes its end)."""

    def work() -> None:
        close_old_connections()
        try:
            step_execute(claimed)
        except Exception:
            # The step stays ``started``: it is never replayed, and it becomes ``uncertain`` later.
            logger.exception("An external action failed unexpectedly (run %s, step %s).", claimed.run_id, claimed.step_id)
        finally:
            connection.close()

    threading.Thread(target=work, name=f"ram-action-{claimed.step_id}", daemon=True).start()


@dataclass(frozen=True)
class StepWait:
    """A step still running that a request waits for, holding slot ``slot`` (a ``LongWait`` row)
    of its account's long waits: awaited with ``step_waited``, on the event loop."""

    step_id: int
    seconds: float
    slot: int


# An action's step as it is now: settled, or still ``started`` (REST answers 202 then, else 200).
StepAnswer = ActionOut


def run_act(*, account: Account, run_id: str | uuid.UUID, body: ActionIn) -> StepAnswer | StepWait:
    """One action of an external agent: its step (settled, or still started), or a ``StepWait``
    for a browser tool that still runs (the caller waits for it without a thread)."""
    call = _tool_call(body)
    digest = _digest(call)
    run = Run.objects.filter(pk=run_id, account=account).first()
    if run is None:
        raise RunNotFound()
    if not is_external(run):
        raise NotExternalRun()
    step = _existing(run, body.idempotency_key, digest)
    if step is None:
        # Starts a queued run, settles a dead worker's step, pauses on budget or credits.
        run_ready(run.id)
        try:
            step, claimed = _record(run.id, call, body.idempotency_key, digest)
        except IntegrityError:
            # The same key won a race meanwhile: answer its step, never run it twice.
            step, claimed = RunStep.objects.get(run_id=run.id, idempotency_key=body.idempotency_key), None
        if claimed is not None:
            if call.spec.browser:
                _execute_in_background(claimed)
                return _answer_or_wait(account, step.pk, float(settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS))
            step_execute(claimed)  # only our own state changes: quick, in this request
    return _answer(step.pk)


def _answer(step_id: int) -> StepAnswer:
    step = RunStep.objects.get(pk=step_id)
    run = Run.objects.select_related("account", "computer").get(pk=step.run_id)
    return action_out(step, run)


def _answer_or_wait(account: Account, step_id: int, seconds: float) -> StepAnswer | StepWait:
    """A wait for a step that still runs if the account has a free long-wait slot; else the answer now."""
    if seconds > 0 and _step_runs(step_id):
        slot = long_wait_take(account_id=account.pk, seconds=seconds)
        if slot is not None:
            return StepWait(step_id=step_id, seconds=seconds, slot=slot)
    return _answer(step_id)


def _step_runs(step_id: int) -> bool:
    return RunStep.objects.filter(pk=step_id, state=RunStep.State.STARTED).exists()


def action_wait(*, account: Account, run_id: str | uuid.UUID, step_id: int, wait_seconds: float) -> StepAnswer | StepWait:
    """The step of an action now, or a ``StepWait`` of up to ``wait_seconds`` (≤ 25) while it still runs."""
    step = RunStep.objects.filter(pk=step_id, run_id=run_id, run__account=account).only("pk", "state").first()
    if step is None:
        raise StepNotFound()
    seconds = min(max(wait_seconds, 0.0), MAX_WAIT_SECONDS)
    if step.state == RunStep.State.STARTED and seconds > 0:
        return _answer_or_wait(account, step.pk, seconds)
    return _answer(step.pk)


async def step_waited(wait: StepWait, hop: Hop) -> StepAnswer:
    """Wait on the event loop (no thread held) until the step ends or the wait is over; then its
    answer. The slot is given back in every case, a client that left included."""
    try:
        await waits.wait_until(
            step_topic(wait.step_id), done=lambda: not _step_runs(wait.step_id), hop=hop, seconds=wait.seconds
        )
    except BaseException:
        await hop(lambda: long_wait_release(slot=wait.slot))
        raise

    def answer() -> StepAnswer:
        long_wait_release(slot=wait.slot)
        return _answer(wait.step_id)

    result: StepAnswer = await hop(answer)
    return result


def long_wait_take(*, account_id: uuid.UUID, seconds: float) -> int | None:
    """Take a free slot of the account's ``RAM_ACCOUNT_MAX_LONG_WAITS`` for ``seconds`` (it expires a
    little after, should its holder die); None when every slot is held. The slot's unique constraint
    decides between concurrent takers of any process, with no lock."""
    now = timezone.now()
    held = set(LongWait.objects.filter(account_id=account_id, expires_at__gt=now).values_list("slot", flat=True))
    for slot in range(int(settings.RAM_ACCOUNT_MAX_LONG_WAITS)):
        if slot in held:
            continue
        try:
            with transaction.atomic():
                LongWait.objects.filter(account_id=account_id, slot=slot, expires_at__lte=now).delete()
                row = LongWait.objects.create(
                    account_id=account_id, slot=slot, expires_at=now + timedelta(seconds=seconds + SLOT_GRACE_SECONDS)
                )
        except IntegrityError:
            continue  # taken meanwhile by another request
        return int(row.pk)
    return None


def long_wait_release(*, slot: int) -> None:
    LongWait.objects.filter(pk=slot).delete()


def run_observe(*, run: Run) -> ObservationOut:
    """What the page shows now, read without a lease and without taking a screenshot (the id of the
    run's latest masked one, if any); secret-free."""
    page = ops.ObserveReply(url="", title="", text="", truncated=False, control="unavailable", tabs=[], dialogs=[])
    if run.computer is not None and run.computer.is_active and run.computer.account_id == run.account_id:
        try:
            page = ExecutorClient(run.computer).op_observe(settings.RAM_OBSERVATION_MAX_CHARS)
        except ExecutorError:
            logger.info("The computer of run %s could not be observed.", run.id)
    return ObservationOut(
        run_id=run.id,
        run_status=run.status,  # type: ignore[arg-type]
        url=url_observed(page.url),
        title=page.title,
        text=page.text,
        truncated=page.truncated,
        control=page.control,
        screenshot_artifact_id=run_latest_screenshot_id(run=run),
        tabs=[ObservedTab.model_validate(t) for t in tabs_observed(page.tabs)],
        dialogs=[OBSERVED_WAITING.validate_python(d) for d in dialogs_observed(page.dialogs)],
    )


def external_runs_idle_pause() -> int:
    """Pause external runs that received no action for ``RAM_EXTERNAL_IDLE_SECONDS`` (kind continue).

    A step a dead process left is settled first (``uncertain``, as in the loop); a run
    whose action still runs is not idle.
    """
    cutoff = loop.CLOCK.wall() - timedelta(seconds=settings.RAM_EXTERNAL_IDLE_SECONDS)
    # A queued run waits for its computer, not for its harness: only a running run can be idle.
    idle = Run.objects.filter(
        status=Run.Status.RUNNING, agent_config__type="external", updated_at__lt=cutoff
    ).values_list("id", flat=True)
    paused = 0
    for run_id in list(idle):
        with transaction.atomic():
            run = Run.objects.select_for_update(of=("self",)).filter(pk=run_id).first()
            if run is None or run.status != Run.Status.RUNNING or run.updated_at >= cutoff:
                continue
            running = RunStep.objects.filter(run=run, state=RunStep.State.STARTED).first()
            if running is not None:
                stale = loop.CLOCK.wall() - running.started_at >= timedelta(seconds=settings.RAM_STEP_MAX_SECONDS)
                if not stale:
                    continue
        if running is not None:
            run_ready(run_id)  # marks the dead step uncertain and pauses for a person
            continue
        with transaction.atomic():
            run = Run.objects.select_for_update(of=("self",)).get(pk=run_id)
            if run.status != Run.Status.RUNNING or run.updated_at >= cutoff:
                continue
            run_event_append(run=run, kind="run_idle", data={"idle_seconds": settings.RAM_EXTERNAL_IDLE_SECONDS})
            run_pause(run=run, pause=ContinuePause(kind="continue", reason="idle_timeout"))
            paused += 1
    return paused
