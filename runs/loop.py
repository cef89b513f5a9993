"""The run loop: one agent decision (one model call) per step.

A step has three phases:

1. *Claim*: check the budget and credits (run row locked), ask the agent for
   its decision with no lock held, then (run and account rows locked, nothing
   changed meanwhile) debit the model call's microcredits and record the step
   as ``started`` before anything touches the outside world.
2. *Act* (no transaction): execute a browser tool on the computer.
3. *Settle* (one transaction): mark the step ``succeeded`` (or ``failed``: the
   tool's result is an error) and apply what the
   tool means for the run — continue, pause, finish or fail. Tools that only
   change our own state (requests for a person, finish, fail) run here, so
   they are atomic with the step.

One task takes the run's steps for a time slice (``run_slice``): its calls to the executor
share one connection, and a step's settle also checks, under the same lock, that the next
step may be taken (what ``run_ready`` checks before a slice's first step), so a step costs
two transactions.

A worker killed during phase 2 leaves a ``started`` step behind. The next
delivery of the task never repeats it: once the step is older than
``RAM_STEP_MAX_SECONDS`` it is marked ``uncertain`` and the run pauses for a
person (a lost answer never authorises replaying an external effect). An action whose answer
is lost in phase 2 (the executor died or the connection ended after the call was sent, or no
answer came in time) is settled the same way at once: ``uncertain``, and the run pauses.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, Q
from django.utils import timezone

from accounts.models import Account
from computers.client import executor_connections_kept
from computers.selectors import computer_is_draining
from core import waits
from core.clock import SYSTEM_CLOCK, Clock
from core.metrics import STEP_DURATION
from runs import services
from runs.agents import Decision, Observation, agent_for, state_withheld
from runs.browser import (
    NeedsPerson,
    StepUncertain,
    dialogs_observed,
    execute_browser_tool,
    page_state,
    pause_captured_after,
    pause_captured_ahead,
    tabs_observed,
    url_observed,
)
from runs.contracts import ContinuePause, CreditsPause, TakeoverPause, ToolResult
from runs.models import Run, RunStep
from runs.pauses import pause_kind
from runs.queue import queue_dispatch
from runs.run_tools import Fail, Finish, Pause
from runs.selectors import task_redacted
from runs.step_checks import step_checked
from runs.tool_calls import ToolCall

logger = logging.getLogger(__name__)

# A slice's deadline, a step's age and an external run's idle time (runs/external.py) are decided on
# this clock (tests move a ManualClock).
CLOCK: Clock = SYSTEM_CLOCK


@dataclass(frozen=True)
class Claimed:
    run_id: uuid.UUID
    step_id: int
    call: ToolCall
    has_leased: bool
    # The agent's rule: a tool error ends the run failed (a scripted step without on_error "continue").
    stop_on_error: bool = False
    # When the step was recorded as started: an end-to-end budget (browser_login's) counts from here.
    started_at: datetime | None = None
    # A tool that does not drive the browser refused before it ran (``step_checked``): its answer.
    refused: ToolResult | None = None


def run_slice(*, run_id: uuid.UUID) -> bool:
    """Advance the run step after step for one time slice (``RAM_RUN_SLICE_SECONDS``); True when
    it should go on (in a new task, at the back of the line, so other runs get their turn).

    Each step keeps its three phases and their guarantees; what the slice saves is the broker
    round trip between two steps of the same run, a connection to the executor per call (one is
    kept for the slice), and a transaction per step (each settle checks the next step may follow).
    The run holds its computer and its lease throughout.
    """
    deadline = CLOCK.monotonic() + settings.RAM_RUN_SLICE_SECONDS
    with executor_connections_kept():
        going_on = run_ready(run_id)
        while going_on:
            going_on = _step(run_id)
            if going_on and CLOCK.monotonic() >= deadline:
                return True
    return False


def run_step_advance(*, run_id: uuid.UUID) -> bool:
    """Advance the run by one step; True when another step should follow."""
    return run_ready(run_id) and _step(run_id)


def _step(run_id: uuid.UUID) -> bool:
    """One step of a run found ready (``run_ready``, or the previous step's settle)."""
    claimed = _decide_and_record(run_id)
    if claimed is None:
        return False
    return step_execute(claimed, check_next=True)


def step_execute(claimed: Claimed, *, check_next: bool = False) -> bool:
    """Phases 2 and 3 of a recorded step: act on the computer, then settle; True when the run goes on
    (with ``check_next``, the loop's: and the next step's checks passed, see ``_may_step``)."""
    started = time.perf_counter()
    try:
        result = _act(claimed)
    except NeedsPerson as exc:
        _measure(claimed, started, "needs_person")
        failed = ToolResult(content=str(exc), isError=True, code="computer.human_control", category="unprocessable")
        return _settle(claimed, result=failed, needs_person=True, check_next=check_next)
    except StepUncertain:
        _measure(claimed, started, "uncertain")
        _settle_uncertain(claimed)
        return False
    _measure(claimed, started, (result.code or ("failed" if result.isError else "logged_in")) if result else "")
    return _settle(claimed, result=result, needs_person=False, check_next=check_next)


def step_topic(step_id: int) -> str:
    """What the requests waiting for a step wait on (``core.waits``)."""
    return f"ram.step.{step_id}"


def step_ended_on_commit(run: Run, step_id: int) -> None:
    """Wake the requests waiting for this step once the transaction that settled it commits (only an
    external run's steps have waiters: its harness's action and long-polls)."""
    if (run.agent_config or {}).get("type") == "external":
        transaction.on_commit(lambda: waits.publish(step_topic(step_id)))


def _measure(claimed: Claimed, started: float, code: str) -> None:
    """Step duration by tool; outcomes by code for a tool that counts them (``Tool.outcomes``)."""
    STEP_DURATION.labels(tool=claimed.call.tool).observe(time.perf_counter() - started)
    if claimed.call.spec.outcomes is not None:
        claimed.call.spec.outcomes.labels(code=code).inc()


def _claim(run_id: uuid.UUID) -> Claimed | None:
    """Check the run can take a step, ask the agent (no lock held), then record the step."""
    if not run_ready(run_id):
        return None
    return _decide_and_record(run_id)


def _decide_and_record(run_id: uuid.UUID) -> Claimed | None:
    """Ask the agent (no lock held), then record the step; the run was found ready just before."""
    before = Run.objects.select_related("computer").get(pk=run_id)
    if (before.agent_config or {}).get("type") == "external":
        return None  # the harness decides: its actions arrive through runs.external
    agent = agent_for(before.agent_config or {})
    # The executor and the agent (a model call) are asked while no row is locked; the page only
    # for an agent that reads it (the scripted agent plays its steps whatever the page shows).
    page = page_state(before) if before.computer_id and agent.observes_page else None
    state = dict(before.agent_state or {})
    observation = Observation(
        step=before.step_count,
        page=(
            {
                "url": url_observed(page.url),
                "control": page.control,
                "tabs": tabs_observed(page.tabs),
                "dialogs": dialogs_observed(page.dialogs),
            }
            if page
            else {}
        ),
        last_result=state.get("last_result"),
    )
    decision = agent.decide(task=before.task, state=state, observation=observation)
    return _record(before, decision)


def run_ready(run_id: uuid.UUID) -> bool:
    """Start a queued run if the queue admits it now, settle a step a dead worker left,
    check budget and credits."""
    if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).exists():
        # Taken before the run's row lock: the queue's lock always comes first.
        queue_dispatch(current=run_id)
    with budget_pause_captured_ahead(run_id=run_id), transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).filter(pk=run_id).first()
        if run is None or run.status != Run.Status.RUNNING:
            return False  # finished, paused, or still queued: it gets a task when admitted
        return _may_step(run, Account.objects.get(pk=run.account_id), unfinished_checked=False)


