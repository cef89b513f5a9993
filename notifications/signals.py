"""A paused run (signalled after commit) gets its emails from a worker."""

from typing import Any

from django.dispatch import receiver

from notifications.tasks import paused
from runs.state import run_paused


@receiver(run_paused)
def notify_paused(sender: Any, run_id: Any, kind: str, **kwargs: Any) -> None:
    paused.delay(str(run_id))
