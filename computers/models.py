"""Computers: one private Chromium each, driven by an executor process (``executor/``, which
imports none of this: it reaches these rows through the internal endpoint, ``computers/internal.py``)."""

import uuid
from typing import Any

from django.core.files.storage import storages
from django.core.validators import RegexValidator
from django.db import models

from accounts.models import Account
from core.prepared import QuickLoad
from executor.contracts import BACKENDS

# The alias in settings.STORAGES where masked captures are kept.
ARTIFACT_STORAGE = "artifacts"
COMPUTER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"


class ExecutorHost(models.Model):
    """A machine that runs computers' executors (``manage.py run_executor_host``): it reaches the
    server only through the internal endpoint, with a host token of its own (``ram_host_...``, kept
    here as its SHA-256 digest), reports its capacity and health, and starts and stops the executors
    of the computers placed on it (``computers.placement``)."""

    id = models.CharField(
        primary_key=True,
        max_length=64,
        validators=[RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", "1-64 letters, digits, _, . or -.")],
    )
    token_digest = models.CharField(max_length=64, blank=True, db_index=True, editable=False)
    # Computer slots: how many executors the host runs at once (what it reported last).
    capacity = models.PositiveIntegerField(default=0)
    # What the host reported at its last sync (load average, available memory): read by people.
    health = models.JSONField(default=dict, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Computer(QuickLoad, models.Model):
    class Status(models.TextChoices):
        OFFLINE = "offline"
        READY = "ready"
        FAILED = "failed"

    # Where the computer's browser runs: one choice per record of ``executor.contracts.BROWSER_BACKENDS``.
    # (django-stubs types only the class form of TextChoices, not the functional one built here.)
    Backend = models.TextChoices("Backend", [(name.upper(), name) for name in BACKENDS])  # type: ignore[call-overload]

    id = models.CharField(
        primary_key=True,
        max_length=128,
        validators=[
            RegexValidator(COMPUTER_ID_PATTERN, "1-128 letters, digits, _ or -, starting with a letter or digit.")
        ],
    )
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="computers")
    # The computer's id within its account, unique there (``computer_id_unique_in_account``): what an
    # account's clients will name it by. ``id`` stays the global key the executor side knows (its
    # internal URL, tokens, profile directory, browser user); a row stored before this column
    # existed has ``handle == id`` (computers/migrations/0002, 0003), so nothing about it changes.
    handle = models.CharField(
        max_length=128,
        validators=[
            RegexValidator(COMPUTER_ID_PATTERN, "1-128 letters, digits, _ or -, starting with a letter or digit.")
        ],
        editable=False,
    )
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
    browser_backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.LOCAL)
    # The backend's non-secret options (executor.contracts.BrowserOptions); API keys live in Vault.
    browser_options = models.JSONField(default=dict, blank=True)
    # Locale, time zone, user agent, viewport and upstream proxy (executor.contracts.ComputerSettings),
    # applied when the browser starts; the proxy's credentials live in Vault.
    browser_settings = models.JSONField(default=dict, blank=True)
    # The vendor session the current generation holds: released at stop, or at the next start
    # after a crash (nothing is left running at the vendor).
    browser_session_id = models.CharField(max_length=200, blank=True)
    # How long the generation's browser took to be ready (a vendor session's cold start).
    browser_ready_ms = models.PositiveIntegerField(null=True, blank=True)
    # Names the computer's browser profile on disk (cookies, storage, IndexedDB): a new UUID
    # when the profile is reset or the computer moves to another account, and the executor
    # then deletes every other profile of the computer before its browser starts.
    profile_generation = models.UUIDField(default=uuid.uuid4, editable=False)
    # SHA-256 of the computer's own executor token (``ram_ex_...``); empty: no executor may
    # call the server for this computer. Issued and rotated by executor_token_issue.
    executor_token_digest = models.CharField(max_length=64, blank=True, db_index=True, editable=False)
    # On demand (computers.placement): whether the computer should run now (an explicit start, a run
    # that needs it; cleared by the idle stop, an eviction, a deletion), the host it is placed on
    # (its slot, held until that host reports its executor gone), when a start was last asked
    # for, and when it was last used (the idle stop and the least-recently-used eviction read it).
    wanted_running = models.BooleanField(default=False, editable=False)
    host = models.ForeignKey(
        ExecutorHost, on_delete=models.SET_NULL, null=True, blank=True, related_name="computers", editable=False
    )
    start_requested_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by ``DELETE /api/computers/{id}`` (computers.services.computer_delete): the row stays as
    # the record that its id was used in its account (never given again there, the unique
    # constraint keeps it so) and for the history of its runs; nothing of it answers any more.
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        # The table the executor app created (computers/migrations/0001_initial.py moved the model).
        db_table = "executor_computer"
        constraints = [models.UniqueConstraint(fields=["account", "handle"], name="computer_id_unique_in_account")]

    def __str__(self) -> str:
        return self.id

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A computer created by staff (the admin, seed_demo) is named in its account by its id.
        if not self.handle:
            self.handle = self.id
            update_fields = kwargs.get("update_fields")
            if update_fields is not None:
                kwargs["update_fields"] = [*update_fields, "handle"]
        super().save(*args, **kwargs)


