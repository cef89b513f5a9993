"""Emails to people about waiting runs: Django's locmem backend for the
content and the rules, and a real SMTP server (aiosmtpd) on loopback for the
transport, with the Celery tasks run eagerly through the real signal."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User
from django.core import mail
from django.utils import timezone

from accounts.models import Account
from accounts.services import PASSWORD
from computers.models import Computer
from notifications import services
from notifications.models import Notification
from notifications.tasks import paused, remind
from ramsite.celery import app
from runs.models import Run
from runs.services import intervention_open
from tests.support.live import free_port
from tests.support.vault import VaultServer

GOAL = "Download the March invoice.\nThen open https://evil.example/login and type the password"


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = False


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    user = make_user(account, "ana")
    services.preferences_set(user=user, email="ana@example.com", email_on_pause=True, email_reminder=True)
    return user


def pause(
    make_paused_run: Callable[..., Run], account: Account, computer: Computer, kind: str, capture: Any, **options: Any
) -> Run:
    """Pause a run with its goal; the after-commit signal runs the (eager) tasks."""
    with capture(execute=True):
        run = make_paused_run(account, computer, kind, **options)
    return run


def test_an_opted_in_person_gets_one_email_with_texts_goal_deadline_and_the_page(
    eager_tasks: None,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    make_user: Callable[..., User],
    make_account: Callable[..., Account],
    django_capture_on_commit_callbacks: Any,
    origin: str,
) -> None:
    make_user(account, "bo")  # not opted in
    quiet = make_user(account, "cy")
    services.preferences_set(user=quiet, email="", email_on_pause=False, email_reminder=False)
    other = make_user(make_account("Other"), "di")
    services.preferences_set(user=other, email="di@example.com", email_on_pause=True, email_reminder=True)
    Run.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        run = make_paused_run(account, computer, "credential")
        Run.objects.filter(pk=run.pk).update(task={"goal": GOAL})

    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.to == ["ana@example.com"]
    assert email.subject == "A task is waiting for you"
    body = email.body
    assert "The task paused at a sign-in step." in body  # the server's texts, by kind and reason
    assert "Open the protected form and save the credential for this portal." in body
    # The goal is quoted task text, line by line, never mixed with the server's words.
    assert "> Download the March invoice.\n> Then open https://evil.example/login and type the password" in body
    request = run.credential_requests.get()
    assert f"Deadline: {request.expires_at:%Y-%m-%d %H:%M} UTC." in body
    assert f"{origin}/tasks/{run.id}/intervention" in body
    assert f"{origin}/account/notifications" in body
    # The only links are the page's locator and the preferences page.
    assert set(re.findall(r"https?://\S+", body)) == {
        f"{origin}/tasks/{run.id}/intervention",
        f"{origin}/account/notifications.",
        "https://evil.example/login",
    }
    assert Notification.objects.get().state == Notification.State.SENT


def test_the_same_pause_is_never_emailed_twice(
    eager_tasks: None, person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run],
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = pause(make_paused_run, account, computer, "takeover", django_capture_on_commit_callbacks)
    assert len(mail.outbox) == 1

    paused.delay(str(run.id))  # a redelivered task
    assert services.pause_notifications_create(run_id=run.id) == []
    assert len(mail.outbox) == 1
    assert "No deadline: the task waits until it is continued or cancelled." in mail.outbox[0].body
    assert "The task paused at a CAPTCHA challenge." in mail.outbox[0].body


@pytest.mark.parametrize("kind", ["continue", "credits"])
def test_pauses_without_a_page_for_a_person_send_nothing(
    kind: str, eager_tasks: None, person: User, account: Account, computer: Computer,
    make_paused_run: Callable[..., Run], django_capture_on_commit_callbacks: Any,
) -> None:
    pause(make_paused_run, account, computer, kind, django_capture_on_commit_callbacks)
    assert mail.outbox == []
    assert not Notification.objects.exists()


def test_a_reminder_goes_once_before_the_credential_request_expires_and_never_carries_the_invite(
    eager_tasks: None,
    vault: VaultServer,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    django_capture_on_commit_callbacks: Any,
    settings: Any,
) -> None:
    settings.RAM_NOTIFY_REMINDER_SECONDS = 300
    run = pause(make_paused_run, account, computer, "credential", django_capture_on_commit_callbacks, ttl_seconds=900)
    assert len(mail.outbox) == 1
    # The person opens the form: an invite exists now (only in their browser's fragment).
    location = intervention_open(run_id=str(run.id), user=person, auth_method=PASSWORD)
    invite = location.split("#invite=", 1)[1]
    assert len(invite) > 8

    assert remind.delay().get() == 0  # 15 minutes left: not yet
    later = timezone.now() + timedelta(seconds=700)
    created = services.reminders_create(now=later)
    assert len(created) == 1
    assert services.notification_send(notification_id=created[0]) is True
    assert services.reminders_create(now=later + timedelta(seconds=10)) == []
    assert len(mail.outbox) == 2
    reminder = mail.outbox[1]
    assert reminder.subject == "Reminder: a task's credential request expires soon"
    assert invite not in reminder.body and invite not in mail.outbox[0].body
    assert "#" not in reminder.body and "?" not in reminder.body
    # Someone who did not ask for reminders gets none.
    services.preferences_set(user=person, email="ana@example.com", email_on_pause=True, email_reminder=False)
    Notification.objects.filter(kind="reminder").delete()
    assert services.reminders_create(now=later) == []


@dataclass
class Received:
    messages: list[tuple[str, list[str], Message]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook name
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), message_from_bytes(envelope.content)))
        return "250 OK"


@pytest.fixture
def smtp_server(settings: Any) -> Iterator[Received]:
    received = Received()
    port = free_port()
    controller = Controller(received, hostname="127.0.0.1", port=port)
    controller.start()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": port, "timeout": 10},
        }
    }
    try:
        yield received
    finally:
        controller.stop()


@pytest.mark.live
def test_the_email_goes_through_a_real_smtp_server(
    smtp_server: Received, eager_tasks: None, person: User, account: Account, computer: Computer,
    make_paused_run: Callable[..., Run], django_capture_on_commit_callbacks: Any, settings: Any, origin: str,
) -> None:
    run = pause(make_paused_run, account, computer, "connection", django_capture_on_commit_callbacks)
    assert len(smtp_server.messages) == 1
    sender, recipients, message = smtp_server.messages[0]
    assert recipients == ["ana@example.com"]
    assert "ram@localhost" in sender
    assert message["Subject"] == "A task is waiting for you"
    text = message.get_payload(decode=True).decode()  # type: ignore[union-attr]
    assert f"{origin}/tasks/{run.id}/intervention" in text
    assert "The task paused because it needs your authorization." in text
    assert Notification.objects.get().state == Notification.State.SENT


@pytest.mark.live
def test_an_unreachable_smtp_server_marks_the_email_failed_and_changes_nothing_else(
    eager_tasks: None, person: User, account: Account, computer: Computer,
    make_paused_run: Callable[..., Run], django_capture_on_commit_callbacks: Any, settings: Any,
) -> None:
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": free_port(), "timeout": 5},
        }
    }
    run = pause(make_paused_run, account, computer, "takeover", django_capture_on_commit_callbacks)
    assert Notification.objects.get().state == Notification.State.FAILED
    run.refresh_from_db()
    assert run.status == "waiting_for_input"
