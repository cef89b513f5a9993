"""Staff admin for computers: generation, executor status and last heartbeat."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from executor.models import Computer
from executor.services import computer_profile_reset, computer_reassign


@admin.register(Computer)
class ComputerAdmin(admin.ModelAdmin):
    list_display = ["id", "account", "is_active", "status", "generation", "last_heartbeat_at"]
    list_filter = ["status", "is_active"]
    search_fields = ["id", "name", "account__name"]
    readonly_fields = ["generation", "profile_generation", "executor_address", "status", "last_heartbeat_at", "created_at"]
    actions = ["reset_profile"]

    @admin.action(description="Reset the browser profile (sign out of every portal; a new generation starts)")
    def reset_profile(self, request: HttpRequest, queryset: QuerySet[Computer]) -> None:
        for computer in queryset:
            computer_profile_reset(computer=computer)
        self.message_user(
            request,
            f"Reset the browser profile of {len(queryset)} computer(s); each executor wipes it and starts a new generation.",
            messages.SUCCESS,
        )

    def save_model(self, request: Any, obj: Computer, form: Any, change: bool) -> None:
        if change and "account" in form.changed_data:
            # Moving a computer is a service transition: new binding, generation ended,
            # profile wiped, the old owner's open runs cancelled.
            account = obj.account
            others = [f for f in form.changed_data if f != "account"]
            if others:
                Computer.objects.filter(pk=obj.pk).update(**{f: getattr(obj, f) for f in others})
            computer_reassign(computer_id=obj.pk, account=account)
            obj.refresh_from_db()
            return
        super().save_model(request, obj, form, change)
