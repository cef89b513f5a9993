"""Browser tools run on the run's computer through the executor.

A run keeps its computer's agent lease from step to step while it holds the
computer (``runs.queue``), renews it before a step once half its lifetime has passed
since it was last taken or renewed and while a tool runs, and lets it go when it
releases the computer. A person's takeover makes the call fail cleanly; a run that once
held a lease never takes control back after a person released it: it pauses
and waits for an explicit continuation. Tool results are secret-free.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from computers.client import ExecutorClient, ExecutorError, HumanHasControl
from computers.models import Computer
from executor import ops
from executor.control import AGENT_LEASE_SECONDS
from executor.wire import BROWSER_LOGIN_ANSWER_RESERVE_SECONDS, BROWSER_LOGIN_SETTLE_SECONDS
from runs.contracts import DownloadOut, ToolResult
from runs.models import Run
from runs.page_words import dialog_opened_note, without_query
from runs.recordings import recording_ensure
from runs.state import run_event_append
from runs.tool_calls import ToolCall
from runs.tools import capture_context

logger = logging.getLogger(__name__)

# A renewal or release is a quick loopback call; a stuck executor is not waited for long.
RENEW_TIMEOUT_SECONDS = 5.0
# The pause's capture never holds anything up for long.
PAUSE_CAPTURE_TIMEOUT_SECONDS = 5.0
# A lease this process took or renewed less than this long ago is used without renewing it first.
LEASE_FRESH_SECONDS = AGENT_LEASE_SECONDS / 2
# How often a run that holds its computer asks again for a lease while the previous holder's ends.
LEASE_WAIT_POLL_SECONDS = 0.2

# The leases this process took or renewed: lease id -> (run id, time.monotonic() before the call).
# The executor counts the 30 s from when it answered, so this is never later than the truth.
_lease_fresh: dict[str, tuple[Any, float]] = {}
_lease_fresh_lock = threading.Lock()  # the renewing thread writes too


class NeedsPerson(Exception):
    """The computer is (or was) under human control: the run must pause."""


class StepUncertain(Exception):
    """The action reached the computer and its answer was lost (the executor died, the connection
    ended, no answer in time): whether it happened is unknown. The step is never repeated; the run
    pauses for a person to look."""


@dataclass(frozen=True)
class PageState:
    url: str
    control: str
    # The open pages (id, title, url, active): popups and new tabs show up here.
    tabs: tuple[ops.TabInfo, ...] = ()
    # The dialogs waiting for an answer (a JavaScript dialog or a site's sign-in prompt).
    dialogs: tuple[ops.DialogInfo, ...] = ()


def page_state(run: Run) -> PageState | None:
    """What the executor reports of the page now, for the agent's observation."""
    if run.computer is None:
        return None
    try:
        status = ExecutorClient(run.computer).op_status()
    except ExecutorError:
        return None
    return PageState(url=status.url, control=status.control, tabs=tuple(status.tabs), dialogs=tuple(status.dialogs))


def url_observed(url: str) -> str:
    """The page's address as the agent observes it: without its query or fragment, as the tabs'
    (they may carry a one-time token or a code that the agent needs not and must not record)."""
    return without_query(url)


def tabs_observed(tabs: tuple[ops.TabInfo, ...] | list[ops.TabInfo]) -> list[dict[str, Any]]:
    """The open tabs as the agent observes them: id, title, address without its query, active."""
    return [{"id": t.id, "title": t.title[:300], "url": url_observed(t.url), "active": t.active} for t in tabs]


def dialogs_observed(dialogs: tuple[ops.DialogInfo, ...] | list[ops.DialogInfo]) -> list[dict[str, Any]]:
    """The dialogs waiting for an answer as the agent observes them: id, tab, kind, then message and
    default_text (a JavaScript dialog) or origin and realm (a site's sign-in prompt, ``auth``)."""
    observed = []
    for d in dialogs:
        seen: dict[str, Any] = {"id": d.id, "tab": d.tab, "kind": d.kind}
        if isinstance(d, ops.AuthDialogInfo):
            seen |= {"origin": d.origin[:300], "realm": d.realm[:200]}
        else:
            seen |= {"message": d.message[:1000], "default_text": d.default_text[:1000]}
        observed.append(seen)
    return observed


