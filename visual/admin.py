"""Staff admin: visual sessions, read-only (tickets are never shown; only digests exist)."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from visual.models import VisualSession


@admin.register(VisualSession)
class VisualSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "computer", "account", "mode", "created_at", "connected_at", "ended_at", "end_reason"]
    list_filter = ["mode"]
    search_fields = ["id", "computer__id", "account__name"]
    readonly_fields = [
        "id", "account", "computer", "api_key", "user", "mode", "generation",
        "created_at", "connected_at", "ended_at", "end_reason",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
