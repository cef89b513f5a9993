"""Reads of webhooks: an account's endpoints and their delivery log, as wire models."""

from __future__ import annotations

import uuid

from django.db.models import Max, Q
from django.utils import timezone

from accounts.models import Account
from webhooks.contracts import DeliveryListOut, DeliveryOut, WebhookOut
from webhooks.errors import WebhookNotFound
from webhooks.models import WebhookDelivery, WebhookEndpoint
from webhooks.services import max_attempts


def webhook_for_account(*, account: Account, webhook_id: str) -> WebhookEndpoint:
    """The account's endpoint; another account's looks exactly like a missing one."""
    try:
        pk = uuid.UUID(webhook_id)
    except ValueError:
        raise WebhookNotFound() from None
    endpoint = WebhookEndpoint.objects.filter(pk=pk, account=account).first()
    if endpoint is None:
        raise WebhookNotFound()
    return endpoint


def webhook_out(endpoint: WebhookEndpoint) -> WebhookOut:
    previous = endpoint.secrets.filter(expires_at__gt=timezone.now()).aggregate(until=Max("expires_at"))["until"]
    return WebhookOut(
        webhook_id=endpoint.id,
        url=endpoint.url,
        event_types=endpoint.event_types,
        description=endpoint.description,
        enabled=endpoint.is_active,
        created_at=endpoint.created_at,
        updated_at=endpoint.updated_at,
        previous_secret_expires_at=previous,
    )


def webhooks_of(*, account: Account) -> list[WebhookOut]:
    now = timezone.now()
    endpoints = WebhookEndpoint.objects.filter(account=account).annotate(
        previous_until=Max("secrets__expires_at", filter=Q(secrets__expires_at__gt=now))
    )
    return [
        WebhookOut(
            webhook_id=e.id,
            url=e.url,
            event_types=e.event_types,
            description=e.description,
            enabled=e.is_active,
            created_at=e.created_at,
            updated_at=e.updated_at,
            previous_secret_expires_at=e.previous_until,  # type: ignore[attr-defined]
        )
        for e in endpoints
    ]


def delivery_out(delivery: WebhookDelivery) -> DeliveryOut:
    event = delivery.event
    return DeliveryOut(
        delivery_id=delivery.id,
        webhook_id=delivery.endpoint_id,
        event_id=event.message_id,
        event_type=event.type,  # type: ignore[arg-type]
        run_id=event.run_id,
        status=delivery.status,  # type: ignore[arg-type]
        attempts=delivery.attempts,
        max_attempts=max_attempts(),
        next_attempt_at=delivery.next_attempt_at if delivery.status == WebhookDelivery.Status.PENDING else None,
        last_attempt_at=delivery.last_attempt_at,
        last_status_code=delivery.last_status_code,
        last_error=delivery.last_error,
        delivered_at=delivery.delivered_at,
        created_at=delivery.created_at,
    )


def deliveries_page(
    *, endpoint: WebhookEndpoint, status: str | None, limit: int, offset: int
) -> DeliveryListOut:
    rows = WebhookDelivery.objects.filter(endpoint=endpoint).select_related("event")
    if status:
        rows = rows.filter(status=status)
    count = rows.count()
    page = list(rows.order_by("-created_at", "-id")[offset : offset + limit])
    return DeliveryListOut(
        deliveries=[delivery_out(d) for d in page],
        count=count,
        next_offset=offset + limit if offset + limit < count else None,
    )


def delivery_for_endpoint(*, endpoint: WebhookEndpoint, delivery_id: str) -> WebhookDelivery:
    try:
        pk = uuid.UUID(delivery_id)
    except ValueError:
        raise WebhookNotFound("No such delivery.") from None
    delivery = WebhookDelivery.objects.select_related("event").filter(pk=pk, endpoint=endpoint).first()
    if delivery is None:
        raise WebhookNotFound("No such delivery.")
    return delivery
