"""The staff admin site: staff users with a password session only.

A delegated session (opened by a runner key's one-time link) never reaches the
admin, whoever it was minted for.
"""

from django.contrib import admin
from django.http import HttpRequest

from accounts.services import PASSWORD, session_auth_method


class RamAdminSite(admin.AdminSite):
    site_header = "RAM staff admin"
    site_title = "RAM admin"

    def has_permission(self, request: HttpRequest) -> bool:
        return super().has_permission(request) and session_auth_method(request) == PASSWORD
