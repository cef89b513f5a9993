"""Staff admin for runs, their steps and events, credential and connection
requests, and stored-credential metadata: strictly read-only.

Runs change only through their services (the run loop, continue, cancel), so
the admin neither adds, edits nor deletes any of them; staff read the timeline.
"""

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.models import (
    ConnectionRequest,
    CredentialReplacement,
    CredentialRequest,
    Run,
    RunEvent,
    RunStep,
    StoredCredential,
)
from runs.selectors import task_redacted, typed_lengths


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


class RunStepInline(ReadOnlyInline):
    model = RunStep
    fields = ("index", "tool", "state", "summary", "started_at", "finished_at")
    readonly_fields = fields
    ordering = ["index"]


class CredentialRequestInline(ReadOnlyInline):
    model = CredentialRequest
    fields = ("id", "label", "portal_origin", "state", "expires_at", "opened_at", "saved_at")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "account", "computer", "status", "pause_kind", "model_calls", "max_model_calls", "created_at"]
    list_filter = ["status", "pause_kind"]
    search_fields = ["id", "account__name", "computer__id"]
    fields = (
        "id", "account", "computer", "status", "pause_kind", "task_shown", "agent_config", "model_calls",
        "max_model_calls", "step_count", "result", "continued_from", "created_at", "updated_at", "started_at",
        "finished_at",
    )  # fmt: skip
    readonly_fields = fields
    inlines = [RunStepInline, RunEventInline, CredentialRequestInline]

    class Media:
        css = {"all": ["ram/admin.css"]}

    @admin.display(description="task")
    def task_shown(self, run: Run) -> str:
        """The task with what its type steps type shown only as a length."""
        lengths = iter(typed_lengths(run.task))
        task = task_redacted(run.task)
        for step in task.get("steps") or []:
            if isinstance(step, dict) and step.get("tool") == "type" and isinstance(step.get("arguments"), dict):
                step["arguments"]["text"] = f"<{next(lengths, 0)} characters>"
        return json.dumps(task, ensure_ascii=False)


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
