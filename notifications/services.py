"""Telling people that a run waits for them, by email, once.

When a run pauses on a kind a person resolves on an intervention page, every
person of the run's account who opted in gets one email; before a credential
request's deadline, those who asked for reminders get one more. An email holds
the server's texts, the task's goal quoted as task text, the deadline and the
intervention page's address — a locator on this server's origin that needs a
password sign-in. Never an invite, a ticket, a key or any link with a token.

A ``Notification`` row is created once per (person, run, kind) under a unique
constraint and claimed once before sending: an email is sent at most once,
whatever the number of workers.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils import timezone

from accounts.models import Membership
from core.metrics import NOTIFICATIONS_SENT
from notifications.models import Notification, NotificationPreference
from runs.links import intervention_url
from runs.models import CredentialRequest, Run
from runs.pauses import PAUSE_KINDS
from runs.selectors import current_pause

logger = logging.getLogger(__name__)

GOAL_MAX_CHARS = 600
PREFERENCES_PATH = "/account/notifications"


@dataclass(frozen=True)
class Preferences:
    email: str
    email_on_pause: bool
    email_reminder: bool


def preferences_get(*, user: User) -> Preferences:
    pref = NotificationPreference.objects.filter(user=user).first()
    return Preferences(
        email=user.email,
        email_on_pause=bool(pref and pref.email_on_pause),
        email_reminder=bool(pref and pref.email_reminder),
    )


def preferences_set(*, user: User, email: str, email_on_pause: bool, email_reminder: bool) -> Preferences:
    """Save a person's address and choices (the address is validated by the form that calls this)."""
    with transaction.atomic():
        if user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        NotificationPreference.objects.update_or_create(
            user=user, defaults={"email_on_pause": email_on_pause, "email_reminder": email_reminder}
        )
    return preferences_get(user=user)


def _recipients(*, account_id: uuid.UUID, reminder: bool) -> list[User]:
    wanted = {"user__notification_preference__email_reminder" if reminder else "user__notification_preference__email_on_pause": True}
    return [
        m.user
        for m in Membership.objects.select_related("user")
        .filter(account_id=account_id, user__is_active=True, **wanted)
        .exclude(user__email="")
        .order_by("user_id")
    ]


def _create(*, run: Run, users: list[User], kind: str) -> list[int]:
    """One row per person; a row that exists already (another worker, an earlier pass) is left alone."""
    created = []
    for user in users:
        notification, fresh = Notification.objects.get_or_create(user=user, run=run, kind=kind)
        if fresh:
            created.append(notification.pk)
    return created


def pause_notifications_create(*, run_id: uuid.UUID) -> list[int]:
    """The emails for a run that just paused on a kind a person resolves; returns the new rows' ids."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None or current_pause(run) is None:
        return []
    kind = PAUSE_KINDS.get(run.pause_kind)
    if kind is None or kind.descriptor_kind is None:
        return []  # budget and credits pauses are for the harness and the account's owner, not a page
    return _create(run=run, users=_recipients(account_id=run.account_id, reminder=False), kind=Notification.Kind.PAUSED)


def reminders_create(*, now: datetime | None = None) -> list[int]:
    """Reminders for pending credential requests whose deadline is within ``RAM_NOTIFY_REMINDER_SECONDS``."""
    now = now or timezone.now()
    soon = now + timedelta(seconds=settings.RAM_NOTIFY_REMINDER_SECONDS)
    created: list[int] = []
    requests = CredentialRequest.objects.select_related("run").filter(
        state=CredentialRequest.State.PENDING,
        expires_at__gt=now,
        expires_at__lte=soon,
        run__status=Run.Status.WAITING_FOR_INPUT,
        run__pause_kind="credential",
    )
    for request in requests:
        if current_pause(request.run) is None:
            continue
        users = _recipients(account_id=request.run.account_id, reminder=True)
        created += _create(run=request.run, users=users, kind=Notification.Kind.REMINDER)
    return created


def _quoted(text: str) -> str:
    clean = "".join(ch if ch == "\n" or ch.isprintable() else " " for ch in text).strip()
    if len(clean) > GOAL_MAX_CHARS:
        clean = clean[: GOAL_MAX_CHARS - 1] + "…"
    return "\n".join("> " + line for line in (clean or "(no goal given)").splitlines())


def _deadline(run: Run) -> datetime | None:
    """The deadline of what the run waits on, as its kind's record says (a credential request's)."""
    kind = PAUSE_KINDS.get(run.pause_kind)
    if kind is None:
        return None
    pause = kind.model.model_validate((run.result or {}).get("pause") or {})
    return kind.waiting(run=run, pause=pause).deadline


def notification_message(notification: Notification) -> EmailMessage:
    """The email: server texts, the goal quoted as task text, the deadline, the intervention page's address."""
    run, user = notification.run, notification.user
    kind = PAUSE_KINDS[run.pause_kind]
    reason = str(((run.result or {}).get("pause") or {}).get("reason", "other"))
    texts = kind.texts(reason=reason, state="pending")
    deadline = _deadline(run)
    goal = str((run.task or {}).get("goal", ""))
    if notification.kind == Notification.Kind.REMINDER:
        subject = "Reminder: a task's credential request expires soon"
        opening = "A task is still waiting for a credential, and its request expires soon."
    else:
        subject = "A task is waiting for you"
        opening = "A task of your account paused and needs a person."
    if deadline is not None:
        when = f"Deadline: {deadline:%Y-%m-%d %H:%M} UTC. After it, the request expires and the task must be asked again."
    else:
        when = "No deadline: the task waits until it is continued or cancelled."
    body = "\n".join(
        [
            f"Hello {user.get_username()},",
            "",
            opening,
            "",
            texts.progress,
            texts.user_action,
            texts.next_step,
            "",
            "The task's goal, as written by whoever created the task (not by this server):",
            _quoted(goal),
            "",
            when,
            "",
            "Open the task's page; you will be asked to sign in with your password:",
            intervention_url(run),
            "",
            "This email carries no access by itself: nothing can be done from it without signing in.",
            f"You get these emails because you asked for them at {settings.RAM_PUBLIC_ORIGIN}{PREFERENCES_PATH}.",
        ]
    )
    return EmailMessage(subject=subject, body=body, to=[user.email])


def notification_send(*, notification_id: int) -> bool:
    """Claim the row once, then send; True when this call sent the email."""
    claimed = Notification.objects.filter(pk=notification_id, state=Notification.State.PENDING).update(
        state=Notification.State.SENDING
    )
    if claimed != 1:
        return False
    notification = Notification.objects.select_related("run", "user").get(pk=notification_id)
    try:
        notification_message(notification).send(fail_silently=False)
    except Exception as exc:  # noqa: BLE001 - any transport failure marks the row; the email is not retried blindly
        Notification.objects.filter(pk=notification_id).update(state=Notification.State.FAILED)
        NOTIFICATIONS_SENT.labels(kind=notification.kind, outcome="failed").inc()
        logger.warning("Email %s about run %s could not be sent (%s).", notification_id, notification.run_id, type(exc).__name__)
        return False
    Notification.objects.filter(pk=notification_id).update(state=Notification.State.SENT, sent_at=timezone.now())
    NOTIFICATIONS_SENT.labels(kind=notification.kind, outcome="sent").inc()
    return True
