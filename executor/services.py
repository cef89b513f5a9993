"""State transitions of computers as their executor reports them."""

from __future__ import annotations

import uuid

from django.db import close_old_connections
from django.utils import timezone

from executor.models import Computer


def executor_register(*, computer_id: str, generation: uuid.UUID, address: str) -> bool:
    """Record a freshly started executor: its new generation, address, ``ready``."""
    close_old_connections()
    updated = Computer.objects.filter(pk=computer_id).update(
        generation=generation,
        executor_address=address,
        status=Computer.Status.READY,
        last_heartbeat_at=timezone.now(),
        draining=False,
    )
    return updated == 1


def executor_heartbeat(*, computer_id: str, generation: uuid.UUID) -> bool:
    """False once another generation has registered for this computer (we were replaced)."""
    close_old_connections()
    updated = Computer.objects.filter(pk=computer_id, generation=generation).update(last_heartbeat_at=timezone.now())
    return updated == 1


def executor_stopped(*, computer_id: str, generation: uuid.UUID, failed: bool = False) -> None:
    close_old_connections()
    Computer.objects.filter(pk=computer_id, generation=generation).update(
        status=Computer.Status.FAILED if failed else Computer.Status.OFFLINE, executor_address=""
    )


def executor_drain_start(*, computer_id: str) -> bool:
    """Stop new steps on the computer until its executor restarts; False for an unknown computer."""
    return Computer.objects.filter(pk=computer_id).update(draining=True) == 1
