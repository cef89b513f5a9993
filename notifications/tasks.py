"""Celery tasks of notifications: thin, id-based wrappers around the services."""

from __future__ import annotations

import uuid

from celery import shared_task

from notifications import services


@shared_task(name="notifications.paused", ignore_result=True)
def paused(run_id: str) -> None:
    for notification_id in services.pause_notifications_create(run_id=uuid.UUID(run_id)):
        send.delay(notification_id)


@shared_task(name="notifications.send", ignore_result=True)
def send(notification_id: int) -> None:
    services.notification_send(notification_id=notification_id)


@shared_task(name="notifications.remind", ignore_result=True)
def remind() -> int:
    created = services.reminders_create()
    for notification_id in created:
        send.delay(notification_id)
    return len(created)
