"""Reads behind the person's pages: the home page (what waits for a person, then
recent runs) and the task page (the task's own words, what it needs, its last
steps and latest masked screenshot). Server data only; nothing here changes state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max, Q

from accounts.models import Account
from computers.models import DiagnosticArtifact
from computers.recordings import recording_of_run, recording_segments
from core.errors import DomainError
from runs.errors import ScreenshotNotFound
from runs.models import Run, RunEvent, RunStep
from runs.pauses import PAUSE_KINDS, Unavailable, pause_kind
from runs.selectors import (
    continuation_id,
    current_pause,
    intervention_current,
    label_from_task,
    run_latest_screenshot_id,
)

# Pause kinds a person resolves on a task page (each kind's record has its descriptor kind and words).
_ON_A_PAGE = [name for name, kind in PAUSE_KINDS.items() if kind.descriptor_kind]

# How much of the task's goal a page quotes (the rest is cut with an ellipsis).
GOAL_MAX_CHARS = 500

STATUS_WORDS = {
    "queued": "Queued",
    "running": "Running",
    "waiting_for_input": "Waiting",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "continued": "Continued",
}


def goal_of(run: Run) -> str:
    """The task's goal as the harness wrote it, cut to ``GOAL_MAX_CHARS``; shown only as quoted text."""
    goal = run.task.get("goal") if isinstance(run.task, dict) else None
    text = " ".join(str(goal or "").split())
    return text if len(text) <= GOAL_MAX_CHARS else text[: GOAL_MAX_CHARS - 1] + "…"


@dataclass(frozen=True)
class WaitingRun:
    run: Run
    goal: str
    kind: str  # descriptor kind
    kind_words: str
    reason_words: str
    portal_origin: str | None
    computer_id: str
    waiting_since: datetime
    deadline: datetime | None
    # None when the person can act; else why not (expired, withdrawn...), shown as is.
    unavailable: str | None


@dataclass(frozen=True)
class HomePage:
    # What the person can act on now.
    waiting: list[WaitingRun]
    # Paused runs whose request can no longer be acted on (expired, withdrawn, binding revoked):
    # listed apart, since nothing the person does here moves them; the task's agent must ask again.
    stale: list[WaitingRun]
    recent: list[tuple[Run, str, str]]  # run, goal, status words


def _waiting_since(run: Run) -> datetime:
    paused = getattr(run, "paused_at", None)
    return paused or run.updated_at


def home_for_account(*, account: Account, limit: int = 50) -> HomePage:
    """Runs of the account waiting for a person (newest pause first), those paused on a request
    that can no longer be acted on, then recent runs."""
    waiting_runs = (
        Run.objects.filter(
            account=account,
            status=Run.Status.WAITING_FOR_INPUT,
            pause_kind__in=_ON_A_PAGE,
            continuation__isnull=True,
        )
        .select_related("computer", "account")
        .annotate(paused_at=Max("events__created_at", filter=Q(events__kind="run_paused")))
        .order_by("-paused_at", "-created_at")[:limit]
    )
    waiting: list[WaitingRun] = []
    stale: list[WaitingRun] = []
    for run in waiting_runs:
        paused = current_pause(run)
        if paused is None:
            continue
        pause = paused.pause
        kind = pause_kind(pause.kind)
        facts = kind.waiting(run=run, pause=pause)
        unavailable = None
        try:
            intervention_current(run=run)
        except DomainError as exc:
            unavailable = exc.message
        (waiting if unavailable is None else stale).append(
            WaitingRun(
                run=run,
                goal=goal_of(run),
                kind=kind.descriptor_kind or "",
                kind_words=kind.words,
                reason_words=kind.reason_words(pause.reason),
                portal_origin=facts.portal_origin,
                computer_id=run.computer_handle or "",
                waiting_since=_waiting_since(run),
                deadline=facts.deadline,
                unavailable=unavailable,
            )
        )
    waiting_ids = {w.run.id for w in waiting + stale}
    recent = [
        (run, goal_of(run), STATUS_WORDS.get(run.status, run.status))
        for run in Run.objects.filter(account=account)
        .exclude(pk__in=waiting_ids)
        .select_related("computer")
        .order_by("-created_at")[:20]
    ]
    return HomePage(waiting=waiting, stale=stale, recent=recent)


@dataclass(frozen=True)
class StepLine:
    index: int
    tool: str
    state: str
    detail: str
    is_error: bool


def step_detail(step: RunStep) -> str:
    """What a person may read of a step: its secret-free summary, never typed text."""
    summary: dict[str, Any] = step.summary or {}
    parts = []
    for key in ("url", "selector", "key", "portal_origin", "label", "credential", "reason"):
        value = summary.get(key)
        if not isinstance(value, str) or not value:
            continue
        if key == "label":  # the agent's words: shown as on the Vault form, quoted and link-free
            parts.append(f"label “{label_from_task(value)}”")
        else:
            parts.append(f"{key} {value[:120]}")
    if isinstance(summary.get("characters"), int):
        parts.append(f"typed {summary['characters']} characters")
    return ", ".join(parts)


