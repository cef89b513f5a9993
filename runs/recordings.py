"""A run's recording: when it starts and stops, its timeline, who may play it.

The recording itself is made in the executor (``executor/recording.py``) and kept by
``computers.recordings``; this module ties it to the run:

- it **starts** at the run's first browser step (``recording_ensure``, from ``runs.browser``),
  so a continued run's recording starts where its own steps start; it is on unless
  ``RAM_RECORDING`` is off or the run was created with ``recording: false``; a person's control
  is recorded only when the account opted in (``Account.record_person_control``);
- it **stops** when the run lets go of its computer (``runs.signals``: succeeded, failed,
  cancelled, or paused on a kind that does not keep the computer), or when the computer's next
  run starts its own (a takeover's continuation); a cancelled or failed run keeps what was recorded;
- its **timeline** (``recording_timeline``) puts the run's steps (tool, state, secret-free
  arguments), pauses, continuations and the periods of a person's control (from when to when,
  how many inputs — never what was typed) at offsets into the video.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, Literal

from django.conf import settings
from pydantic import JsonValue

from accounts.models import Account
from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer, Recording, RecordingSegment
from computers.recordings import recording_of_run, recording_open, recording_plan, recording_segments
from core.contracts import Closed
from core.errors import NotFound
from runs.models import Run, RunEvent, RunStep
from runs.selectors import step_out
from runs.state import run_event_append

logger = logging.getLogger(__name__)

# How long the recording calls to the executor may take (a recording never holds up a step long).
RECORDING_CALL_SECONDS = 5.0


class RecordingNotFound(NotFound):
    """No recording (yet) of this run in the key's account, or one past its retention."""

    code = "recording.not_found"
    message_default = "This run has no recording."


class RecordingSegmentOut(Closed):
    index: int
    offset_ms: int
    duration_ms: int
    size: int
    frames: int


class RecordingOut(Closed):
    """A run's recording: WebM/VP9 segments, each a complete file (``GET …/recording?segment=N``)."""

    run_id: uuid.UUID
    content_type: Literal["video/webm"]
    fps: int
    started_at: datetime
    ended_at: datetime | None
    duration_ms: int
    size: int
    # "minutes" or "bytes" when a cap stopped it early.
    capped: str
    # Whether a person's control of the computer is in the video (the account's opt-in); else
    # those periods are on the timeline only, the video showing a placeholder.
    person_control_recorded: bool
    segments: list[RecordingSegmentOut]


class TimelineEntry(Closed):
    """One thing on the timeline, at ``offset_ms`` into the recording (until ``end_offset_ms``)."""

    type: Literal["step", "pause", "continuation", "person_control", "run"]
    at: datetime | None
    offset_ms: int
    end_offset_ms: int | None = None
    # step: index, tool, state, arguments (secret-free); pause: kind, reason; continuation:
    # continued_run_id or continued_from; person_control: who, inputs, recorded; run: what.
    detail: dict[str, JsonValue]


class RecordingTimeline(Closed):
    recording: RecordingOut
    entries: list[TimelineEntry]


def recording_wanted(run: Run) -> bool:
    return bool(settings.RAM_RECORDING and run.recording and run.computer_id)


def recording_ensure(*, run: Run) -> None:
    """Start the run's recording on its computer if it has none yet (never fails the step)."""
    if not recording_wanted(run) or Recording.objects.filter(run_id=run.pk).exists():
        return
    computer = Computer.objects.get(pk=run.computer_id)
    record_human = Account.objects.filter(pk=run.account_id).values_list("record_person_control", flat=True).first()
    recording, created = recording_open(computer=computer, run_id=run.pk, record_human=bool(record_human))
    if not created:
        return
    try:
        ExecutorClient(computer, timeout=RECORDING_CALL_SECONDS).recording_start(recording_plan(recording))
    except ExecutorError as exc:
        logger.warning("The recording of run %s could not start (%s).", run.pk, exc.reason)


def recording_stop_quietly(*, run_id: Any, computer_id: str | None) -> None:
    """Stop the run's recording when it lets go of its computer (an executor gone needs nothing)."""
    recording = Recording.objects.filter(run_id=run_id, ended_at__isnull=True).first()
    if recording is None or not computer_id:
        return
    computer = Computer.objects.filter(pk=computer_id).first()
    if computer is None:
        return
    try:
        ExecutorClient(computer, timeout=RECORDING_CALL_SECONDS * 3).recording_stop(str(recording.pk))
    except ExecutorError:
        logger.info("The recording of run %s had already stopped with its executor.", run_id)


