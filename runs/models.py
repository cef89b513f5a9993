"""Runs, their append-only event log, credential and connection requests, and
idempotency records for explicit continuation."""

import uuid
from typing import Any

from django.db import models

from accounts.models import Account
from computers.models import Computer
from core.prepared import QuickLoad


class Run(QuickLoad, models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING_FOR_INPUT = "waiting_for_input"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # A paused run a harness continued: ended; its continuation (``continued_run_id``) goes on.
        CONTINUED = "continued"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.CONTINUED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="runs")
    computer = models.ForeignKey(Computer, on_delete=models.PROTECT, null=True, blank=True, related_name="runs")
    # The computer's binding when the run was created: (account, computer, binding) must still hold.
    computer_binding = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    task = models.JSONField(default=dict)
    agent_config = models.JSONField(default=dict)
    model_calls = models.PositiveIntegerField(default=0)
    max_model_calls = models.PositiveIntegerField(default=20)
    # Price of one model call, fixed when the run is created.
    microcredits_per_model_call = models.PositiveBigIntegerField(default=0)
    # Whether the run's screen is recorded (POST /api/runs ``recording``; runs.recordings).
    recording = models.BooleanField(default=True)
    # The agent's own resumable state (e.g. the scripted agent's cursor); secret-free.
    agent_state = models.JSONField(default=dict, blank=True)
    # Steps recorded so far; the next step has this index (from 0).
    step_count = models.PositiveIntegerField(default=0)
    # Validated by runs.contracts.RUN_RESULT before it is saved.
    result = models.JSONField(null=True, blank=True)
    # Denormalised from result for filtering: the pause kind while waiting.
    pause_kind = models.CharField(max_length=20, blank=True, default="")
    # The run holds its computer (runs/queue.py): running, paused at a takeover of it, or first in
    # line after such a pause. At most one run per computer, enforced by the database.
    holds_computer = models.BooleanField(default=False)
    # The executor's agent lease the run keeps from step to step (internal; never in the API).
    executor_lease = models.CharField(max_length=64, blank=True, default="")
    # The unique one-to-one makes a second continuation impossible at the database.
    continued_from = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="continuation"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["account", "-created_at"]),
            models.Index(fields=["status"]),
            models.Index(fields=["computer", "status", "created_at"], name="run_queue_per_computer"),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(max_model_calls__gte=1), name="run_max_model_calls_positive"),
            models.UniqueConstraint(
                fields=["computer"], condition=models.Q(holds_computer=True), name="run_one_holder_per_computer"
            ),
        ]

    def __str__(self) -> str:
        return str(self.id)

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A run is bound to its computer's binding when it is created, whichever path creates it.
        if self._state.adding and self.computer_id is not None and self.computer_binding is None:
            self.computer_binding = Computer.objects.values_list("binding", flat=True).get(pk=self.computer_id)
        super().save(*args, **kwargs)

    @property
    def computer_handle(self) -> str | None:
        """The run's computer as its account names it (its id within the account, ``Computer.handle``)."""
        computer = self.computer
        return None if computer is None else computer.handle


class RunEvent(models.Model):
    """Append-only and secret-free: what happened to a run, in order."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=60)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} @ {self.created_at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("Run events are append-only.")
        super().save(*args, **kwargs)


class RunStep(models.Model):
    """One agent decision and its tool call. Recorded before the call, so a
    worker that dies mid-step leaves a step that is never replayed."""

    class State(models.TextChoices):
        STARTED = "started"
        # The tool answered: without an error, or with one (``isError``).
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        # The worker died while the tool ran: nobody knows what it did, and nothing replays it.
        UNCERTAIN = "uncertain"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    tool = models.CharField(max_length=60)
    state = models.CharField(max_length=20, choices=State.choices, default=State.STARTED)
    # Secret-free: what a person reviewing the run may read.
    summary = models.JSONField(default=dict)
    # The tool result the agent saw (secret-free by contract).
    result = models.JSONField(null=True, blank=True)
    # An external agent's action: its key (one step per key and run) and the digest of its call.
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    request_digest = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="run_step_once"),
            models.UniqueConstraint(
                fields=["run", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_step_action_key_once",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.index} {self.tool}"


class LongWait(models.Model):
    """One of an account's ``RAM_ACCOUNT_MAX_LONG_WAITS`` slots of concurrent long waits, held by a
    request of any web process while it waits for a step. A row past ``expires_at`` is free: a
    process that died while waiting leaks no slot."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="+")
    slot = models.PositiveSmallIntegerField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "slot"], name="long_wait_one_per_slot")]

    def __str__(self) -> str:
        return f"{self.account_id} wait {self.slot}"


class CredentialRequest(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        CREDENTIAL_SAVED = "credential_saved"
        EXPIRED = "expired"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the request_id
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="credential_requests")
    portal_origin = models.CharField(max_length=300)
    label = models.CharField(max_length=200)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    expires_at = models.DateTimeField()
    # Set when the person opened the form (the invite was issued): never twice.
    opened_at = models.DateTimeField(null=True, blank=True)
    saved_at = models.DateTimeField(null=True, blank=True)
    # Where the credential is (to be) stored, relative to the account's KV prefix.
    credential_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.label} ({self.state})"


class ConnectionRequest(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        AUTHORIZED = "authorized"
        DENIED = "denied"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="connection_requests")
    provider = models.CharField(max_length=20, default="google")
    capabilities = models.JSONField(default=list)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.provider} ({self.state})"


class IdempotencyRecord(models.Model):
    """The first answer to continuing a run (REST or MCP) for a key: a frozen snapshot, replayed as is."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    key = models.CharField(max_length=200)
    request_digest = models.CharField(max_length=64)
    # Rows stored before 0012 also hold the REST status they answered (always 201); newer rows hold none.
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # The answer's JSON (``runs.services.Continued.answer``); older rows hold the same bytes REST sent.
    response_body = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "key"], name="idempotency_key_per_account")]

    def __str__(self) -> str:
        return f"continue key for {self.account_id}"



class StoredCredential(models.Model):
    """What the person may see of a portal credential in the vault: recorded when it
    is saved, because the web processes' Vault role can never read a secret.

    No password, no username: only a masked username. The row goes when the
    credential is deleted from the vault.
    """

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="stored_credentials")
    credential_id = models.CharField(max_length=100)
    label = models.CharField(max_length=200)
    origins = models.JSONField(default=list)
    username_masked = models.CharField(max_length=300)
    saved_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-saved_at", "credential_id"]
        constraints = [
            models.UniqueConstraint(fields=["account", "credential_id"], name="stored_credential_once_per_account")
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.credential_id})"


class CredentialReplacement(models.Model):
    """A person-initiated credential request, not tied to a run: a new one-time Vault
    form for a stored credential, under the same invite rules as a run's request."""

    class State(models.TextChoices):
        PENDING = "pending"
        CREDENTIAL_SAVED = "credential_saved"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # the invite's request id
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="credential_replacements")
    credential_id = models.CharField(max_length=100)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    expires_at = models.DateTimeField()
    # Opened when created: the person asked for the form with this very request.
    opened_at = models.DateTimeField()
    saved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"replace {self.credential_id} ({self.state})"
