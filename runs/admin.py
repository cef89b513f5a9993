"""Staff admin for runs, their steps and events, credential and connection
requests, and stored-credential metadata: strictly read-only.

Runs change only through their services (the run loop, continue, cancel), so
the admin neither adds, edits nor deletes any of them; staff read the timeline.
"""

import json
import uuid
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from runs import staff_replay
from runs.errors import ScreenshotNotFound
from runs.models import (
    ConnectionRequest,
    CredentialReplacement,
    CredentialRequest,
    Run,
    RunEvent,
    RunStep,
    StoredCredential,
)
from runs.pages import RunCapture, goal_of, run_capture, run_captures, step_detail
from runs.selectors import task_redacted
from runs.views import capture_response


class ReadOnlyAdmin(admin.ModelAdmin):
    """View only: no add, change or delete, and no bulk delete action."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RunEventInline(ReadOnlyInline):
    model = RunEvent
    fields = ("created_at", "kind", "data")
    readonly_fields = fields
    ordering = ["created_at", "id"]


class CredentialRequestInline(ReadOnlyInline):
    model = CredentialRequest
    fields = ("id", "label", "portal_origin", "state", "expires_at", "opened_at", "saved_at")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["goal_shown", "status", "pause_kind", "computer", "account", "created_at", "short_id"]
    list_display_links = ["goal_shown"]
    list_select_related = ["computer", "account"]
    list_filter = ["status", "pause_kind"]
    search_fields = ["id", "account__name", "computer__id"]
    fields = (
        "id", "goal_shown", "account", "computer", "status", "pause_kind", "steps_shown", "pause_captures",
        "task_shown", "agent_config", "model_calls", "max_model_calls", "step_count", "result", "continued_from",
        "created_at", "updated_at", "started_at", "finished_at",
    )  # fmt: skip
    readonly_fields = (*fields, "recording_shown")
    inlines = [RunEventInline, CredentialRequestInline]

    def get_fields(self, request: HttpRequest, obj: Run | None = None) -> Any:
        """The run's fields, and a link to its recording when it has one (``runs.staff_replay``)."""
        fields = list(super().get_fields(request, obj))
        if obj is not None and staff_replay.has_recording(obj):
            fields.insert(fields.index("steps_shown"), "recording_shown")
        return fields

    class Media:
        css = {"all": ["ram/admin.css"]}

    def get_urls(self) -> list[URLPattern]:
        capture = path(
            "<path:object_id>/captures/<str:artifact_id>",
            self.admin_site.admin_view(self.capture_view),
            name="runs_run_capture",
        )
        return [capture, *staff_replay.urls(self), *super().get_urls()]

    def capture_view(self, request: HttpRequest, object_id: str, artifact_id: str) -> HttpResponse:
        """One masked capture of the run, for staff who may view runs; anything else is a 404."""
        run = self._run(object_id) if self.has_view_permission(request) else None
        if run is None:
            return HttpResponse(status=404)
        try:
            artifact = run_capture(run=run, artifact_id=artifact_id)
        except ScreenshotNotFound:
            return HttpResponse(status=404)
        return capture_response(artifact)

    @staticmethod
    def _run(object_id: str) -> Run | None:
        try:
            key = uuid.UUID(object_id)
        except ValueError:
            return None
        return Run.objects.filter(pk=key).first()

    @admin.display(description="goal", ordering="created_at")
    def goal_shown(self, run: Run) -> str:
        return goal_of(run) or "(no goal)"

    @admin.display(description="id")
    def short_id(self, run: Run) -> str:
        return str(run.id)[:8]

    def _capture_link(self, run: Run, capture: RunCapture, alt: str) -> SafeString:
        url = reverse("admin:runs_run_capture", args=[run.pk, capture.artifact_id])
        return format_html(
            '<a href="{}" class="ram-capture"><img src="{}" alt="{}" width="320" loading="lazy"></a>', url, url, alt
        )

    @admin.display(description="recording")
    def recording_shown(self, run: Run) -> SafeString | str:
        return staff_replay.link(run)

    @admin.display(description="steps")
    def steps_shown(self, run: Run) -> SafeString:
        """Each step: its tool, state and secret-free details, and the masked capture taken after it."""
        steps = list(RunStep.objects.filter(run=run).order_by("index"))
        if not steps:
            return format_html("<p>{}</p>", "No steps yet.")
        after: dict[int, RunCapture] = {}
        for capture in run_captures(run=run):
            if capture.step_index is not None:
                after[capture.step_index] = capture
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    step.index,
                    step.tool,
                    step.get_state_display(),
                    step_detail(step) or "-",
                    step.finished_at.strftime("%Y-%m-%d %H:%M:%S UTC") if step.finished_at else "-",
                    self._capture_link(run, after[step.index], f"Masked capture after step {step.index}")
                    if step.index in after
                    else "-",
                )
                for step in steps
            ),
        )
        return format_html(
            '<table class="ram-steps"><thead><tr><th scope="col">#</th><th scope="col">Tool</th>'
            '<th scope="col">State</th><th scope="col">Details</th><th scope="col">Finished</th>'
            '<th scope="col">Masked capture</th></tr></thead><tbody>{}</tbody></table>',
            rows,
        )

    @admin.display(description="captures on pause")
    def pause_captures(self, run: Run) -> SafeString:
        captures = [c for c in run_captures(run=run) if c.step_index is None]
        if not captures:
            return format_html("{}", "-")
        return format_html_join(
            "",
            '<figure class="ram-capture">{}<figcaption>{} · {}</figcaption></figure>',
            (
                (
                    self._capture_link(run, c, f"Masked capture ({c.trigger})"),
                    c.trigger,
                    c.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
                )
                for c in captures
            ),
        )

    @admin.display(description="task")
    def task_shown(self, run: Run) -> str:
        """The task with its steps' private fields (``Tool.private``) shown only as a length."""
        return json.dumps(task_redacted(run.task, shown=lambda value: f"<{len(str(value))} characters>"), ensure_ascii=False)


@admin.register(RunStep)
class RunStepAdmin(ReadOnlyAdmin):
    list_display = ["run", "index", "tool", "state", "started_at", "finished_at"]
    list_filter = ["state", "tool"]
    search_fields = ["run__id"]
    readonly_fields = [f.name for f in RunStep._meta.fields]


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "kind", "created_at"]
    list_filter = ["kind"]
    search_fields = ["run__id"]
    readonly_fields = [f.name for f in RunEvent._meta.fields]


@admin.register(CredentialRequest)
class CredentialRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "label", "portal_origin", "state", "expires_at", "opened_at"]
    list_filter = ["state"]
    readonly_fields = [f.name for f in CredentialRequest._meta.fields]


@admin.register(ConnectionRequest)
class ConnectionRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "provider", "state", "created_at", "completed_at"]
    list_filter = ["state", "provider"]
    readonly_fields = [f.name for f in ConnectionRequest._meta.fields]


@admin.register(StoredCredential)
class StoredCredentialAdmin(ReadOnlyAdmin):
    """What was noted when each credential was saved; the secrets themselves are only in the vault."""

    list_display = ["credential_id", "account", "label", "username_masked", "saved_at", "last_used_at"]
    search_fields = ["credential_id", "label", "account__name"]
    readonly_fields = [f.name for f in StoredCredential._meta.fields]


@admin.register(CredentialReplacement)
class CredentialReplacementAdmin(ReadOnlyAdmin):
    list_display = ["id", "account", "credential_id", "state", "expires_at", "saved_at"]
    list_filter = ["state"]
    readonly_fields = [f.name for f in CredentialReplacement._meta.fields]
