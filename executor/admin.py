"""Staff admin for computers: generation, executor status and last heartbeat."""

from django.contrib import admin

from executor.models import Computer


@admin.register(Computer)
class ComputerAdmin(admin.ModelAdmin):
    list_display = ["id", "account", "is_active", "status", "generation", "last_heartbeat_at"]
    list_filter = ["status", "is_active"]
    search_fields = ["id", "name", "account__name"]
    readonly_fields = ["generation", "executor_address", "status", "last_heartbeat_at", "created_at"]
