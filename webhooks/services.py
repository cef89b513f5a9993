"""Every state change of webhooks: endpoints and their secrets, publishing run
events into the outbox, and attempting a delivery.

Publishing runs inside the run event's own transaction (``run_event_append``
sends ``run_event_appended`` synchronously): the event and its outbox rows
commit together or not at all, and the delivery task is enqueued after commit.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from accounts.models import Account
from core.json import json_bytes
from core.metrics import WEBHOOK_DELIVERIES
from runs.models import Run, RunEvent
from runs.selectors import run_out
from webhooks import sender
from webhooks.catalogue import RUN_EVENT_TYPES, TEST_EVENT_TYPE
from webhooks.contracts import EventData, EventPayload, WebhookUpdateIn
from webhooks.errors import DeliveryNotFailed, WebhookLimitReached, WebhookUrlRefused
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookSecret
from webhooks.signing import secret_decrypt, secret_encrypt, secret_generate, signature_header

logger = logging.getLogger(__name__)

# Types announced once per run, however many of their kinds a run writes (run_queued).
ANNOUNCED_ONCE = frozenset({"run.queued"})

# Sent after commit for each delivery to attempt now; the worker listens (webhooks.signals).
delivery_due = Signal()

# A worker's claim on a delivery while it attempts; past it, a dead worker's claim lapses.
CLAIM_MARGIN = timedelta(seconds=20)


def max_attempts() -> int:
    return len(settings.RAM_WEBHOOK_RETRY_SECONDS) + 1


def _due_after_commit(delivery_ids: list[uuid.UUID]) -> None:
    def send() -> None:
        for delivery_id in delivery_ids:
            delivery_due.send(sender=WebhookDelivery, delivery_id=delivery_id)

    if delivery_ids:
        transaction.on_commit(send)


# --- Endpoints -----------------------------------------------------------------


def webhook_url_check(url: str) -> None:
    if sender.literal_refused(url):
        raise WebhookUrlRefused(
            "Invalid request: the webhook URL points at a loopback, private or otherwise non-public address."
        )


def webhook_create(*, account: Account, url: str, event_types: list[str], description: str = "") -> tuple[WebhookEndpoint, str]:
    """A new endpoint and its ``whsec_`` secret (shown to the caller once, stored encrypted)."""
    webhook_url_check(url)
    with transaction.atomic():
        # The account row is the lock that keeps concurrent creations within the limit.
        Account.objects.select_for_update().filter(pk=account.pk).first()
        if WebhookEndpoint.objects.filter(account=account).count() >= settings.RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT:
            raise WebhookLimitReached(
                f"The account already has {settings.RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints; "
                "delete one first."
            )
        endpoint = WebhookEndpoint.objects.create(
            account=account, url=url, event_types=list(event_types), description=description
        )
        secret = secret_generate()
        WebhookSecret.objects.create(endpoint=endpoint, encrypted=secret_encrypt(secret))
    logger.info("webhook endpoint %s created for account %s", endpoint.id, account.id)
    return endpoint, secret


def webhook_update(*, endpoint: WebhookEndpoint, changes: WebhookUpdateIn) -> WebhookEndpoint:
    if changes.url is not None:
        webhook_url_check(changes.url)
        endpoint.url = changes.url
    if changes.event_types is not None:
        endpoint.event_types = list(changes.event_types)
    if changes.description is not None:
        endpoint.description = changes.description
    if changes.enabled is not None:
        endpoint.is_active = changes.enabled
    endpoint.save()
    return endpoint


def webhook_delete(*, endpoint: WebhookEndpoint) -> None:
    """The endpoint, its secrets and its delivery log go; nothing more is sent to it."""
    endpoint_id = endpoint.id
    endpoint.delete()
    logger.info("webhook endpoint %s deleted", endpoint_id)


def webhook_secret_rotate(*, endpoint: WebhookEndpoint, overlap_seconds: int) -> tuple[str, datetime | None]:
    """A new secret; the live ones keep signing for ``overlap_seconds`` more (0: at once they stop)."""
    now = timezone.now()
    until = now + timedelta(seconds=overlap_seconds)
    with transaction.atomic():
        WebhookEndpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        live = WebhookSecret.objects.filter(endpoint=endpoint).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=until))
        kept = live.update(expires_at=until)
        # Secrets past their end sign nothing; forget them.
        WebhookSecret.objects.filter(endpoint=endpoint, expires_at__lte=now).delete()
        secret = secret_generate()
        WebhookSecret.objects.create(endpoint=endpoint, encrypted=secret_encrypt(secret))
        endpoint.save(update_fields=["updated_at"])
    logger.info("webhook endpoint %s secret rotated", endpoint.id)
    return secret, (until if kept and overlap_seconds > 0 else None)


def _event_create(
    *, account_id: Any, type_: str, data: EventData, endpoints: list[WebhookEndpoint], run_event: RunEvent | None = None
) -> list[WebhookDelivery]:
    now = timezone.now()
    body = json_bytes(EventPayload(type=type_, timestamp=now, data=data).to_wire()).decode()  # type: ignore[arg-type]
    event = WebhookEvent.objects.create(
        account_id=account_id,
        type=type_,
        run_id=run_event.run_id if run_event is not None else None,
        run_event=run_event,
        body=body,
    )
    deliveries = WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(event=event, endpoint=endpoint, next_attempt_at=now) for endpoint in endpoints]
    )
    _due_after_commit([d.id for d in deliveries])
    return deliveries


def _run_event_data(event: RunEvent, type_: str) -> EventData:
    run: Run = event.run
    extra: dict[str, Any] = {}
    if type_ == "run.paused":
        try:
            # A savepoint: a failure here costs the webhook its required_action, never the pause itself.
            with transaction.atomic():
                extra["required_action"] = run_out(run).to_wire().get("required_action")
        except Exception:  # noqa: BLE001 - logged; the event is still published
            logger.exception("The required_action of run %s could not be put in its webhook.", run.id)
    elif type_ == "run.failed":
        result = run.result or {}
        extra["error"] = result.get("error") if isinstance(result.get("error"), str) else None
    elif type_ == "run.continued":
        extra["continued_run_id"] = event.data.get("continued_run_id")
    return EventData(
        run_id=run.id,
        computer_id=run.computer_handle,
        run_event_id=event.id,
        details=dict(event.data) or None,
        **extra,
    )


def run_event_publish(*, event: RunEvent) -> list[WebhookDelivery]:
    """Put a run event in the outbox of every enabled endpoint of the run's account that takes its type.

    Called inside the run event's transaction; the deliveries are attempted after commit.
    """
    type_ = RUN_EVENT_TYPES.get(event.kind)
    if type_ is None:
        return []
    endpoints = [
        endpoint
        for endpoint in WebhookEndpoint.objects.filter(account_id=event.run.account_id, is_active=True)
        if type_ in endpoint.event_types
    ]
    if not endpoints:
        return []
    if type_ in ANNOUNCED_ONCE and WebhookEvent.objects.filter(run_id=event.run_id, type=type_).exists():
        return []
    return _event_create(
        account_id=event.run.account_id,
        type_=type_,
        data=_run_event_data(event, type_),
        endpoints=endpoints,
        run_event=event,
    )


def webhook_test_send(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A ``webhook.test`` event to this one endpoint (enabled or not), delivered like any other."""
    with transaction.atomic():
        (delivery,) = _event_create(
            account_id=endpoint.account_id,
            type_=TEST_EVENT_TYPE,
            data=EventData(webhook_id=endpoint.id),
            endpoints=[endpoint],
        )
    return delivery


