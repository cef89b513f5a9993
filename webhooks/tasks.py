"""Celery tasks of webhooks: thin, id-based wrappers around a delivery attempt and the sweep."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task

from webhooks import services

# A retry this soon is scheduled on the broker; a longer wait is left to the sweep (every 30 s),
# so no message waits hours in the broker (Redis redelivers unacknowledged ETA messages).
BROKER_RETRY_MAX_SECONDS = 60.0


@shared_task(name="webhooks.deliver", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def deliver(delivery_id: str) -> None:
    wait = services.delivery_attempt(delivery_id=uuid.UUID(delivery_id))
    if wait is not None and wait <= BROKER_RETRY_MAX_SECONDS:
        deliver.apply_async((delivery_id,), countdown=wait)


@shared_task(name="webhooks.sweep", ignore_result=True)
def sweep() -> dict[str, Any]:
    """Enqueue due deliveries nobody holds (lost tasks, long waits); forget old finished ones."""
    due = services.deliveries_due()
    for delivery_id in due:
        deliver.delay(str(delivery_id))
    return {"due": len(due), "forgotten": services.deliveries_forget()}
