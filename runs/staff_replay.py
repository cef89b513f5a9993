"""The staff admin's replay of a run's recording (``runs.admin``'s run page).

Playing is recorded: the page offers a button whose POST appends ``recording_played`` (with the
staff member's username) to the run's events and lets this admin session fetch the recording's
segments for ``REPLAY_SECONDS``; a GET creates nothing, and without that POST no segment is served.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST

from computers.models import Recording
from core.errors import DomainError
from runs.models import Run
from runs.recording_pages import player_context
from runs.recordings import recording_played_by_staff, recording_segment, recording_timeline
from runs.recordings_api import segment_response

if TYPE_CHECKING:
    from runs.admin import RunAdmin

REPLAY_SECONDS = 30 * 60


def _key(run: Run) -> str:
    return f"ram_replay_{run.pk}"


def _run(model_admin: admin.ModelAdmin[Run], request: HttpRequest, object_id: str) -> Run | None:
    if not model_admin.has_view_permission(request):
        return None
    try:
        key = uuid.UUID(object_id)
    except ValueError:
        return None
    return Run.objects.filter(pk=key).first()


def _played(request: HttpRequest, run: Run) -> bool:
    return float(request.session.get(_key(run), 0)) > time.time()


def has_recording(run: Run) -> bool:
    return Recording.objects.filter(run_id=run.pk, segments__isnull=False).exists()


def link(run: Run) -> SafeString | str:
    if not has_recording(run):
        return "no recording"
    return format_html('<a href="{}">Play the recording</a>', reverse("admin:runs_run_recording", args=[run.pk]))


def urls(model_admin: RunAdmin) -> list[URLPattern]:
    site = model_admin.admin_site

    @require_GET
    def page(request: HttpRequest, object_id: str) -> HttpResponse:
        run = _run(model_admin, request, object_id)
        if run is None:
            return HttpResponse(status=404)
        try:
            timeline = recording_timeline(run=run)
        except DomainError:
            return HttpResponse("This run has no recording.", status=404, content_type="text/plain")
        segment_url = reverse("admin:runs_run_recording_segment", args=[run.pk, 0]).removesuffix("0") + "{n}"
        context = {
            **site.each_context(request),
            "title": "Recording",
            "run": run,
            "played": _played(request, run),
            "play_url": reverse("admin:runs_run_recording_play", args=[run.pk]),
            "run_url": reverse("admin:runs_run_change", args=[run.pk]),
            **player_context(timeline, segment_url=segment_url),
        }
        return TemplateResponse(request, "admin/runs/recording.html", context)

    @require_POST
    def play(request: HttpRequest, object_id: str) -> HttpResponse:
        run = _run(model_admin, request, object_id)
        if run is None:
            return HttpResponse(status=404)
        recording_played_by_staff(run=run, username=request.user.get_username())
        request.session[_key(run)] = time.time() + REPLAY_SECONDS
        return HttpResponseRedirect(reverse("admin:runs_run_recording", args=[run.pk]))

    @require_GET
    def segment(request: HttpRequest, object_id: str, index: int) -> HttpResponse:
        run = _run(model_admin, request, object_id)
        if run is None or not _played(request, run):
            return HttpResponse(status=404)
        try:
            return segment_response(request, recording_segment(run=run, index=index))
        except DomainError:
            return HttpResponse(status=404)

    return [
        path("<path:object_id>/recording/", site.admin_view(page), name="runs_run_recording"),
        path("<path:object_id>/recording/play", site.admin_view(play), name="runs_run_recording_play"),
        path(
            "<path:object_id>/recording/segments/<int:index>",
            site.admin_view(segment),
            name="runs_run_recording_segment",
        ),
    ]