def recording_for_run(*, run: Run) -> tuple[Recording, list[RecordingSegment]]:
    """The run's recording and its stored segments; ``RecordingNotFound`` while there is none."""
    recording = recording_of_run(run_id=run.pk, account_id=run.account_id)
    segments = recording_segments(recording) if recording is not None else []
    if recording is None or not segments:
        raise RecordingNotFound()
    return recording, segments


def recording_segment(*, run: Run, index: int) -> RecordingSegment:
    _, segments = recording_for_run(run=run)
    for segment in segments:
        if segment.index == index:
            return segment
    raise RecordingNotFound("This run's recording has no such segment.")


def recording_out(run: Run, recording: Recording, segments: list[RecordingSegment]) -> RecordingOut:
    return RecordingOut(
        run_id=run.pk,
        content_type="video/webm",
        fps=recording.fps,
        started_at=recording.started_at,
        ended_at=recording.ended_at,
        duration_ms=recording.duration_ms,
        size=recording.size,
        capped=recording.capped,
        person_control_recorded=recording.record_human,
        segments=[
            RecordingSegmentOut(
                index=s.index, offset_ms=s.offset_ms, duration_ms=s.duration_ms, size=s.artifact.size, frames=s.frames
            )
            for s in segments
        ],
    )


def _offset(recording: Recording, at: datetime | None) -> int:
    if at is None:
        return 0
    return max(0, int((at - recording.started_at).total_seconds() * 1000))


def recording_timeline(*, run: Run) -> RecordingTimeline:
    """The run's steps, pauses, continuations and a person's control periods at offsets into its video."""
    recording, segments = recording_for_run(run=run)
    entries: list[TimelineEntry] = []
    for step in RunStep.objects.filter(run=run).order_by("index"):
        out = step_out(step)
        entries.append(
            TimelineEntry(
                type="step",
                at=step.started_at,
                offset_ms=_offset(recording, step.started_at),
                end_offset_ms=_offset(recording, step.finished_at) if step.finished_at else None,
                detail={"index": out.index, "tool": out.tool, "state": out.state, "arguments": out.arguments},
            )
        )
    takers: list[tuple[datetime, str]] = []
    for event in RunEvent.objects.filter(run=run).order_by("id"):
        data = event.data or {}
        if event.kind == "run_paused":
            detail: dict[str, JsonValue] = {"kind": data.get("kind"), "reason": data.get("reason")}
            entries.append(_entry("pause", recording, event.created_at, detail))
        elif event.kind == "run_continued":
            entries.append(
                _entry("continuation", recording, event.created_at, {"continued_run_id": data.get("continued_run_id")})
            )
        elif event.kind == "run_created" and data.get("continued_from"):
            entries.append(
                _entry("continuation", recording, event.created_at, {"continued_from": data.get("continued_from")})
            )
        elif event.kind in ("run_succeeded", "run_failed", "run_cancelled"):
            entries.append(_entry("run", recording, event.created_at, {"what": event.kind.removeprefix("run_")}))
        elif event.kind == "control_taken":
            takers.append((event.created_at, str(data.get("by") or "")))
    for period in recording.periods or []:
        at = recording.started_at + timedelta(milliseconds=int(period.get("start_ms") or 0))
        entries.append(
            TimelineEntry(
                type="person_control",
                at=at,
                offset_ms=int(period.get("start_ms") or 0),
                end_offset_ms=period.get("end_ms"),
                detail={
                    "who": _who(takers, at),
                    "inputs": int(period.get("inputs") or 0),
                    "recorded": bool(period.get("recorded")),
                },
            )
        )
    entries.sort(key=lambda e: (e.offset_ms, e.type))
    return RecordingTimeline(recording=recording_out(run, recording, segments), entries=entries)


def _who(takers: list[tuple[datetime, str]], at: datetime) -> str:
    """Who took control for a period starting at ``at``: the latest ``control_taken`` event of the run
    up to a few seconds after it (the event is written once the executor granted control)."""
    named = [by for when, by in takers if when <= at + timedelta(seconds=5) and by]
    return named[-1] if named else "a person of the account"


def _entry(kind: Any, recording: Recording, at: datetime, detail: dict[str, JsonValue]) -> TimelineEntry:
    return TimelineEntry(type=kind, at=at, offset_ms=_offset(recording, at), detail=detail)


def recording_played_by_staff(*, run: Run, username: str) -> None:
    """Each playback by staff is on the run's events (``recording_played``)."""
    run_event_append(run=run, kind="recording_played", data={"by": "staff", "user": username[:150]})