def last_steps(*, run: Run, count: int = 5) -> list[StepLine]:
    steps = list(RunStep.objects.filter(run=run).order_by("-index")[:count])
    return [
        StepLine(
            index=s.index,
            tool=s.tool,
            state=s.state,
            detail=step_detail(s),
            is_error=bool((s.summary or {}).get("isError")),
        )
        for s in reversed(steps)
    ]


def replay_url(*, run: Run) -> str | None:
    """The person's replay of the run (``/tasks/{id}/recording``) once its recording holds a segment."""
    recording = recording_of_run(run_id=run.pk, account_id=run.account_id)
    return f"/tasks/{run.pk}/recording" if recording is not None and recording_segments(recording) else None


def latest_screenshot_id(*, run: Run) -> uuid.UUID | None:
    """The newest masked capture of the run: after a step that navigated or typed, a
    ``screenshot`` action, a pause, or a login's diagnostic (all blurred before they were
    stored); nothing is captured here."""
    found = run_latest_screenshot_id(run=run)
    return uuid.UUID(found) if found is not None else None


def screenshot_for_account(*, account: Account, run: Run, artifact_id: str) -> DiagnosticArtifact:
    """The capture, only when it is the run's latest (and so the account's); else 404."""
    try:
        key = uuid.UUID(artifact_id)
    except ValueError:
        raise ScreenshotNotFound() from None
    if latest_screenshot_id(run=run) != key:
        raise ScreenshotNotFound()
    artifact = DiagnosticArtifact.objects.filter(pk=key, account=account).first()
    if artifact is None:
        raise ScreenshotNotFound()
    return artifact


@dataclass(frozen=True)
class RunCapture:
    """A masked capture a run recorded: after a step (its index) or on a pause (no index)."""

    artifact_id: uuid.UUID
    step_index: int | None
    trigger: str
    created_at: datetime


def run_captures(*, run: Run) -> list[RunCapture]:
    """Every masked screenshot the run's steps and pauses recorded, still stored for its account,
    oldest first (two queries). Downloads and uploads are not captures and are never listed."""
    recorded: list[tuple[uuid.UUID, int | None, str, datetime]] = []
    for kind, data, created_at in (
        RunEvent.objects.filter(
            run=run, kind__in=("step_completed", "screenshot_captured"), data__has_key="artifact_id"
        )
        .order_by("id")
        .values_list("kind", "data", "created_at")
    ):
        try:
            key = uuid.UUID(str(data.get("artifact_id")))
        except ValueError:
            continue
        index = data.get("index") if kind == "step_completed" and isinstance(data.get("index"), int) else None
        trigger = "step" if kind == "step_completed" else str(data.get("trigger") or "capture")
        recorded.append((key, index, trigger, created_at))
    stored = set(
        DiagnosticArtifact.objects.filter(
            pk__in=[key for key, *_ in recorded], account_id=run.account_id, kind=DiagnosticArtifact.Kind.SCREENSHOT
        ).values_list("pk", flat=True)
    )
    return [RunCapture(key, index, trigger, at) for key, index, trigger, at in recorded if key in stored]


def run_capture(*, run: Run, artifact_id: str) -> DiagnosticArtifact:
    """One of the run's own masked captures (for staff reading the run); any other id is a 404."""
    try:
        key = uuid.UUID(artifact_id)
    except ValueError:
        raise ScreenshotNotFound() from None
    if key not in {c.artifact_id for c in run_captures(run=run)}:
        raise ScreenshotNotFound()
    artifact = DiagnosticArtifact.objects.filter(pk=key, account_id=run.account_id).first()
    if artifact is None:
        raise ScreenshotNotFound()
    return artifact


def intervention_unavailable(*, run: Run, message: str) -> Unavailable:
    """Name the situation for its own page (expired, cancelled, continued...)."""
    if run.status == Run.Status.CANCELLED:
        return Unavailable("This task was cancelled", "The task was cancelled, so there is nothing left to do here.")
    if continuation_id(run) is not None:
        return Unavailable(
            "This task was already continued",
            "The task went on without waiting here any longer; this intervention is closed.",
        )
    if run.status in (Run.Status.SUCCEEDED, Run.Status.FAILED):
        return Unavailable("This task has finished", "The task finished; it needs nothing more from you.")
    if not run.account.is_active:
        return Unavailable("The account is inactive", "This account is inactive; ask its administrator.")
    paused = current_pause(run)
    if paused is not None:
        own = pause_kind(paused.pause.kind).unavailable(run=run, pause=paused.pause)
        if own is not None:
            return own
    return Unavailable("Not available", message)
