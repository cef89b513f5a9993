"""Connects webhooks to the run event log and the worker: every run event is offered
for publishing inside its own transaction; each due delivery goes to a worker after commit."""

from typing import Any

from django.dispatch import receiver

from runs.state import run_event_appended
from webhooks import services
from webhooks.tasks import deliver


@receiver(run_event_appended)
def publish_run_event(sender: Any, event: Any, **kwargs: Any) -> None:
    services.run_event_publish(event=event)


@receiver(services.delivery_due)
def enqueue_delivery(sender: Any, delivery_id: Any, **kwargs: Any) -> None:
    deliver.delay(str(delivery_id))