def budget_pause_captured_ahead(
    *, run_id: uuid.UUID, settling: int | None = None
) -> contextlib.AbstractContextManager[None]:
    """Around a transaction in which ``can_pay`` may pause the run (``run_ready``'s, or the settle
    of step ``settling`` that checks the next step): when a read without locks says the run is out
    of model calls or credits, the pause's capture is taken now, before the transaction
    (``pause_captured_ahead``), while the run still holds its computer. Inside it, the executor's
    upload of the capture would wait for the transaction's own write lock on SQLite (one writer)
    until the capture's timeout, and the run's row would stay locked meanwhile. Not while another
    step is started (another worker's, in flight): then ``_may_step`` never reaches ``can_pay``,
    and a capture now would only show that step's page half done."""
    in_flight = RunStep.objects.filter(run_id=run_id, state=RunStep.State.STARTED)
    if settling is not None:
        in_flight = in_flight.exclude(pk=settling)
    short = (
        Run.objects.filter(pk=run_id)
        .filter(
            Q(model_calls__gte=F("max_model_calls"))
            | Q(account__microcredit_balance__lt=F("microcredits_per_model_call"))
        )
        .filter(~Exists(in_flight))
        .exists()
    )
    return pause_captured_ahead(run_id=run_id) if short else contextlib.nullcontext()