def step_elapsed(step_started_at: datetime | None) -> float:
    """Seconds since the step was recorded as started (0 when unknown or in the future)."""
    if step_started_at is None:
        return 0.0
    return max(0.0, (timezone.now() - step_started_at).total_seconds())


def execute_browser_tool(
    *, run: Run, call: ToolCall, has_leased: bool, step_started_at: datetime | None = None
) -> ToolResult:
    """Run one browser tool's executor action under the run's lease; raises NeedsPerson on human control.

    A tool with an end-to-end budget (``browser_login``) counts it from the step's start
    (``step_started_at``, when the step was recorded: the moment a harness sees it start), else
    from here: the lease and the run's context come out of it, the executor gets what is left less
    ``BROWSER_LOGIN_ANSWER_RESERVE_SECONDS`` (for its answer's way back and the step's settlement),
    and every call to the executor ends ``BROWSER_LOGIN_SETTLE_SECONDS`` before the budget does.
    """
    started = time.monotonic() - step_elapsed(step_started_at)
    tool = call.spec
    action = tool.action
    if action is None:
        raise ValueError(f"{tool.name} does not drive the browser.")
    if run.computer is None:
        return ToolResult(content="The run has no computer assigned.", isError=True, category="invalid")
    arguments = call.parsed().model_dump(mode="json", exclude_none=True)
    budget = tool.budget_seconds() if tool.budget_seconds is not None else None
    deadline = started + budget - BROWSER_LOGIN_SETTLE_SECONDS if budget is not None else None
    try:
        client = ExecutorClient(run.computer, timeout=tool.timeout_seconds(), deadline=deadline)
        lease_id, checked = _lease_hold(client, run, has_leased)
        recording_ensure(run=run)
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        if tool.executor_failure is not None:
            return tool.executor_failure(exc)
        # Never an availability category: nothing may re-run a tool on its own.
        return ToolResult(content=f"The computer is not available: {exc.message}", isError=True, category="unprocessable")
    try:
        context = tool.context(run)
        if budget is not None:
            left = budget - BROWSER_LOGIN_ANSWER_RESERVE_SECONDS - (time.monotonic() - started)
            if left <= 0:
                raise ExecutorError("the time budget was spent before the call reached the computer", "timeout")
            context = {**(context or {}), "budget_seconds": left}

        def under_lease(lease_id: str) -> tuple[ops.ActionReply, list[dict[str, Any]], str | None]:
            with _renewing(run, lease_id):
                try:
                    reply = client.op_agent(lease_id, action, context, **arguments)
                except ExecutorError as exc:
                    # A tool with its own failure answer (browser_login's "may or may not") keeps it.
                    if exc.answer_lost and tool.executor_failure is None:
                        raise StepUncertain(exc.message) from None
                    raise
                downloads = [d.model_dump() for d in reply.downloads]
                # Under the run's held lease too: the computer is still this run's.
                captured = (
                    _capture(client, lease_id, run, tool.capture(call.parsed()), downloads)
                    if tool.capture is not None
                    else None
                )
            return reply, downloads, captured

        try:
            reply, downloads, captured = under_lease(lease_id)
        except ExecutorError as exc:
            if checked or exc.reason != "lease_invalid":
                raise
            # The lease was used without a renewal and the executor refused it before acting (it
            # checks the lease before anything runs): taken by a person, or lapsed. Then exactly as
            # a refused renewal: a person's release pauses the run, else a new lease and the action.
            _lease_forget(lease_id)
            lease_id, checked = _lease_hold(client, run, has_leased, trust=False)
            reply, downloads, captured = under_lease(lease_id)
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        if exc.reason in ("lease_invalid",):
            raise NeedsPerson("The agent's control of the computer was taken away.") from None
        if exc.reason == "dialog_open":
            # A dialog blocks the page and the agent did not answer it: a person answers it on the screen.
            raise NeedsPerson(exc.message) from None
        if exc.reason == "egress_refused":
            # The browser's egress policy refused the destination: a normal tool error naming it.
            return ToolResult(content=exc.message, isError=True, code="browser.egress_refused", category="unprocessable")
        if exc.reason in ("selector_value_dependent", "secret_in_arguments", "secret_field_focused"):
            # A selector that could read a secret field while the page holds one, arguments that
            # carry a secret the browser holds, a key on a focused secret field (executor/taint.py).
            return ToolResult(content=exc.message, isError=True, code=f"browser.{exc.reason}", category="invalid")
        if exc.reason in ("artifact_not_found", "binding_changed"):
            code = "artifact.not_found" if exc.reason == "artifact_not_found" else "computer.binding_changed"
            return ToolResult(content=exc.message, isError=True, code=code, category="invalid")
        if tool.executor_failure is not None:
            return tool.executor_failure(exc)
        return ToolResult(content=exc.message, isError=True, category="unprocessable")
    # The lease stays with the run until it lets go of the computer (runs.state, runs.signals).
    if isinstance(reply, ops.DialogOpenedReply):
        # The action happened and the page opened a dialog (the action's own result never came).
        where = f" The page is {without_query(reply.url)}."
        return ToolResult(content="Done." + where + dialog_opened_note(reply.dialog_opened.model_dump()))
    result = tool.result(reply)
    if captured is not None and result.artifact_id is None:
        result = result.model_copy(update={"artifact_id": captured})
    return with_downloads(result, downloads)


