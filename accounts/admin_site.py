"""The staff admin site: staff users with a password session only.

A delegated session (opened by a runner key's one-time link) never reaches the
admin, whoever it was minted for. Signing in at ``/admin/login/`` is a password
sign-in like ``/accounts/login/`` (``accounts.views.StaffLoginView``): the same
guessing delays per username, notice and hard lock per address, the same
session rotation, and it marks the session ``password``.
"""

from typing import Any, cast

from django.contrib import admin
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from accounts.services import PASSWORD, session_auth_method
from accounts.views import StaffLoginView


class RamAdminSite(admin.AdminSite):
    site_header = "RAM staff admin"
    site_title = "RAM admin"

    def has_permission(self, request: HttpRequest) -> bool:
        return super().has_permission(request) and session_auth_method(request) == PASSWORD

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # Django's admin builds its own LoginView here; ours keeps its context and adds the guessing rules.
        redirect_url = StaffLoginView().get_redirect_url(request) or reverse("admin:index", current_app=self.name)
        if request.method == "GET" and self.has_permission(request):
            return HttpResponseRedirect(redirect_url)
        context = {
            **self.each_context(request),
            "subtitle": None,
            "app_path": request.get_full_path(),
            "username": request.user.get_username(),
            REDIRECT_FIELD_NAME: redirect_url,
            **(extra_context or {}),
        }
        request.current_app = self.name
        return cast(HttpResponse, StaffLoginView.as_view(extra_context=context)(request))
