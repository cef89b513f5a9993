"""Connects run transitions to the run loop: a queued run gets its first step."""

from typing import Any

from django.dispatch import receiver

from runs.services import run_queued
from runs.tasks import run_step


@receiver(run_queued)
def enqueue_first_step(sender: Any, run_id: Any, **kwargs: Any) -> None:
    run_step.delay(str(run_id))
