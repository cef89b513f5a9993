"""Wire models of webhooks: the REST bodies and the body RAM posts to an endpoint."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, JsonValue, StringConstraints

from core.contracts import Closed, json_integer

EventType = Literal[
    "run.queued",
    "run.started",
    "run.paused",
    "run.succeeded",
    "run.failed",
    "run.cancelled",
    "run.continued",
    "intervention.credential_saved",
    "intervention.control_taken",
    "intervention.control_released",
]
TestEventType = Literal["webhook.test"]
DeliveryStatus = Literal["pending", "delivered", "failed"]


def _check_webhook_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an absolute http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials (user:password@)")
    if parts.fragment or value.endswith("#"):
        raise ValueError("must not have a fragment")
    if any(ch.isspace() for ch in value):
        raise ValueError("must not contain spaces")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise ValueError("has an invalid port") from None
    return value


WebhookUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048), AfterValidator(_check_webhook_url)]
Description = Annotated[str, StringConstraints(max_length=200)]


def _unique_types(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise ValueError("event types must not repeat")
    return value


EventTypes = Annotated[list[EventType], Field(min_length=1, max_length=20), AfterValidator(_unique_types)]


class WebhookCreateIn(Closed):
    """Register an endpoint: where to post and which event types."""

    url: WebhookUrl
    event_types: EventTypes
    description: Description = ""


class WebhookUpdateIn(Closed):
    """Change an endpoint; omitted fields stay as they are."""

    url: WebhookUrl | None = None
    event_types: EventTypes | None = None
    description: Description | None = None
    enabled: bool | None = Field(default=None, strict=True)


class SecretRotateIn(Closed):
    """Replace the signing secret; the old one keeps signing (a second signature) for overlap_seconds."""

    overlap_seconds: Annotated[int, *json_integer(0, 7 * 24 * 3600)] = 24 * 3600


class EmptyIn(Closed):
    """No fields: an empty body or ``{}``."""


class WebhookOut(Closed):
    """A webhook endpoint (its secret is never shown again after creation or rotation)."""

    webhook_id: uuid.UUID
    url: str
    event_types: list[EventType]
    description: str
    enabled: bool
    created_at: datetime
    updated_at: datetime
    # While a rotated-out secret still signs: when it stops.
    previous_secret_expires_at: datetime | None


class WebhookCreatedOut(Closed):
    """The new endpoint and its whsec_ secret, shown this once."""

    webhook: WebhookOut
    secret: str


class WebhookListOut(Closed):
    """The account's webhook endpoints, newest first."""

    webhooks: list[WebhookOut]


class SecretOut(Closed):
    """The new whsec_ secret, shown this once, and until when the previous one still signs."""

    secret: str
    previous_secret_expires_at: datetime | None


class DeliveryOut(Closed):
    """One event's delivery to one endpoint: its status, attempts and last error."""

    delivery_id: uuid.UUID
    webhook_id: uuid.UUID
    # The webhook-id header: the same at every attempt.
    event_id: str
    event_type: EventType | TestEventType
    run_id: uuid.UUID | None
    status: DeliveryStatus
    attempts: int
    max_attempts: int
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str
    delivered_at: datetime | None
    created_at: datetime


class DeliveryListOut(Closed):
    """A page of an endpoint's deliveries, newest first."""

    deliveries: list[DeliveryOut]
    count: int
    next_offset: int | None


class EventData(Closed):
    """What happened. Run events carry the run and the run event's own (secret-free) data."""

    run_id: uuid.UUID | None = None
    computer_id: str | None = None
    # The run event reported (its id in the run's event log).
    run_event_id: int | None = None
    # run.paused: the run's required_action, as GET /api/runs/{run_id} answers it.
    required_action: dict[str, JsonValue] | None = None
    # run.failed: the run's error.
    error: str | None = None
    # run.continued: the new run.
    continued_run_id: uuid.UUID | None = None
    details: dict[str, JsonValue] | None = None
    # webhook.test: the endpoint tested.
    webhook_id: uuid.UUID | None = None


class EventPayload(Closed):
    """The JSON body of a webhook (Standard Webhooks: type, timestamp, data)."""

    type: EventType | TestEventType
    timestamp: datetime
    data: EventData

    def to_wire(self) -> dict[str, Any]:
        wire = self.model_dump(mode="json", exclude_none=True)
        wire["timestamp"] = self.timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return wire