def with_downloads(result: ToolResult, downloads: list[dict[str, Any]]) -> ToolResult:
    """The result with the downloads the step finished, named in its content for the model too."""
    if not downloads:
        return result
    found = [DownloadOut.model_validate(d) for d in downloads]
    said = []
    for d in found:
        if d.outcome == "stored":
            said.append(f"{d.filename} stored as artifact {d.artifact_id} ({d.size} bytes, {d.content_type})")
        elif d.outcome == "refused":
            said.append(f"{d.filename} refused ({d.size} bytes, larger than this server keeps)")
        else:
            said.append(f"{d.filename} {d.outcome}")
    content = f"{result.content} Downloads: {'; '.join(said)}."
    return result.model_copy(update={"downloads": found, "content": content[:20_000]})


def _capture(
    client: ExecutorClient, lease_id: str, run: Run, typed_into: list[str], downloads: list[dict[str, Any]]
) -> str | None:
    """A masked screenshot after a step that may have navigated or typed, under the run's held lease.

    The step's own outcome never depends on it: a failed capture (a person who took control
    meanwhile included) is no artifact, and the next step finds out.
    """
    try:
        shot = _screenshot(client, lease_id, capture_context(run, typed_into))
    except ExecutorError as exc:
        logger.info("The capture after a step of run %s failed (%s).", run.id, exc.reason)
        return None
    downloads.extend(d.model_dump() for d in shot.downloads)  # finished while the capture was taken
    return shot.artifact_id


def _screenshot(client: ExecutorClient, lease_id: str, context: dict[str, Any] | None) -> ops.ScreenshotReply:
    """A masked screenshot of the page (a page that opened a dialog meanwhile gives none)."""
    shot = client.op_agent(lease_id, "screenshot", context)
    if not isinstance(shot, ops.ScreenshotReply):
        raise ExecutorError("The page opened a dialog while it was captured.", "dialog_open")
    return shot


@dataclass(frozen=True)
class PauseShot:
    """A pause's masked screenshot: its artifact, and the downloads that finished meanwhile."""

    artifact_id: str
    downloads: tuple[dict[str, Any], ...] = ()


@dataclass
class _PausePlan:
    """How the capture of a pause about to be written is taken (see ``pause_captured_ahead`` and
    ``pause_captured_after``): the shot taken ahead (or None), or, after, whether the pause was written."""

    run_id: Any
    after: bool = False
    shot: PauseShot | None = None
    written: bool = False


_pause_plan: ContextVar[_PausePlan | None] = ContextVar("ram_pause_plan", default=None)


@contextlib.contextmanager
def pause_captured_ahead(*, run_id: Any) -> Iterator[None]:
    """Take the masked screenshot of a pause about to be written, now, before its transaction; a
    ``pause_capture`` for the run inside the block uses it (or its absence) instead of asking the
    executor. The executor stores a capture through the server, which writes a row: inside the
    pause's transaction that write would wait for the transaction itself on SQLite (one writer),
    until the capture's timeout. Taken while the run still holds its computer, as always: the
    order for a pause that lets go of the computer (the queue may hand it to the next run)."""
    token = _pause_plan.set(_PausePlan(run_id, shot=_pause_shot(run_id)))
    try:
        yield
    finally:
        _pause_plan.reset(token)


@dataclass(frozen=True)
class _PauseLease:
    """The agent lease a pause's capture is taken under, held before the pause is written."""

    run_id: Any
    computer: Computer
    lease_id: str
    context: dict[str, Any]
    # Taken for the capture (the run held none): it goes once the capture is taken.
    taken: bool


