"""The person's email preferences page (linked from every page's header)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from accounts.services import PASSWORD, session_auth_method
from core.pages import require_public_origin
from notifications import services


class PreferencesForm(forms.Form):
    email = forms.EmailField(required=False, max_length=254, label="Email address")
    email_on_pause = forms.BooleanField(required=False, label="Email me when a task pauses and needs a person")
    email_reminder = forms.BooleanField(
        required=False, label="Email me a reminder before a credential request expires"
    )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if (data.get("email_on_pause") or data.get("email_reminder")) and not data.get("email"):
            raise forms.ValidationError("Give an email address to receive emails.")
        return data


def _page(request: HttpRequest, form: PreferencesForm, *, saved: bool = False, status: int = 200) -> HttpResponse:
    return render(
        request,
        "notifications/preferences.html",
        {"title": "Email notifications", "nav": "notifications", "form": form, "saved": saved},
        status=status,
    )


@require_http_methods(["GET", "POST"])
def preferences_page(request: HttpRequest) -> HttpResponse:
    # Where emails go is changed only with a password sign-in, never a delegated one.
    if session_auth_method(request) != PASSWORD:
        return redirect_to_login(request.path, settings.LOGIN_URL)
    if request.method == "POST":
        return _save(request)
    prefs = services.preferences_get(user=request.user)  # type: ignore[arg-type]
    return _page(request, PreferencesForm(initial=prefs.__dict__))


@require_public_origin
def _save(request: HttpRequest) -> HttpResponse:
    form = PreferencesForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    services.preferences_set(
        user=request.user,  # type: ignore[arg-type]
        email=form.cleaned_data["email"],
        email_on_pause=form.cleaned_data["email_on_pause"],
        email_reminder=form.cleaned_data["email_reminder"],
    )
    return _page(request, PreferencesForm(initial=form.cleaned_data), saved=True)