def _may_step(run: Run, account: Account, *, unfinished_checked: bool) -> bool:
    """Whether a running run (row locked) may take a step now; pauses, finishes or fails it when
    it may not go on. ``unfinished_checked``: the caller knows no step is left started."""
    if computer_is_draining(run.computer_id):
        return False  # the executor restarts soon; the sweep resumes the run after
    if not account.is_active:
        services.run_finish(run=run, error="The account is inactive.")
        return False
    # Every step re-checks the run's binding (account, computer, computer binding).
    if services.run_fail_if_unbound(run=run):
        return False
    if not unfinished_checked:
        unfinished = RunStep.objects.filter(run=run, state=RunStep.State.STARTED).first()
        if unfinished is not None:
            if CLOCK.wall() - unfinished.started_at < timedelta(seconds=settings.RAM_STEP_MAX_SECONDS):
                return False  # another worker may still be acting on it
            _mark_uncertain(run, unfinished)
            return False
    return can_pay(run, account)


def _mark_uncertain(run: Run, step: RunStep) -> None:
    """In the caller's transaction, rows locked: the step is ``uncertain`` (never replayed, no result)
    and the running run pauses for a person to look at the computer."""
    step.state = RunStep.State.UNCERTAIN
    step.finished_at = timezone.now()
    step.save(update_fields=["state", "finished_at"])
    step_ended_on_commit(run, step.pk)
    services.run_event_append(run=run, kind="step_uncertain", data={"index": step.index, "tool": step.tool})
    if run.status == Run.Status.RUNNING:
        services.run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="other"))


def _settle_uncertain(claimed: Claimed) -> None:
    """The action reached the computer and its answer was lost: the step is uncertain and the run
    pauses, as for a step a dead worker left (never a replay)."""
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=claimed.run_id)
        step = RunStep.objects.select_for_update().get(pk=claimed.step_id)
        if step.state == RunStep.State.STARTED:  # not settled elsewhere meanwhile
            _mark_uncertain(run, step)


def can_pay(run: Run, account: Account) -> bool:
    """Budget and credits for one more model call; pauses the run when either is short."""
    if run.model_calls >= run.max_model_calls:
        services.run_pause(run=run, pause=ContinuePause(kind="continue", reason="max_model_calls_reached"))
        return False
    price = run.microcredits_per_model_call
    if account.microcredit_balance < price:
        services.run_pause(
            run=run,
            pause=CreditsPause(
                kind="credits",
                reason="insufficient_credits",
                required_microcredits=price,
                available_microcredits=account.microcredit_balance,
            ),
        )
        return False
    return True


def _record(before: Run, decision: Decision) -> Claimed | None:
    """Debit the model call and record the agent's step as started, if nothing changed meanwhile
    (else the decision is dropped: cancelled, paused, advanced by another worker, drained, a step
    still in flight, or short of budget or credits)."""
    checked = step_checked(before, decision.call)
    # The agent's own record of its call (a model's history) keeps what the step keeps: withheld too.
    state = state_withheld(decision.state) if checked.summary.get("withheld") else decision.state
    recorded = step_record(
        run_id=before.pk,
        call=decision.call,
        summary=checked.summary,
        refused=checked.refused,
        step_count=before.step_count,
        agent_state=state,
        stop_on_error=decision.stop_on_error,
    )
    return recorded if isinstance(recorded, Claimed) else None


@dataclass(frozen=True)
class StepRefused:
    """Why ``step_record`` recorded no step; nothing was charged. ``in_flight``: the step still started."""

    reason: Literal["not_running", "moved_on", "draining", "in_flight", "cannot_pay"]
    in_flight: RunStep | None = None


