"""Accounts, the users that belong to them, and API keys (digests only)."""

import uuid

from django.conf import settings
from django.db import models

from core.prepared import QuickLoad


class Account(QuickLoad, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    # Integer microcredits; never a float.
    microcredit_balance = models.BigIntegerField(default=0)
    # Opt-in: a person's control of the account's computers is recorded in its runs' recordings
    # (else those periods are on the timeline only; ``/view`` shows the person when it is recorded).
    record_person_control = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(microcredit_balance__gte=0), name="account_balance_non_negative"
            )
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user belongs to exactly one account."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="memberships")

    def __str__(self) -> str:
        return f"{self.user} @ {self.account}"


class ApiKey(QuickLoad, models.Model):
    class Kind(models.TextChoices):
        RUNNER = "runner"
        TASK_OBSERVER = "task_observer"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="api_keys")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True)
    # The public lookup part of the key; the secret part is only in ``digest``.
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)  # SHA-256 hex of the whole key
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.kind} {self.prefix}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class DelegatedSignIn(models.Model):
    """A one-time sign-in link minted by a runner key; its session is ``delegated``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"sign-in for {self.user_id}"


class AccountEvent(models.Model):
    """Append-only, secret-free record of changes to an account (e.g. credit top-ups)."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=50)
    data = models.JSONField(default=dict)
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} @ {self.created_at:%Y-%m-%d %H:%M:%S}"


class SignInGuessing(models.Model):
    """Failed password sign-ins for one username, counted across every address.

    Kept for any username typed, existing or not, so the answers never tell them
    apart. It slows guessing with growing delays; it never locks the person out
    (the hard lock is per username and address, see ``AXES_LOCKOUT_PARAMETERS``).
    """

    username = models.CharField(max_length=150, unique=True)  # case-folded
    failures = models.PositiveIntegerField(default=0)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "sign-in guessing"

    def __str__(self) -> str:
        return f"{self.username}: {self.failures} failures"
