"""Staff admin for computers: generation, executor status, last heartbeat and the browser backend."""

import weakref
from typing import Any

import pydantic
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from computers.models import Computer, ExecutorHost
from computers.services import (
    computer_browser_set,
    computer_profile_reset,
    computer_reassign,
    computer_settings_set,
    executor_token_issue,
)
from executor.contracts import BROWSER_BACKENDS, ComputerSettings, browser_options, computer_settings
from vault_bridge.credentials import VaultRefused, VaultUnavailable

BACKEND_HELP = (
    "Where the computer's browser runs. A change (of backend, options or secret) applies at once: the "
    "computer's generation ends, and its running executor closes its browser (a vendor session is "
    "released) and serves from the new backend within its 5-second heartbeat, signed out everywhere; "
    "an offline executor uses it when it starts."
)
# The form's fields that choose the backend: saved only through computers.services.computer_browser_set.
BACKEND_FIELDS = ("browser_backend", "browser_options", "browser_secret")
# Requests whose save was refused after the form was valid (Vault): no "changed successfully" for them.
_REFUSED: weakref.WeakSet[HttpRequest] = weakref.WeakSet()


class ComputerAdminForm(forms.ModelForm):
    # Write-only: stored in Vault under the computer's account, never in the database or shown again.
    browser_secret = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text="The Steel or Browserbase API key, or a CDP endpoint's token. Stored in Vault; leave empty to keep.",
    )

    # The computer's browser settings (executor.contracts.ComputerSettings); applied when its browser next starts.
    computer_settings = forms.JSONField(
        required=False,
        help_text=(
            'Locale, time zone, user agent, viewport and upstream proxy, e.g. {"locale": "pt-BR", '
            '"timezone": "America/Sao_Paulo", "user_agent": "…", "viewport": {"width": 1024, "height": 600}, '
            '"proxy": {"server": "http://proxy.example:3128"}}. Applied when the computer\'s browser next starts.'
        ),
    )
    # Write-only, together: stored in Vault under the computer's account, never shown again.
    proxy_username = forms.CharField(
        required=False, strip=True, widget=forms.PasswordInput(render_value=False), help_text="The proxy's username (Vault)."
    )
    proxy_password = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The proxy's password (Vault); leave both empty to keep the stored ones for the same proxy.",
    )

    class Meta:
        model = Computer
        fields = ["id", "account", "name", "is_active", "draining", "browser_backend", "browser_options"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "browser_backend" in self.fields:
            self.fields["browser_backend"].required = False
            self.fields["browser_backend"].help_text = BACKEND_HELP
        if "computer_settings" in self.fields:
            self.fields["computer_settings"].initial = dict(self.instance.browser_settings or {})

    def clean_browser_backend(self) -> str:
        return self.cleaned_data.get("browser_backend") or self.instance.browser_backend or Computer.Backend.LOCAL

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        backend = data.get("browser_backend") or Computer.Backend.LOCAL
        try:
            data["browser_options"] = browser_options(backend, data.get("browser_options") or {}).model_dump(
                mode="json"
            )
        except (pydantic.ValidationError, ValueError) as exc:
            self.add_error("browser_options", f"Options that do not fit the {backend} backend: {exc}")
        if data.get("browser_secret") and not BROWSER_BACKENDS[backend].vault_secret:
            self.add_error("browser_secret", f"The {backend} backend takes no secret.")
        self._clean_settings(data, backend)
        self._clean_id_in_account(data)
        return data

    def _clean_id_in_account(self, data: dict[str, Any]) -> None:
        """A computer's id is unique within its account (``handle``): a new computer, or one moved to
        another account, must not take an id that account's computers have or had."""
        account = data.get("account")
        if account is None:
            return
        handle = self.instance.handle if self.instance.handle else data.get("id")
        if not handle:
            return
        taken = Computer.objects.filter(account=account, handle=handle)
        if not self.instance._state.adding:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            self.add_error("account", f"A computer of that account has or had the id {handle!r}.")

    def _clean_settings(self, data: dict[str, Any], backend: str) -> None:
        raw = data.get("computer_settings") or {}
        if isinstance(raw, dict) and isinstance(raw.get("proxy"), dict):
            # Whether Vault holds credentials is RAM's to say, not the form's.
            raw = {**raw, "proxy": {k: v for k, v in raw["proxy"].items() if k != "credentials"}}
        try:
            checked = computer_settings(raw if isinstance(raw, dict) else {"invalid": raw})
        except (pydantic.ValidationError, ValueError) as exc:
            self.add_error("computer_settings", f"Invalid settings: {exc}")
            return
        data["computer_settings"] = checked
        if checked.proxy is not None and backend != Computer.Backend.LOCAL:
            self.add_error("computer_settings", "An upstream proxy applies to the local backend only.")
        username, password = data.get("proxy_username") or "", data.get("proxy_password") or ""
        if bool(username) != bool(password):
            self.add_error("proxy_password", "Give the proxy's username and password together.")
        elif username and checked.proxy is None:
            self.add_error("proxy_username", "Proxy credentials need a proxy server in the settings.")
        elif ":" in username:
            self.add_error("proxy_username", "A proxy username cannot contain ':'.")


@admin.register(Computer)
class ComputerAdmin(admin.ModelAdmin):
    form = ComputerAdminForm
    list_display = [
        "id",
        "handle",
        "account",
        "is_active",
        "status",
        "browser_backend",
        "generation",
        "last_heartbeat_at",
        "wanted_running",
        "host",
        "last_used_at",
    ]
    list_filter = ["status", "is_active", "browser_backend"]
    search_fields = ["id", "handle", "name", "account__name"]
    readonly_fields = [
        "handle",
        "deleted_at",
        "generation",
        "profile_generation",
        "executor_address",
        "status",
        "last_heartbeat_at",
        "created_at",
        "browser_session_id",
        "browser_ready_ms",
        "wanted_running",
        "host",
        "start_requested_at",
        "last_used_at",
    ]
    actions = ["reset_profile", "issue_executor_token"]

    def has_change_permission(self, request: HttpRequest, obj: Computer | None = None) -> bool:
        # A deleted computer (DELETE /api/computers/{id}) stays as a record only: it is never revived.
        if obj is not None and obj.deleted_at is not None:
            return False
        return super().has_change_permission(request, obj)

    @admin.action(description="Issue a new executor token (shown once; the previous one stops working)")
    def issue_executor_token(self, request: HttpRequest, queryset: QuerySet[Computer]) -> TemplateResponse:
        issued = [(computer.pk, executor_token_issue(computer_id=computer.pk)) for computer in queryset]
        return TemplateResponse(
            request,
            "admin/computers/executor_tokens_issued.html",
            {**self.admin_site.each_context(request), "issued": issued, "title": "Executor tokens issued"},
        )

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
        # The backend is the service's to change (Vault first, then the row and the generation):
        # until then the row keeps the one it has.
        backend = form.cleaned_data.get("browser_backend") or Computer.Backend.LOCAL
        options = form.cleaned_data.get("browser_options") or {}
        stored = Computer.objects.filter(pk=obj.pk).values("browser_backend", "browser_options").first()
        obj.browser_backend = stored["browser_backend"] if stored else Computer.Backend.LOCAL
        obj.browser_options = stored["browser_options"] if stored else {}
        self._save_computer(request, obj, form, change)
        secret = form.cleaned_data.get("browser_secret") or None
        browser_changed = bool(set(BACKEND_FIELDS) & set(form.changed_data)) or secret is not None
        # A proxy is for the local backend only: it goes before a remote backend comes, and comes after local is back.
        if browser_changed and backend == Computer.Backend.LOCAL:
            self._save_browser(request, obj, backend=backend, options=options, secret=secret)
        self._save_settings(request, obj, form, change)
        if browser_changed and backend != Computer.Backend.LOCAL:
            self._save_browser(request, obj, backend=backend, options=options, secret=secret)

    def _save_browser(
        self, request: Any, obj: Computer, *, backend: str, options: dict[str, Any], secret: str | None
    ) -> None:
        try:
            computer_browser_set(computer=obj, backend=backend, options=options, secret=secret)
        except (VaultRefused, VaultUnavailable):
            self._refuse(request, "Vault could not store the browser secret; the browser backend was not changed.")
        except ValueError as exc:
            self._refuse(request, f"The browser backend was not changed: {exc}.")

    def _save_settings(self, request: Any, obj: Computer, form: Any, change: bool) -> None:
        changed = {"computer_settings", "proxy_username", "proxy_password"} & set(form.changed_data)
        wanted = form.cleaned_data.get("computer_settings")
        if (changed or not change) and isinstance(wanted, ComputerSettings):
            username = form.cleaned_data.get("proxy_username") or None
            password = form.cleaned_data.get("proxy_password") or None
            try:
                computer_settings_set(
                    computer=obj, settings=wanted, proxy_username=username, proxy_password=password
                )
            except (VaultRefused, VaultUnavailable):
                self._refuse(request, "Vault could not store the proxy's credentials; the settings were not saved.")
            except ValueError as exc:
                self._refuse(request, f"The settings were not saved: {exc}.")

    def _refuse(self, request: HttpRequest, message: str) -> None:
        self.message_user(request, message, level=messages.ERROR)
        _REFUSED.add(request)

    def response_add(self, request: HttpRequest, obj: Computer, post_url_continue: str | None = None) -> HttpResponse:
        if request in _REFUSED:  # created, but not all of it: back to its page, with the error only
            return HttpResponseRedirect(
                reverse("admin:computers_computer_change", args=[obj.pk], current_app=self.admin_site.name)
            )
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: Computer) -> HttpResponse:
        if request in _REFUSED:  # the same page again, with the error and the row as it still is
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def _save_computer(self, request: Any, obj: Computer, form: Any, change: bool) -> None:
        if change and "account" in form.changed_data:
            # Moving a computer is a service transition: new binding, generation ended,
            # profile wiped, the old owner's open runs cancelled.
            account = obj.account
            others = [
                f
                for f in form.changed_data
                if f not in ("account", *BACKEND_FIELDS, "computer_settings", "proxy_username", "proxy_password")
            ]
            if others:
                Computer.objects.filter(pk=obj.pk).update(**{f: getattr(obj, f) for f in others})
            computer_reassign(computer_id=obj.pk, account=account)
            obj.refresh_from_db()
            return
        super().save_model(request, obj, form, change)


@admin.register(ExecutorHost)
class ExecutorHostAdmin(admin.ModelAdmin):
    """Executor hosts, read-only: what each reported last (its token is never shown; issue one with
    ``manage.py executor_host_token --host NAME``) and how many computers are placed on it."""

    list_display = ["id", "capacity", "placed", "last_seen_at", "health"]
    readonly_fields = ["id", "capacity", "health", "last_seen_at", "created_at"]
    exclude = ["token_digest"]

    @admin.display(description="computers placed")
    def placed(self, obj: ExecutorHost) -> int:
        return obj.computers.count()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ExecutorHost | None = None) -> bool:
        return False