@contextlib.contextmanager
def pause_captured_after(*, run_id: Any) -> Iterator[None]:
    """For a pause that keeps the computer (a takeover): the pause is written first, so the run
    shows ``waiting_for_input`` at once, and its masked screenshot is taken right after the block
    (the pause's transaction committed), then recorded (``screenshot_captured``) only if the run
    still waits at that pause.

    The capture never shows what came after the pause: it is taken under the run's agent lease,
    held (renewed, or taken for the capture) before the pause is written. A person's takeover ends
    that lease and stops the capture on the executor; the run's continuation inherits the lease, but
    then the run no longer waits and the capture is not recorded; a cancel releases it; and the
    computer stays the run's throughout (a takeover pause keeps it), so no queued run can start on
    it meanwhile. No row is locked while the executor captures. A lease taken for the capture is let
    go after it, unless a continuation inherited it meanwhile."""
    held = _pause_lease_hold(run_id)
    plan = _PausePlan(run_id, after=True)
    token = _pause_plan.set(plan)
    committed = False
    try:
        yield
        committed = True  # the block (the pause's transaction) ended without an error
    finally:
        _pause_plan.reset(token)
        if held is not None:
            _pause_capture_after(held, wanted=plan.written and committed)


def pause_capture(*, run: Run) -> str | None:
    """A masked screenshot of the page a run is pausing on, recorded in its events (``screenshot_captured``).

    Taken before the pause is written (``runs.state.run_pausing``), so while the run still holds its
    computer and before the queue can hand it to the next run (or just before the pause's
    transaction, ``pause_captured_ahead``); or, for a pause that keeps the computer, just after its
    transaction (``pause_captured_after``: then this only notes that the pause was written). Under
    the run's held lease (a short one of its own if it has none yet, or the held one lapsed). Never
    while a person holds control, never on a computer the run does not hold or that moved to another
    binding, and never waiting long for an executor that does not answer.
    """
    plan = _pause_plan.get()
    if plan is not None and plan.run_id == run.pk and plan.after:
        plan.written = True
        return None
    shot = plan.shot if plan is not None and plan.run_id == run.pk else _pause_shot(run.pk)
    if shot is None:
        return None
    _pause_shot_record(run, shot)
    return shot.artifact_id


def _pause_shot_record(run: Run, shot: PauseShot, *, screenshot: bool = True) -> None:
    if screenshot:
        run_event_append(run=run, kind="screenshot_captured", data={"artifact_id": shot.artifact_id, "trigger": "paused"})
    for download in shot.downloads:  # finished since the last step: recorded, not lost
        found = DownloadOut.model_validate(download)
        run_event_append(
            run=run, kind=f"download_{found.outcome}", data=found.model_dump(mode="json", exclude_none=True, exclude={"outcome"})
        )


def _pause_lease_hold(run_id: Any) -> _PauseLease | None:
    """The lease of a run about to pause while keeping its computer: the one it holds (trusted as
    fresh like a step's, else renewed), or one taken now and kept as the run's own, so that a
    continuation inherits it and a cancel releases it like any run's lease."""
    held = Run.objects.select_related("computer").filter(pk=run_id, holds_computer=True).first()
    if held is None or held.computer is None or not held.computer.is_active:
        return None
    if held.computer_binding != held.computer.binding:
        return None
    lease_id, taken = held.executor_lease, False
    try:
        client = ExecutorClient(held.computer, timeout=PAUSE_CAPTURE_TIMEOUT_SECONDS)
        if lease_id and not _lease_is_fresh(held, lease_id):
            try:
                _lease_renew(client, held, lease_id)
            except HumanHasControl:
                raise
            except ExecutorError as exc:
                if exc.reason != "lease_invalid":
                    raise
                _lease_forget(lease_id)
                lease_id = ""
        if not lease_id:
            at = time.monotonic()
            acquired = _lease_acquire_held(client, until=at + PAUSE_CAPTURE_TIMEOUT_SECONDS, refuse_released=True)
            if acquired is None:
                return None  # a person handed control back: only they decide what happens next
            lease_id, taken = acquired, True
            if not Run.objects.filter(pk=run_id, holds_computer=True).update(executor_lease=lease_id):
                with contextlib.suppress(ExecutorError):
                    client.lease_release(lease_id)
                return None
            _lease_fresh_mark(held, lease_id, at)
    except ExecutorError as exc:
        logger.info("The capture of pausing run %s could not hold the computer (%s).", run_id, exc.reason)
        return None
    return _PauseLease(run_id, held.computer, lease_id, capture_context(held), taken)


