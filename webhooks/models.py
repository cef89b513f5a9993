"""Webhook endpoints of an account, their signing secrets (encrypted at rest),
the events RAM publishes, and one outbox row per (event, endpoint) delivery.

The outbox row is written in the same transaction as the run event it reports,
so a committed event is never lost: a worker delivers it after commit, and the
sweep finds any row whose task was lost (a restart, a dropped message).
"""

import uuid

from django.db import models

from accounts.models import Account
from runs.models import Run, RunEvent


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the webhook_id
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.CharField(max_length=2048)
    # Webhook types (webhooks.catalogue.EVENT_TYPES) this endpoint receives.
    event_types = models.JSONField(default=list)
    description = models.CharField(max_length=200, blank=True, default="")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "webhook endpoint"

    def __str__(self) -> str:
        return self.description or str(self.id)


class WebhookSecret(models.Model):
    """A ``whsec_`` signing secret, encrypted (Fernet) under ``RAM_WEBHOOK_SECRET_KEYS``.

    While a rotated-out secret has not expired, deliveries carry a signature by each live secret.
    """

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="secrets")
    encrypted = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when a newer secret replaces this one: it keeps signing until then.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"secret of {self.endpoint_id} ({self.created_at:%Y-%m-%d %H:%M})"


class WebhookEvent(models.Model):
    """One published event: its ``webhook-id`` and its body, the same bytes at every attempt."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="webhook_events")
    type = models.CharField(max_length=60)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # The run event reported (none for a test event): each run event is published at most once.
    run_event = models.OneToOneField(RunEvent, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.type} {self.message_id}"

    @property
    def message_id(self) -> str:
        """The ``webhook-id`` header: stable across attempts so receivers can de-duplicate."""
        return f"msg_{self.id.hex}"


class WebhookDelivery(models.Model):
    """The outbox row of one event for one endpoint, and its delivery log."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # A worker's claim on the row while it attempts (a lease: a dead worker's claim lapses).
    locked_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # What went wrong, in RAM's words: never the URL, a header or the receiver's body.
    last_error = models.CharField(max_length=300, blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [models.UniqueConstraint(fields=["event", "endpoint"], name="webhook_delivery_once")]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"]),
            models.Index(fields=["endpoint", "-created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.event.type} -> {self.endpoint_id} ({self.status})"
