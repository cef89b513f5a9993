"""Connects run transitions to the run loop: a queued run gets its first step."""

from typing import Any

from django.dispatch import receiver

from executor.services import computer_reassigned
from runs.services import run_queued
from runs.tasks import run_step


@receiver(run_queued)
def enqueue_first_step(sender: Any, run_id: Any, **kwargs: Any) -> None:
    run_step.delay(str(run_id))


@receiver(computer_reassigned)
def cancel_previous_owners_runs(sender: Any, computer_id: str, previous_account_id: Any, **kwargs: Any) -> None:
    from runs.services import runs_cancel_for_reassigned_computer

    runs_cancel_for_reassigned_computer(computer_id=computer_id, previous_account_id=previous_account_id)
