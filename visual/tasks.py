"""Celery tasks of visual sessions: thin wrappers around the services."""

from __future__ import annotations

from celery import shared_task

from visual import services


@shared_task(name="visual.sweep", ignore_result=True)
def sweep() -> int:
    """End the screen sessions whose ticket expired unused."""
    return services.visual_sessions_expire_unused()
