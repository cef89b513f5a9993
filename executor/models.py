"""Computers: one private Chromium each, driven by an executor process."""

import uuid

from django.core.validators import RegexValidator
from django.db import models

from accounts.models import Account

COMPUTER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"


class Computer(models.Model):
    class Status(models.TextChoices):
        OFFLINE = "offline"
        READY = "ready"
        FAILED = "failed"

    id = models.CharField(
        primary_key=True,
        max_length=128,
        validators=[RegexValidator(COMPUTER_ID_PATTERN, "1-128 letters, digits, _ or -, starting with a letter or digit.")],
    )
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="computers")
    name = models.CharField(max_length=200, blank=True)
    # Revoking the binding makes every intervention on this computer unavailable.
    is_active = models.BooleanField(default=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OFFLINE)
    # A new UUID at every executor start; a change ends every visual session.
    generation = models.UUIDField(null=True, blank=True)
    # A new UUID whenever the computer moves to another account: runs are bound to it.
    binding = models.UUIDField(default=uuid.uuid4, editable=False)
    executor_address = models.CharField(max_length=200, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Before an executor restart (an upgrade): the run loop takes no new step on this
    # computer; the next executor start (a new generation) ends the drain.
    draining = models.BooleanField(default=False)
    # Names the computer's browser profile on disk (cookies, storage, IndexedDB): a new UUID
    # when the profile is reset or the computer moves to another account, and the executor
    # then deletes every other profile of the computer before its browser starts.
    profile_generation = models.UUIDField(default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class DiagnosticArtifact(models.Model):
    """A masked capture stored when a login does not work out (password fields blurred before storing)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    computer = models.ForeignKey(Computer, on_delete=models.CASCADE, related_name="diagnostics")
    content_type = models.CharField(max_length=50)
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"diagnostic {self.id}"