def _pause_capture_after(held: _PauseLease, *, wanted: bool) -> None:
    """The capture of a pause just written, recorded if the run still waits at it; then the lease
    taken for it (if any) let go. Never raises: the pause stands whatever happens here."""
    shot = None
    if wanted:
        try:
            client = ExecutorClient(held.computer, timeout=PAUSE_CAPTURE_TIMEOUT_SECONDS)
            reply = _screenshot(client, held.lease_id, held.context)
            shot = PauseShot(reply.artifact_id, tuple(d.model_dump() for d in reply.downloads))
        except ExecutorError as exc:
            logger.info("The capture of paused run %s failed (%s).", held.run_id, exc.reason)
    let_go = False
    try:
        with transaction.atomic():
            run = Run.objects.select_for_update(of=("self",)).filter(pk=held.run_id).first()
            if run is not None and shot is not None:
                # Taken before anything else happened to the run: shown only while it waits at
                # that pause (continued or cancelled meanwhile, it may show what came next).
                _pause_shot_record(run, shot, screenshot=run.status == Run.Status.WAITING_FOR_INPUT)
            if run is not None and held.taken and run.status == Run.Status.WAITING_FOR_INPUT:
                let_go = bool(Run.objects.filter(pk=run.pk, executor_lease=held.lease_id).update(executor_lease=""))
    except Exception:  # noqa: BLE001 - the pause is written; its capture is a diagnostic
        logger.exception("The capture of paused run %s could not be recorded.", held.run_id)
    if let_go:
        _lease_forget(held.lease_id)
        with contextlib.suppress(ExecutorError):
            ExecutorClient(held.computer, timeout=RENEW_TIMEOUT_SECONDS).lease_release(held.lease_id)


def _pause_shot(run_id: Any) -> PauseShot | None:
    held = Run.objects.select_related("computer").filter(pk=run_id, holds_computer=True).first()
    if held is None or held.computer is None or not held.computer.is_active:
        return None
    if held.computer_binding != held.computer.binding:
        return None
    try:
        client = ExecutorClient(held.computer, timeout=PAUSE_CAPTURE_TIMEOUT_SECONDS)
    except ExecutorError:
        return None
    own_lease = ""
    try:
        lease_id = held.executor_lease
        if lease_id:
            try:
                client.lease_renew(lease_id)
            except HumanHasControl:
                raise
            except ExecutorError as exc:
                if exc.reason != "lease_invalid":
                    raise
                lease_id = ""
        if not lease_id:
            until = time.monotonic() + PAUSE_CAPTURE_TIMEOUT_SECONDS
            acquired = _lease_acquire_held(client, until=until, refuse_released=True)
            if acquired is None:
                return None  # a person handed control back: only they decide what happens next
            lease_id = own_lease = acquired
        shot = _screenshot(client, lease_id, capture_context(held))
    except ExecutorError as exc:
        logger.info("The capture of pausing run %s failed (%s).", run_id, exc.reason)
        return None
    finally:
        if own_lease:
            with contextlib.suppress(ExecutorError):
                client.lease_release(own_lease)
    return PauseShot(shot.artifact_id, tuple(d.model_dump() for d in shot.downloads))


