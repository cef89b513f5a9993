"""The pages that play a run's recording with its timeline beside it: the person's
(``/tasks/{id}/recording``, a password session of the run's account) and the staff admin's
(``runs.admin``, after a playback that is recorded on the run). Thin: check, one selector, render.

The player (``static/ram/recording.js``) plays the segments one after another in one
``<video>`` and seeks across them from the timeline's buttons; everything it loads is RAM's own.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.services import PASSWORD, account_of_user, session_auth_method
from core.errors import DomainError
from runs import pages, selectors
from runs.models import Run
from runs.recordings import RecordingTimeline, TimelineEntry, recording_segment, recording_timeline
from runs.recordings_api import segment_response


def clock(ms: int | None) -> str:
    """An offset as the player shows it: m:ss (h:mm:ss past an hour)."""
    seconds = max(0, int(ms or 0) // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def entry_words(entry: TimelineEntry) -> str:
    """What the timeline says of one entry (secret-free: the step's own summary, a count of inputs)."""
    detail = entry.detail
    if entry.type == "step":
        return f"Step {_count(detail.get('index')) + 1}: {detail.get('tool')} ({detail.get('state')})"
    if entry.type == "pause":
        return f"Paused: {detail.get('kind')} ({detail.get('reason')})"
    if entry.type == "continuation":
        return "Continued" if detail.get("continued_run_id") else "Continues an earlier run"
    if entry.type == "person_control":
        inputs = _count(detail.get("inputs"))
        seen = "recorded" if detail.get("recorded") else "not recorded"
        return f"{detail.get('who')} had control ({inputs} input{'s' if inputs != 1 else ''}, {seen})"
    return f"The run {detail.get('what')}"


def player_context(timeline: RecordingTimeline, *, segment_url: str) -> dict[str, Any]:
    """What the player's template needs: the segments (``segment_url`` with ``{n}``) and the entries."""
    recording = timeline.recording
    return {
        "recording": recording,
        "duration": clock(recording.duration_ms),
        "player": {
            "segments": [
                {
                    "index": s.index,
                    "offset_ms": s.offset_ms,
                    "duration_ms": s.duration_ms,
                    "url": segment_url.format(n=s.index),
                }
                for s in recording.segments
            ],
        },
        "entries": [
            {
                "type": e.type,
                "offset_ms": e.offset_ms,
                "at": clock(e.offset_ms),
                "until": clock(e.end_offset_ms) if e.end_offset_ms is not None and e.type == "person_control" else "",
                "words": entry_words(e),
            }
            for e in timeline.entries
        ],
    }


def _account_run(request: HttpRequest, run_id: str) -> Run | None:
    if session_auth_method(request) != PASSWORD:
        return None
    account = account_of_user(request.user)  # type: ignore[arg-type]
    if account is None:
        return None
    try:
        return selectors.run_for_account(account=account, run_id=run_id)
    except DomainError:
        return None


@require_GET
def recording_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """The person's replay of their run: the video and the timeline beside it."""
    if session_auth_method(request) != PASSWORD:
        return redirect_to_login(request.path, settings.LOGIN_URL)
    run = _account_run(request, run_id)
    try:
        if run is None:
            raise LookupError
        timeline = recording_timeline(run=run)
    except (LookupError, DomainError):
        return render(
            request,
            "runs/unavailable.html",
            {"title": "No recording", "message": "This task has no recording you can play."},
            status=404,
        )
    context = player_context(timeline, segment_url=f"/tasks/{run.pk}/recording/segments/{{n}}")
    return render(
        request, "runs/recording.html", {"title": "Replay", "run": run, "goal": pages.goal_of(run), **context}
    )


@require_GET
def recording_segment_file(request: HttpRequest, run_id: str, index: int) -> HttpResponse:
    """One segment of the run's recording (range requests), for a password session of its account."""
    run = _account_run(request, run_id)
    if run is None:
        return HttpResponse(status=404)
    try:
        segment = recording_segment(run=run, index=index)
    except DomainError:
        return HttpResponse(status=404)
    return segment_response(request, segment)
