"""Staff admin for webhook endpoints and their delivery log.

An endpoint is created, changed and tested through the same services as the
REST API. Its ``whsec_`` secret is shown once, on the page right after creation
or rotation, and never again: the admin has no page that reads a secret back.
The delivery log is read-only; failed deliveries can be attempted again.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pydantic
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core.errors import DomainError
from webhooks import services
from webhooks.catalogue import EVENT_TYPES
from webhooks.contracts import WebhookCreateIn
from webhooks.errors import DeliveryNotFailed
from webhooks.models import WebhookDelivery, WebhookEndpoint


def url_without_query(url: str) -> str:
    """A receiver's URL as lists show it: its query (which may hold the receiver's own token) elided."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "…" if parts.query else "", ""))


class WebhookEndpointForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(
        choices=[(name, f"{name}: {text}") for name, text in EVENT_TYPES.items()],
        widget=forms.CheckboxSelectMultiple,
        help_text="The events delivered to this endpoint.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["account", "url", "event_types", "description", "is_active"]
        labels = {"url": "URL", "is_active": "Enabled"}
        help_texts = {
            "url": "An absolute http(s) URL, without credentials or fragment, on a public address "
            "(RAM_WEBHOOK_EGRESS_ALLOW opens exceptions).",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        url, types = data.get("url"), data.get("event_types")
        if url and types:
            try:
                WebhookCreateIn(url=url, event_types=types, description=data.get("description") or "")
                services.webhook_url_check(url)
            except pydantic.ValidationError as exc:
                self.add_error("url", "; ".join(str(e["msg"]) for e in exc.errors()))
            except DomainError as exc:
                self.add_error("url", exc.message)
        return data


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ["__str__", "account", "url_shown", "is_active", "types_shown", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["id", "url", "description", "account__name"]
    actions = ["send_test_event", "rotate_secret"]

    def get_readonly_fields(self, request: HttpRequest, obj: WebhookEndpoint | None = None) -> list[str]:
        if obj is None:
            return []
        return ["account", "id", "created_at", "updated_at", "delivery_log"]

    def get_fields(self, request: HttpRequest, obj: WebhookEndpoint | None = None) -> list[Any]:
        if obj is None:
            return ["account", "url", "event_types", "description", "is_active"]
        return ["id", "account", "url", "event_types", "description", "is_active", "created_at", "updated_at", "delivery_log"]

    @admin.display(description="URL")
    def url_shown(self, endpoint: WebhookEndpoint) -> str:
        return url_without_query(endpoint.url)

    @admin.display(description="event types")
    def types_shown(self, endpoint: WebhookEndpoint) -> str:
        return ", ".join(endpoint.event_types)

    @admin.display(description="delivery log")
    def delivery_log(self, endpoint: WebhookEndpoint) -> str:
        counts = {s: endpoint.deliveries.filter(status=s).count() for s in WebhookDelivery.Status.values}
        url = reverse("admin:webhooks_webhookdelivery_changelist") + f"?endpoint__id__exact={endpoint.pk}"
        return format_html(
            '<a href="{}">{} delivered, {} pending, {} failed</a>',
            url, counts["delivered"], counts["pending"], counts["failed"],
        )  # fmt: skip

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            obj.event_types = list(data["event_types"])
            obj.save()
            return
        endpoint, secret = services.webhook_create(
            account=data["account"], url=data["url"], event_types=list(data["event_types"]),
            description=data.get("description") or "",
        )  # fmt: skip
        if not data.get("is_active", True):
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
        obj.pk = endpoint.pk
        obj._state.adding = False
        request._ram_new_secrets = [(endpoint, secret)]  # type: ignore[attr-defined]  # shown once, in this response

    def response_add(self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: str | None = None) -> HttpResponse:
        shown = getattr(request, "_ram_new_secrets", None)
        if shown is None:
            return super().response_add(request, obj, post_url_continue)
        return self._secrets_page(request, shown, "Webhook endpoint created")

    def _secrets_page(self, request: HttpRequest, shown: list[Any], title: str) -> HttpResponse:
        rows = [(endpoint, url_without_query(endpoint.url), secret) for endpoint, secret in shown]
        return TemplateResponse(
            request,
            "admin/webhooks/secret_shown.html",
            {**self.admin_site.each_context(request), "shown": rows, "title": title},
        )

    @admin.action(description="Send a test event to the selected endpoints")
    def send_test_event(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            services.webhook_test_send(endpoint=endpoint)
        self.message_user(
            request, f"Sent a webhook.test event to {queryset.count()} endpoint(s); see the delivery log.", messages.SUCCESS
        )

    @admin.action(description="Rotate the signing secret of the selected endpoints (the old one signs 24 h more)")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> HttpResponse:
        shown = [(e, services.webhook_secret_rotate(endpoint=e, overlap_seconds=24 * 3600)[0]) for e in queryset]
        return self._secrets_page(request, shown, "Webhook secrets rotated")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """The delivery log: read-only; a failed delivery can be attempted again."""

    list_display = [
        "created_at", "event_type", "webhook_id", "endpoint", "status", "attempts", "last_status_code", "last_error",
        "next_attempt_at", "delivered_at",
    ]  # fmt: skip
    list_filter = ["status", "event__type"]
    search_fields = ["endpoint__id", "event__run__id", "endpoint__account__name"]
    list_select_related = ["event", "endpoint"]
    readonly_fields = (
        "id", "event_type", "webhook_id", "run", "endpoint", "status", "attempts", "next_attempt_at",
        "last_attempt_at", "last_status_code", "last_error", "delivered_at", "created_at", "body",
    )  # fmt: skip
    fields = readonly_fields
    actions = ["retry"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="event type", ordering="event__type")
    def event_type(self, delivery: WebhookDelivery) -> str:
        return delivery.event.type

    @admin.display(description="webhook-id")
    def webhook_id(self, delivery: WebhookDelivery) -> str:
        return delivery.event.message_id

    @admin.display(description="run")
    def run(self, delivery: WebhookDelivery) -> str:
        return str(delivery.event.run_id or "")

    @admin.display(description="body")
    def body(self, delivery: WebhookDelivery) -> str:
        return delivery.event.body

    @admin.action(description="Attempt the selected failed deliveries again")
    def retry(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        retried = 0
        for delivery in queryset:
            try:
                services.delivery_retry(delivery=delivery)
                retried += 1
            except DeliveryNotFailed:
                continue
        self.message_user(request, f"Attempting {retried} failed delivery(ies) again.", messages.SUCCESS)