def delivery_retry(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Attempt a failed (given-up) delivery again, with the same webhook-id and body."""
    with transaction.atomic():
        updated = WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.FAILED).update(
            status=WebhookDelivery.Status.PENDING, attempts=0, next_attempt_at=timezone.now(), locked_until=None
        )
        if not updated:
            raise DeliveryNotFailed()
        _due_after_commit([delivery.pk])
    delivery.refresh_from_db()
    return delivery


# --- Delivering ----------------------------------------------------------------


def _claim(delivery_id: uuid.UUID, now: datetime) -> bool:
    """Take the delivery for one attempt if it is due and nobody holds it (a conditional update)."""
    lease = timedelta(seconds=settings.RAM_WEBHOOK_TIMEOUT_SECONDS) * 3 + CLAIM_MARGIN
    return (
        WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .update(locked_until=now + lease)
        == 1
    )


def _live_secrets(endpoint: WebhookEndpoint, now: datetime) -> list[str]:
    rows = WebhookSecret.objects.filter(endpoint=endpoint).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    return [secret_decrypt(row.encrypted) for row in rows.order_by("-created_at", "-id")]


def delivery_attempt(*, delivery_id: uuid.UUID) -> float | None:
    """Attempt one due delivery; the seconds until its next attempt, or None when there is none.

    A delivery that is not due, already done, or claimed by another worker is left alone.
    """
    now = timezone.now()
    if not _claim(delivery_id, now):
        return None
    delivery = WebhookDelivery.objects.select_related("event", "endpoint").get(pk=delivery_id)
    endpoint, event = delivery.endpoint, delivery.event
    if not endpoint.is_active and event.type != TEST_EVENT_TYPE:
        WebhookDelivery.objects.filter(pk=delivery_id).update(
            status=WebhookDelivery.Status.FAILED, locked_until=None, next_attempt_at=None,
            last_error="The endpoint was disabled before this event could be delivered.",
        )  # fmt: skip
        return None
    body = event.body.encode()
    timestamp = int(timezone.now().timestamp())
    try:
        signatures = signature_header(
            _live_secrets(endpoint, now), message_id=event.message_id, timestamp=timestamp, body=body
        )
    except InvalidToken:
        logger.error("Webhook endpoint %s: its secret does not decrypt under RAM_WEBHOOK_SECRET_KEYS.", endpoint.id)
        outcome = sender.Outcome(
            False, error="RAM could not sign the delivery: its secret does not decrypt (RAM_WEBHOOK_SECRET_KEYS)."
        )
        return _record(delivery, outcome)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "RAM-Webhooks/1",
        "webhook-id": event.message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signatures,
    }
    outcome = sender.post(endpoint.url, body=body, headers=headers, timeout=settings.RAM_WEBHOOK_TIMEOUT_SECONDS)
    return _record(delivery, outcome)


def _record(delivery: WebhookDelivery, outcome: sender.Outcome) -> float | None:
    now = timezone.now()
    attempts = delivery.attempts + 1
    fields: dict[str, Any] = {
        "attempts": attempts,
        "last_attempt_at": now,
        "last_status_code": outcome.status_code,
        "last_error": outcome.error[:300],
        "locked_until": None,
    }
    wait: float | None = None
    if outcome.delivered:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now, next_attempt_at=None)
        label = "delivered"
    elif attempts >= max_attempts():
        fields.update(status=WebhookDelivery.Status.FAILED, next_attempt_at=None)
        label = "gave_up"
    else:
        wait = settings.RAM_WEBHOOK_RETRY_SECONDS[attempts - 1]
        fields["next_attempt_at"] = now + timedelta(seconds=wait)
        label = "failed"
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    WEBHOOK_DELIVERIES.labels(outcome=label).inc()
    if not outcome.delivered:
        logger.info(
            "webhook delivery %s attempt %d of %d failed: %s", delivery.pk, attempts, max_attempts(), outcome.error
        )
    return wait


def deliveries_due(*, limit: int = 500, grace_seconds: float = 5.0) -> list[uuid.UUID]:
    """Pending deliveries due for a while and held by nobody: their task was lost, or their wait was long."""
    now = timezone.now()
    return list(
        WebhookDelivery.objects.filter(
            status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now - timedelta(seconds=grace_seconds)
        )
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
        .order_by("next_attempt_at")
        .values_list("id", flat=True)[:limit]
    )


def deliveries_forget() -> int:
    """Forget events whose deliveries all finished longer ago than the log's retention."""
    cutoff = timezone.now() - timedelta(days=settings.RAM_WEBHOOK_LOG_RETENTION_DAYS)
    old = WebhookEvent.objects.filter(created_at__lt=cutoff).exclude(deliveries__status=WebhookDelivery.Status.PENDING)
    deleted, _ = WebhookEvent.objects.filter(pk__in=list(old.values_list("pk", flat=True)[:1000])).delete()
    return deleted