class DiagnosticArtifact(models.Model):
    """A stored file of an account: a masked capture of a computer's page (password fields, and
    the fields an agent typed into, blurred before storing) — ``browser_login``'s diagnostic, the
    ``screenshot`` tool's, the one after a step that navigated or typed, the one on a pause —, a
    file the computer's browser downloaded, or a file a harness uploaded for the ``upload`` tool.
    The bytes are in the ``artifacts`` storage (``computers.artifacts``, ``computers.files``); the
    row says whose they are."""

    class Kind(models.TextChoices):
        DIAGNOSTIC = "diagnostic"
        SCREENSHOT = "screenshot"
        # A file the computer's browser downloaded (``computers.files``).
        DOWNLOAD = "download"
        # A file a harness sent (POST /api/artifacts) for the ``upload`` tool.
        UPLOAD = "upload"
        # A segment of a run's recording (WebM/VP9, ``computers.recordings``).
        RECORDING = "recording"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The computer it came from (none for a harness's upload).
    computer = models.ForeignKey(Computer, on_delete=models.CASCADE, related_name="diagnostics", null=True, blank=True)
    # The computer's account when the capture was taken: only its runner keys may read it.
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.DIAGNOSTIC)
    content_type = models.CharField(max_length=100)
    # A download's or upload's file name (its base name only); blank for captures.
    filename = models.CharField(max_length=255, blank=True, default="")
    # The SHA-256 of the stored bytes, hex (blank for captures stored before it was kept).
    sha256 = models.CharField(max_length=64, blank=True, default="")
    # The file's name in the artifacts storage.
    storage_name = models.CharField(max_length=300)
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "executor_diagnosticartifact"

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"

    @property
    def data(self) -> bytes:
        """The stored (masked) bytes."""
        with storages[ARTIFACT_STORAGE].open(self.storage_name, "rb") as stored:
            return bytes(stored.read())


class StoredProfile(models.Model):
    """The last profile a computer's executor stored at a clean stop (``computers/profiles.py``):
    an encrypted archive in the artifact store, restorable by any executor host. One per computer:
    a newer one replaces it (the older file is deleted); a reset, a move or a deletion removes it."""

    computer = models.OneToOneField(Computer, on_delete=models.CASCADE, primary_key=True, related_name="stored_profile")
    # The computer's profile generation the archive belongs to: restored only into that one.
    profile_generation = models.UUIDField()
    # The executor generation that stored it.
    generation = models.UUIDField()
    storage_name = models.CharField(max_length=300)
    # SHA-256 (hex) and size of the stored (encrypted) bytes.
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    stored_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"profile of {self.computer_id}"


class Recording(models.Model):
    """The recording of one run on a computer (``computers.recordings``): its segments are
    artifacts of the account; the run is named by its id only (this app knows no runs)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    computer = models.ForeignKey(Computer, on_delete=models.CASCADE, related_name="recordings")
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="recordings")
    run_id = models.UUIDField(unique=True)
    # Whether a person's control of the computer is recorded too (the account's opt-in when it started).
    record_human = models.BooleanField(default=False)
    fps = models.PositiveSmallIntegerField(default=2)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The recorded length and bytes so far (the segments' sums).
    duration_ms = models.PositiveBigIntegerField(default=0)
    size = models.PositiveBigIntegerField(default=0)
    # Why it stopped early: "minutes" or "bytes" (its caps), else blank.
    capped = models.CharField(max_length=10, blank=True, default="")
    # The periods of a person's control: [{start_ms, end_ms, inputs, recorded}], never what was typed.
    periods = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"recording of {self.run_id}"


class RecordingSegment(models.Model):
    """One complete WebM file of a recording, from ``offset_ms`` for ``duration_ms``."""

    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="segments")
    index = models.PositiveIntegerField()
    artifact = models.OneToOneField(DiagnosticArtifact, on_delete=models.CASCADE, related_name="recording_segment")
    offset_ms = models.PositiveBigIntegerField()
    duration_ms = models.PositiveBigIntegerField()
    frames = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["recording", "index"]
        constraints = [models.UniqueConstraint(fields=["recording", "index"], name="recording_segment_once")]

    def __str__(self) -> str:
        return f"{self.recording_id}#{self.index}"
