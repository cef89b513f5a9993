"""Where the masked captures of a computer's page are kept (server side).

Every capture is masked at the source, in the executor (``executor/masking.py``), and
reaches the server through the executor's internal endpoint already masked.

The bytes are kept through Django's storage API under the ``artifacts`` alias
of ``STORAGES``: files under ``var/artifacts`` in the embedded default, any
S3-compatible bucket through django-storages in production (several hosts
share no disk). The row (``DiagnosticArtifact``) holds the account the
capture belongs to and the name of the stored file; ``artifacts_sweep``
deletes both after ``RAM_ARTIFACT_RETENTION_DAYS``.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone

from computers.files import storage_save
from computers.models import ARTIFACT_STORAGE, Computer, DiagnosticArtifact
from computers.recordings import recordings_sweep
from executor.masking import blurred as blurred
from executor.masking import masked_png as masked_png

logger = logging.getLogger(__name__)

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024


def artifact_storage() -> Storage:
    return storages[ARTIFACT_STORAGE]


def artifact_store(*, computer_id: str, kind: str, data: bytes, content_type: str = "image/png") -> uuid.UUID:
    """Store an already masked capture for the computer's (current) account."""
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ValueError("capture too large")
    account_id = Computer.objects.values_list("account_id", flat=True).get(pk=computer_id)
    artifact_id = uuid.uuid4()
    name = storage_save(artifact_storage(), f"{timezone.now():%Y/%m/%d}/{artifact_id}.png", ContentFile(data))
    try:
        DiagnosticArtifact.objects.create(
            id=artifact_id,
            computer_id=computer_id,
            account_id=account_id,
            kind=kind,
            content_type=content_type,
            storage_name=name,
            size=len(data),
        )
    except Exception:
        artifact_storage().delete(name)
        raise
    return artifact_id


def artifact_store_from_thread(**kwargs: Any) -> uuid.UUID:
    """``artifact_store`` for the executor's worker threads, which keep no connection open."""
    try:
        return artifact_store(**kwargs)
    finally:
        connection.close()


def artifact_file_delete(name: str) -> None:
    """Delete a stored file after the row's deletion commits (quietly when it is gone already)."""

    def delete() -> None:
        try:
            artifact_storage().delete(name)
        except Exception:  # noqa: BLE001 - the sweep's next pass cannot find it either; nothing to retry
            logger.warning("A stored artifact file could not be deleted.")

    transaction.on_commit(delete)


def artifacts_sweep() -> int:
    """Delete the captures older than ``RAM_ARTIFACT_RETENTION_DAYS`` (their rows and stored files),
    and the recordings older than ``RAM_RECORDING_RETENTION_DAYS`` (``computers.recordings``)."""
    cutoff = timezone.now() - timedelta(days=settings.RAM_ARTIFACT_RETENTION_DAYS)
    deleted = recordings_sweep()
    older = DiagnosticArtifact.objects.filter(created_at__lt=cutoff).exclude(kind=DiagnosticArtifact.Kind.RECORDING)
    for artifact in older.iterator():
        with transaction.atomic():
            artifact.delete()  # the post_delete receiver deletes the file after commit
        deleted += 1
    return deleted
