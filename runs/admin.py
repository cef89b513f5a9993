"""Staff admin for runs (read-only event timeline), credential and connection requests."""

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.models import ConnectionRequest, CredentialRequest, Run, RunEvent
from runs.selectors import task_redacted, typed_lengths


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
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
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "account", "computer", "status", "pause_kind", "model_calls", "max_model_calls", "created_at"]
    list_filter = ["status", "pause_kind"]
    search_fields = ["id", "account__name", "computer__id"]
    readonly_fields = [
        "id", "account", "computer", "status", "pause_kind", "task_shown", "agent_config", "model_calls",
        "max_model_calls", "result", "continued_from", "created_at", "updated_at", "started_at", "finished_at",
    ]
    exclude = ["task"]
    inlines = [RunEventInline, CredentialRequestInline]

    @admin.display(description="task")
    def task_shown(self, run: Run) -> str:
        """The task with what its type steps type shown only as a length."""
        lengths = iter(typed_lengths(run.task))
        task = task_redacted(run.task)
        for step in task.get("steps") or []:
            if isinstance(step, dict) and step.get("tool") == "type" and isinstance(step.get("arguments"), dict):
                step["arguments"]["text"] = f"<{next(lengths, 0)} characters>"
        return json.dumps(task, ensure_ascii=False)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(CredentialRequest)
class CredentialRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "label", "portal_origin", "state", "expires_at", "opened_at"]
    list_filter = ["state"]
    readonly_fields = [f.name for f in CredentialRequest._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(ConnectionRequest)
class ConnectionRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "provider", "state", "created_at", "completed_at"]
    list_filter = ["state", "provider"]
    readonly_fields = [f.name for f in ConnectionRequest._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
