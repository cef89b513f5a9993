"""Connects run transitions to the run queue and the run loop: a queued run or a freed
computer, or one started on demand, makes the queue dispatch; an admitted run gets its first step; a pausing run a masked
screenshot of its page (taken while it still holds its computer)."""

from typing import Any

from django.dispatch import receiver

from computers.placement import computer_touch
from computers.services import computer_deleted, computer_reassigned, computer_started, computer_stopped
from runs.browser import lease_release_quietly, pause_capture
from runs.models import Run
from runs.queue import queue_dispatch, run_admitted
from runs.recordings import recording_stop_quietly
from runs.services import run_intervention_closed, run_queued, runs_cancel_for_reassigned_computer
from runs.state import computer_released, run_pausing
from runs.tasks import run_step


@receiver(run_queued)
def dispatch_queued(sender: Any, run_id: Any, **kwargs: Any) -> None:
    queue_dispatch()


@receiver(computer_released)
def dispatch_released(sender: Any, run_id: Any, computer_id: str | None, executor_lease: str, **kwargs: Any) -> None:
    if computer_id and executor_lease:
        lease_release_quietly(computer_id=computer_id, lease_id=executor_lease)
    recording_stop_quietly(run_id=run_id, computer_id=computer_id)
    computer_touch(computer_id=computer_id)  # used until now: its idle time starts here
    queue_dispatch()


@receiver(computer_started)
def dispatch_started(sender: Any, computer_id: str, **kwargs: Any) -> None:
    """A computer started on demand is ready: the runs waiting for it may start."""
    queue_dispatch()


@receiver(computer_stopped)
def dispatch_stopped(sender: Any, computer_id: str, **kwargs: Any) -> None:
    """A computer whose stop was decided is gone: the runs that waited for it start it anew."""
    queue_dispatch()


@receiver(run_intervention_closed)
def stop_recording_of_closed_pause(sender: Any, run_id: Any, **kwargs: Any) -> None:
    """A paused run that was continued (or cancelled) ends its recording, though its takeover kept
    the computer: the continuation's recording starts with its own first step."""
    computer_id = Run.objects.filter(pk=run_id).values_list("computer_id", flat=True).first()
    recording_stop_quietly(run_id=run_id, computer_id=computer_id)


@receiver(run_admitted)
def enqueue_first_step(sender: Any, run_id: Any, **kwargs: Any) -> None:
    run_step.delay(str(run_id))


@receiver(computer_reassigned)
def cancel_previous_owners_runs(sender: Any, computer_id: str, previous_account_id: Any, **kwargs: Any) -> None:
    runs_cancel_for_reassigned_computer(computer_id=computer_id, previous_account_id=previous_account_id)


@receiver(computer_deleted)
def cancel_deleted_computers_runs(sender: Any, computer_id: str, account_id: Any, **kwargs: Any) -> None:
    runs_cancel_for_reassigned_computer(computer_id=computer_id, previous_account_id=account_id)


@receiver(run_pausing)
def capture_pausing_page(sender: Any, run: Any, **kwargs: Any) -> None:
    """A masked screenshot of the page every pause leaves, under the run's hold of its computer."""
    pause_capture(run=run)
