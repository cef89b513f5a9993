"""REST endpoints of a run's recording (runs.recordings). Thin: parse, one selector, render."""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse

from accounts.auth import RUNNER_KEY
from accounts.models import ApiKey
from computers.models import RecordingSegment
from core.api import Router, integer_query, json_response, operation
from runs import recordings, selectors
from runs.errors import InvalidFilter

router = Router()

RANGE = re.compile(r"^bytes=(\d{0,18})-(\d{0,18})$")


def segment_response(request: HttpRequest, segment: RecordingSegment) -> HttpResponse:
    """A segment's bytes (video/webm), whole or the one range a ``Range: bytes=a-b`` header asks for."""
    data = segment.artifact.data
    size = len(data)
    header = request.headers.get("Range", "").strip()
    match = RANGE.match(header) if header else None
    status, start, end = 200, 0, size - 1
    if match is not None and (match.group(1) or match.group(2)):
        first, last = match.group(1), match.group(2)
        if first:
            start, end = int(first), min(int(last), size - 1) if last else size - 1
        else:  # a suffix: the last N bytes
            start, end = max(0, size - int(last)), size - 1
        if start >= size or start > end:
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{size}"
            return response
        status = 206
    response = HttpResponse(data[start : end + 1], content_type="video/webm", status=status)
    response["Accept-Ranges"] = "bytes"
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=300"
    return response


def _segment_param(request: HttpRequest) -> int:
    raw = request.GET.get("segment", "0")
    if not re.fullmatch(r"[0-9]{1,6}", raw):
        raise InvalidFilter("Invalid request: segment must be an integer from 0 to 999999.")
    return int(raw)


@operation(
    summary="The run's recording: one WebM/VP9 segment (masked at the source), with range requests",
    auth=RUNNER_KEY,
    responses={
        200: "The segment's bytes (video/webm); Accept-Ranges: bytes.",
        206: "The range a Range header asked for.",
        400: "Invalid segment.",
        404: "No such run, or no recording of it (yet), or no such segment.",
        416: "A range outside the segment.",
    },
    query={"segment": integer_query("the segment's index (GET …/recording/timeline lists them); default 0", 0, 999999)},
    media_type="video/webm",
)
def run_recording(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return segment_response(request, recordings.recording_segment(run=run, index=_segment_param(request)))


@operation(
    summary="The run's recording and its timeline: steps, pauses, continuations, a person's control, at video offsets",
    auth=RUNNER_KEY,
    responses={200: recordings.RecordingTimeline, 404: "No such run, or no recording of it (yet)."},
)
def run_recording_timeline(request: HttpRequest, *, key: ApiKey, run_id: str) -> HttpResponse:
    run = selectors.run_for_account(account=key.account, run_id=run_id)
    return json_response(recordings.recording_timeline(run=run).model_dump(mode="json"))


router.route("/api/runs/{run_id}/recording", get=run_recording)
router.route("/api/runs/{run_id}/recording/timeline", get=run_recording_timeline)
