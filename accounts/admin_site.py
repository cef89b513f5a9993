"""The staff admin site: staff users with a password session only.

A delegated session (opened by a runner key's one-time link) never reaches the
admin, whoever it was minted for. Signing in at ``/admin/login/`` is a password
sign-in like ``/accounts/login/``, and marks the session so.
"""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from accounts.services import PASSWORD, session_auth_method


class RamAdminSite(admin.AdminSite):
    site_header = "RAM staff admin"
    site_title = "RAM admin"

    def has_permission(self, request: HttpRequest) -> bool:
        return super().has_permission(request) and session_auth_method(request) == PASSWORD

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        from accounts.services import PASSWORD, SESSION_AUTH_METHOD

        already = request.user.is_authenticated
        response = super().login(request, extra_context)
        # Django's login view just authenticated this user with their password (and rotated the session).
        if request.method == "POST" and not already and request.user.is_authenticated and response.status_code == 302:
            request.session[SESSION_AUTH_METHOD] = PASSWORD
        return response
