"""Visual sessions (one ``jpeg-websocket-v1`` socket each) and their tickets.

A ticket is 256 random bits shown once as 43 base64url characters; only its
SHA-256 digest is stored, and it is consumed once, within 60 s.
"""

import uuid

from django.conf import settings
from django.db import models

from accounts.models import Account, ApiKey
from computers.models import Computer


class VisualSession(models.Model):
    class Mode(models.TextChoices):
        OBSERVE = "observe"
        CONTROL = "control"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="visual_sessions")
    computer = models.ForeignKey(Computer, on_delete=models.CASCADE, related_name="visual_sessions")
    # Exactly one of the two authorised the creation: a runner key or a password web session.
    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, null=True, blank=True, related_name="visual_sessions")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="visual_sessions"
    )
    mode = models.CharField(max_length=10, choices=Mode.choices)
    # The executor generation the socket was bound to when it connected.
    generation = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    connected_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=100, blank=True)

    class Meta:
        indexes = [models.Index(fields=["connected_at", "ended_at"])]

    def __str__(self) -> str:
        return f"{self.mode} {self.computer_id} {self.id}"


class VisualTicket(models.Model):
    session = models.OneToOneField(VisualSession, on_delete=models.CASCADE, related_name="ticket")
    digest = models.CharField(max_length=64, unique=True)  # SHA-256 hex; the ticket itself is never stored
    expires_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["consumed_at", "expires_at"])]

    def __str__(self) -> str:
        return f"ticket of {self.session_id}"