def _lease_hold(client: ExecutorClient, run: Run, has_leased: bool, *, trust: bool = True) -> tuple[str, bool]:
    """The run's agent lease on its computer: the one it kept since its last step, renewed, or a
    new one; and whether the executor confirmed it now (False: used as this process last renewed
    it, less than ``LEASE_FRESH_SECONDS`` ago, so the action's own lease check is the first).
    A run that once held a lease never takes control back after a person released it."""
    if run.executor_lease:
        if trust and _lease_is_fresh(run, run.executor_lease):
            return run.executor_lease, False
        try:
            _lease_renew(client, run, run.executor_lease)
            return run.executor_lease, True
        except HumanHasControl:
            raise
        except ExecutorError as exc:
            if exc.reason != "lease_invalid":
                raise
            # Expired while the agent decided (no tool runs then), or taken by a person: see below.
            _lease_forget(run.executor_lease)
    taken = time.monotonic()
    until = taken + AGENT_LEASE_SECONDS  # by then a lost release has lapsed
    if client.deadline is not None:
        until = min(until, client.deadline)
    lease_id = _lease_acquire_held(client, until=until, refuse_released=has_leased)
    if lease_id is None:
        raise NeedsPerson("A person handed control back; the run waits for an explicit continuation.")
    # Kept only while the run holds the computer: a run cancelled or paused meanwhile lets it go.
    if not Run.objects.filter(pk=run.pk, holds_computer=True).update(executor_lease=lease_id):
        with contextlib.suppress(ExecutorError):
            client.lease_release(lease_id)
        raise ExecutorError("The run no longer holds its computer.", "not_holding")
    run.executor_lease = lease_id
    _lease_fresh_mark(run, lease_id, taken)
    return lease_id, True


def _lease_acquire_held(client: ExecutorClient, *, until: float, refuse_released: bool) -> str | None:
    """A new agent lease for a run that holds its computer; None when a person handed control back
    (with ``refuse_released``: checked before each attempt, so a release meanwhile is seen too).

    The hold is exclusive in the database, so another agent lease still active on the executor is
    the previous holder's, about to end: that run let go of the computer in a transaction that
    committed, and its lease is released just after (``runs.signals``), or lapses within
    ``AGENT_LEASE_SECONDS`` if its process died meanwhile. It is waited for until ``until``
    (``time.monotonic()``), never taken over; a person's control is never waited for."""
    while True:
        if refuse_released and client.op_status().control == "released":
            return None
        try:
            return client.lease_acquire()
        except ExecutorError as exc:
            if exc.reason != "leased" or time.monotonic() + LEASE_WAIT_POLL_SECONDS >= until:
                raise
        time.sleep(LEASE_WAIT_POLL_SECONDS)


def _lease_is_fresh(run: Run, lease_id: str) -> bool:
    with _lease_fresh_lock:
        fresh = _lease_fresh.get(lease_id)
    return fresh is not None and fresh[0] == run.pk and time.monotonic() - fresh[1] < LEASE_FRESH_SECONDS


def _lease_fresh_mark(run: Run, lease_id: str, at: float) -> None:
    with _lease_fresh_lock:
        for stale in [k for k, (_, when) in _lease_fresh.items() if at - when >= AGENT_LEASE_SECONDS]:
            del _lease_fresh[stale]
        if _lease_fresh.get(lease_id, (None, 0.0))[1] <= at:
            _lease_fresh[lease_id] = (run.pk, at)


def _lease_forget(lease_id: str) -> None:
    with _lease_fresh_lock:
        _lease_fresh.pop(lease_id, None)


def _lease_renew(client: ExecutorClient, run: Run, lease_id: str) -> None:
    at = time.monotonic()
    client.lease_renew(lease_id)
    _lease_fresh_mark(run, lease_id, at)


@contextlib.contextmanager
def _renewing(run: Run, lease_id: str) -> Iterator[None]:
    """Renew the 30 s lease every ``RAM_LEASE_RENEW_SECONDS`` while a tool runs (a 120 s
    ``browser_login`` keeps it). A refused renewal stops renewing: the tool's own call reports why."""
    assert run.computer is not None  # noqa: S101 - checked by the caller
    computer = run.computer
    stop = threading.Event()
    interval = max(0.05, float(settings.RAM_LEASE_RENEW_SECONDS))

    def renew() -> None:
        client = ExecutorClient(computer, timeout=RENEW_TIMEOUT_SECONDS)
        while not stop.wait(interval):
            try:
                _lease_renew(client, run, lease_id)
            except ExecutorError:
                return

    renewer = threading.Thread(target=renew, name="ram-lease-renew", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join(timeout=RENEW_TIMEOUT_SECONDS)


def lease_release_quietly(*, computer_id: str, lease_id: str) -> None:
    """End a run's agent lease when it lets go of its computer; an unreachable executor or a lease
    already gone (expired, or taken by a person) needs nothing more."""
    computer = Computer.objects.filter(pk=computer_id).first()
    if computer is None:
        return
    try:
        ExecutorClient(computer, timeout=RENEW_TIMEOUT_SECONDS).lease_release(lease_id)
    except ExecutorError:
        logger.debug("The lease on computer %s had already ended.", computer_id)