def step_record(
    *,
    run_id: uuid.UUID,
    call: ToolCall,
    summary: dict[str, Any],
    refused: ToolResult | None = None,
    step_count: int | None = None,
    agent_state: dict[str, Any] | None = None,
    stop_on_error: bool = False,
    idempotency_key: str = "",
    request_digest: str = "",
) -> Claimed | RunStep | StepRefused:
    """Phase 1 of a step, for the built-in loop and external runs alike: under the run's and the
    account's row locks, debit one model call and record the step as ``started`` (its
    ``step_started`` event with it) before anything touches the computer.

    Refused, with nothing charged, when the run is not running, has taken another step since the
    decision (``step_count``, the loop's), its computer is draining for a restart, another step is
    still in flight (one at a time), or budget or credits are short (``can_pay`` pauses the run).
    With an ``idempotency_key`` (an external action's), the step that key already recorded is
    answered instead, whatever the run's state: a key never runs its tool twice.

    ``agent_state`` is the agent's new state (the loop's decision; the run keeps its own
    otherwise); a scripted step's private fields are emptied from the task as its step is recorded
    (``cursor`` in that state). ``summary`` was checked by the computer before (``step_checked``), and
    ``refused`` is what that check answers instead of running the tool (nothing is done).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).filter(pk=run_id).first()
        if run is None:
            return StepRefused("not_running")
        if idempotency_key:
            existing = RunStep.objects.filter(run=run, idempotency_key=idempotency_key).first()
            if existing is not None:
                return existing
        if run.status != Run.Status.RUNNING:
            return StepRefused("not_running")
        if step_count is not None and run.step_count != step_count:
            return StepRefused("moved_on")  # advanced by another worker meanwhile
        if computer_is_draining(run.computer_id):
            return StepRefused("draining")  # the executor restarts soon; the run resumes after
        running = RunStep.objects.filter(run=run, state=RunStep.State.STARTED).first()
        if running is not None:
            return StepRefused("in_flight", in_flight=running)
        account = Account.objects.select_for_update().get(pk=run.account_id)
        if not can_pay(run, account):
            return StepRefused("cannot_pay")
        price = run.microcredits_per_model_call
        Account.objects.filter(pk=account.pk).update(microcredit_balance=F("microcredit_balance") - price)
        state = dict(run.agent_state or {})
        step = RunStep.objects.create(
            run=run,
            index=run.step_count,
            tool=call.tool,
            summary=summary,
            idempotency_key=idempotency_key,
            request_digest=request_digest,
        )
        has_leased = bool(state.get("has_leased"))
        new_state = state if agent_state is None else {**agent_state, "last_result": state.get("last_result")}
        if has_leased or call.spec.browser:
            new_state["has_leased"] = True
        changes: dict[str, Any] = {}
        cursor = (agent_state or {}).get("cursor")
        if call.spec.private and isinstance(cursor, int):
            # A scripted step's private fields exist until its step runs: from now on only the call holds them.
            changes["task"] = task_redacted(run.task, upto=cursor)
        Run.objects.filter(pk=run.pk).update(
            model_calls=F("model_calls") + 1,
            step_count=F("step_count") + 1,
            agent_state=new_state,
            updated_at=timezone.now(),
            **changes,
        )
        external = {"external": True} if idempotency_key else {}
        services.run_event_append(
            run=run, kind="step_started", data={"index": step.index, "microcredits": str(price), **external, **summary}
        )
    return Claimed(
        run_id=run.id,
        step_id=step.pk,
        call=call,
        has_leased=has_leased,
        stop_on_error=stop_on_error,
        started_at=step.started_at,
        refused=refused,
    )


def _act(claimed: Claimed) -> ToolResult | None:
    if claimed.refused is not None:
        return claimed.refused
    if not claimed.call.spec.browser:
        return None
    run = Run.objects.select_related("computer").get(pk=claimed.run_id)
    return execute_browser_tool(
        run=run, call=claimed.call, has_leased=claimed.has_leased, step_started_at=claimed.started_at
    )


def _settle(claimed: Claimed, *, result: ToolResult | None, needs_person: bool, check_next: bool) -> bool:
    call = claimed.call
    # A refused call does nothing to the run: it never finishes, fails or pauses it.
    outcome = call.spec.outcome_of(call.parsed()) if claimed.refused is None else None
    failed = result is not None and result.isError
    # A pause's screenshot is taken before the transaction that writes the pause, or, for a pause
    # that keeps the computer, right after it (runs.browser): the pause is visible at once.
    capture: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if needs_person or (isinstance(outcome, Pause) and pause_kind(outcome.kind).keeps_computer):
        capture = pause_captured_after(run_id=claimed.run_id)
    elif isinstance(outcome, Pause):
        capture = pause_captured_ahead(run_id=claimed.run_id)
    elif check_next and not isinstance(outcome, Finish | Fail) and not (claimed.stop_on_error and failed):
        # The next step's checks (at the end) may pause the run for its budget or credits.
        capture = budget_pause_captured_ahead(run_id=claimed.run_id, settling=claimed.step_id)
    with capture, transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("account").get(pk=claimed.run_id)
        step = RunStep.objects.select_for_update().get(pk=claimed.step_id)
        if step.state != RunStep.State.STARTED:
            return False  # settled elsewhere (marked uncertain): never apply twice
        step.state = RunStep.State.FAILED if result is not None and result.isError else RunStep.State.SUCCEEDED
        step.finished_at = timezone.now()
        step.summary = {**step.summary, "isError": bool(result and result.isError)}
        step.result = result.model_dump(exclude_none=True) if result is not None else None
        step.save(update_fields=["state", "finished_at", "summary", "result"])
        step_ended_on_commit(run, step.pk)
        if run.status != Run.Status.RUNNING:
            return False  # cancelled while the tool ran
        state = dict(run.agent_state or {})
        if result is not None:
            state["last_result"] = result.model_dump(exclude_none=True)
            run.agent_state = state
            run.save(update_fields=["agent_state", "updated_at"])
            services.run_event_append(
                run=run,
                kind="step_completed",
                data={
                    "index": step.index,
                    "isError": result.isError,
                    **({"code": result.code} if result.code else {}),
                    **({"artifact_id": result.artifact_id} if result.artifact_id else {}),
                },
            )
            for download in result.downloads or ():
                # download_stored, download_refused, download_cancelled, download_failed
                services.run_event_append(
                    run=run,
                    kind=f"download_{download.outcome}",
                    data={"index": step.index, **download.model_dump(mode="json", exclude_none=True, exclude={"outcome"})},
                )
        else:
            services.run_event_append(run=run, kind="step_completed", data={"index": step.index, "isError": False})
        if call.spec.settled is not None and result is not None and not result.isError:
            call.spec.settled(run, call.arguments)
        if needs_person:
            services.run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="other"))
            return False
        if claimed.stop_on_error and result is not None and result.isError:
            services.run_fail_tool_error(run=run, step_index=step.index, tool=call.tool, result=result)
            return False
        if isinstance(outcome, Finish):
            services.run_finish(run=run, output=outcome.output)
            return False
        if isinstance(outcome, Fail):
            services.run_finish(run=run, error=outcome.error)
            return False
        if isinstance(outcome, Pause):
            note = pause_kind(outcome.kind).request(run=run, step=step, arguments=outcome.arguments)
            if note is not None:
                _note(run, step, note)
            return False
        if not check_next:
            return True  # an external run's next action brings its own checks (runs.external)
        # The next step's checks, under this lock: this step is settled and ``_record`` refuses a
        # step while another one is started.
        return _may_step(run, run.account, unfinished_checked=True)


def _note(run: Run, step: RunStep, content: str) -> None:
    """Record what a tool that changed only our own state tells the agent (seen after continuing)."""
    result = ToolResult(content=content).model_dump(exclude_none=True)
    step.result = result
    step.save(update_fields=["result"])
    Run.objects.filter(pk=run.pk).update(agent_state={**(run.agent_state or {}), "last_result": result})


def runs_resume_stalled() -> list[uuid.UUID]:
    """Running runs whose next step was never enqueued (a lost message or a dead worker).
    Queued runs wait in the database: ``runs.queue.queue_dispatch`` starts them."""
    cutoff = CLOCK.wall() - timedelta(seconds=settings.RAM_STEP_MAX_SECONDS)
    stalled = Run.objects.filter(status=Run.Status.RUNNING, updated_at__lt=cutoff).exclude(
        agent_config__type="external"
    )
    return list(stalled.values_list("id", flat=True))
