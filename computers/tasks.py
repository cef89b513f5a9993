"""Celery tasks of computers: the idle stop (computers/placement.py), on the beat."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from computers.placement import computers_idle_stop, computers_place


@shared_task(name="computers.sweep", ignore_result=True)
def sweep() -> dict[str, Any]:
    """Stop the computers idle for RAM_COMPUTER_IDLE_SECONDS; place the ones waiting for a slot."""
    stopped = computers_idle_stop()
    return {"stopped": len(stopped), "placed": computers_place()}
