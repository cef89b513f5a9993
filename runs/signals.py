"""Connects run transitions to what follows them: a queued run gets its first step, a paused
run a masked screenshot of its page."""

from typing import Any

from django.dispatch import receiver

from executor.services import computer_reassigned
from runs.browser import pause_capture
from runs.services import run_queued
from runs.state import run_paused
from runs.tasks import run_step


@receiver(run_queued)
def enqueue_first_step(sender: Any, run_id: Any, **kwargs: Any) -> None:
    run_step.delay(str(run_id))


@receiver(computer_reassigned)
def cancel_previous_owners_runs(sender: Any, computer_id: str, previous_account_id: Any, **kwargs: Any) -> None:
    from runs.services import runs_cancel_for_reassigned_computer

    runs_cancel_for_reassigned_computer(computer_id=computer_id, previous_account_id=previous_account_id)


@receiver(run_paused)
def capture_paused_page(sender: Any, run_id: Any, **kwargs: Any) -> None:
    """A masked screenshot of the page every pause leaves (after the pause committed)."""
    pause_capture(run_id=run_id)
