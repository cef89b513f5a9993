"""People's email preferences, and the emails sent about waiting runs (each at most once)."""

from django.conf import settings
from django.db import models

from runs.models import Run


class NotificationPreference(models.Model):
    """What a person asked to be told by email; nothing is sent until they opt in."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_on_pause = models.BooleanField(default=False)
    email_reminder = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"preferences of {self.user}"


class Notification(models.Model):
    """One email to one person about one run: a pause, or a reminder before a credential request expires."""

    class Kind(models.TextChoices):
        PAUSED = "paused"
        REMINDER = "reminder"

    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "run", "kind"], name="notification_once_per_user_run_kind")
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.user_id} about {self.run_id} ({self.state})"
