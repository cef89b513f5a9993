"""Recordings of runs (server side): rows, segments in the artifact store, the caps and the sweep.

Where a recording is made: in the executor (``executor/recording.py``), which has the frames and
their masking; it holds no database access and sends each closed segment — a complete WebM/VP9
file — through its internal endpoint (``recordings/segment``, ``computers/internal.py``). Here a
segment becomes an artifact of the recording's account (kind ``recording``, stored like the
masked captures under the ``artifacts`` alias: files in the embedded default, the S3 bucket in
production) and a ``RecordingSegment`` row with its offset into the recording.

A recording names its run by id only: this app knows no runs (``runs.recordings`` opens and
stops them and builds their timeline). ``recordings_sweep`` deletes recordings older than
``RAM_RECORDING_RETENTION_DAYS`` with their files; ``artifacts_sweep`` calls it.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from computers.files import storage_save
from computers.models import ARTIFACT_STORAGE, Computer, DiagnosticArtifact, Recording, RecordingSegment
from core.api import InvalidBody
from executor import server_wire as c

WEBM_SIGNATURE = b"\x1a\x45\xdf\xa3"


def artifact_storage() -> Storage:
    return storages[ARTIFACT_STORAGE]


def recording_open(*, computer: Computer, run_id: uuid.UUID, record_human: bool) -> tuple[Recording, bool]:
    """The run's recording, created if it has none (True then)."""
    recording, created = Recording.objects.get_or_create(
        run_id=run_id,
        defaults={
            "computer": computer,
            "account_id": computer.account_id,
            "record_human": record_human,
            "fps": settings.RAM_RECORDING_FPS,
        },
    )
    return recording, created


def recording_plan(recording: Recording) -> dict[str, Any]:
    """The executor's ``recording_start`` arguments for ``recording``."""
    return {
        "recording_id": str(recording.id),
        "fps": recording.fps,
        "record_human": recording.record_human,
        "segment_seconds": settings.RAM_RECORDING_SEGMENT_SECONDS,
        "max_seconds": settings.RAM_RECORDING_MAX_MINUTES * 60,
        "max_bytes": settings.RAM_RECORDING_MAX_BYTES,
    }


def recording_segment_store(*, computer_id: str, body: c.InternalRecordingSegment) -> bool:
    """Keep a closed segment the computer's executor sent; False when the recording is not this
    computer's (nothing is stored). The recording's periods, length and end follow the segment."""
    try:
        data = base64.b64decode(body.data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidBody("Invalid request: data must be base64.") from None
    if data and not data.startswith(WEBM_SIGNATURE):
        raise InvalidBody("Invalid request: a segment is a WebM file.")
    recording = Recording.objects.filter(pk=body.recording_id, computer_id=computer_id).first()
    if recording is None:
        return False
    if data and recording.size + len(data) > settings.RAM_RECORDING_MAX_BYTES:
        data = b""  # over the cap: the executor stops at it; a segment beyond is not kept
        body = body.model_copy(update={"capped": "bytes", "final": True})
    artifact_id = uuid.uuid4()
    name = ""
    if data:
        name = storage_save(artifact_storage(), f"{timezone.now():%Y/%m/%d}/{artifact_id}.webm", ContentFile(data))
    try:
        with transaction.atomic():
            if data and not RecordingSegment.objects.filter(recording=recording, index=body.index).exists():
                artifact = DiagnosticArtifact.objects.create(
                    id=artifact_id,
                    computer_id=computer_id,
                    account_id=recording.account_id,
                    kind=DiagnosticArtifact.Kind.RECORDING,
                    content_type="video/webm",
                    storage_name=name,
                    size=len(data),
                )
                RecordingSegment.objects.create(
                    recording=recording,
                    index=body.index,
                    artifact=artifact,
                    offset_ms=body.offset_ms,
                    duration_ms=body.duration_ms,
                    frames=body.frames,
                )
                name = ""
                Recording.objects.filter(pk=recording.pk).update(size=F("size") + len(data))
            update: dict[str, Any] = {
                "periods": [p.model_dump(mode="json") for p in body.periods],
                "duration_ms": max(recording.duration_ms, body.offset_ms + body.duration_ms),
            }
            if body.capped:
                update["capped"] = body.capped
            if body.final:
                update["ended_at"] = timezone.now()
            Recording.objects.filter(pk=recording.pk).update(**update)
    finally:
        if name:  # the segment was a repeat, or its rows could not be written
            artifact_storage().delete(name)
    return True


def recording_segment_store_from_thread(**kwargs: Any) -> bool:
    """``recording_segment_store`` for an in-process executor's worker threads."""
    try:
        return recording_segment_store(**kwargs)
    finally:
        connection.close()


def recording_of_run(*, run_id: uuid.UUID | str, account_id: Any) -> Recording | None:
    """The run's recording in the account, if it has one."""
    return Recording.objects.filter(run_id=run_id, account_id=account_id).first()


def recording_segments(recording: Recording) -> list[RecordingSegment]:
    return list(recording.segments.select_related("artifact").order_by("index"))


def recordings_sweep() -> int:
    """Delete the recordings older than ``RAM_RECORDING_RETENTION_DAYS``, their segments' rows and files."""
    cutoff = timezone.now() - timedelta(days=settings.RAM_RECORDING_RETENTION_DAYS)
    deleted = 0
    for recording in Recording.objects.filter(started_at__lt=cutoff).iterator():
        with transaction.atomic():
            # The artifacts' post_delete receiver deletes their files after commit.
            for artifact in DiagnosticArtifact.objects.filter(recording_segment__recording=recording):
                artifact.delete()
            recording.delete()
        deleted += 1
    return deleted
