"""Files of a computer's account: what its browser downloads and what a harness uploads.

A download lands in the computer's download area (``downloads/`` beside its browser profile
on disk, or the browser's own temporary area for a profile kept in memory); once finished it
is stored through Django's storage API (the ``artifacts`` alias, like the masked captures) as
an artifact of the computer's account with its file name, content type (from its name), size
and SHA-256, and its file in the download area is deleted. One bigger than
``RAM_DOWNLOAD_MAX_BYTES`` is refused: nothing is stored.

An upload is a file a harness sends (``POST /api/artifacts``), at most ``RAM_UPLOAD_MAX_BYTES``
and of one of ``RAM_UPLOAD_CONTENT_TYPES`` (for the types with a known signature, the bytes must
begin with it); the ``upload`` tool sets a file input of the page from it.

Both are swept with the captures after ``RAM_ARTIFACT_RETENTION_DAYS`` (``executor.artifacts``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mimetypes
import os
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection
from django.utils import timezone

from accounts.models import Account
from executor.errors import StorageFull, UploadInvalid, UploadTooLarge, UploadTypeRefused
from executor.models import ARTIFACT_STORAGE, Computer, DiagnosticArtifact

CHUNK_BYTES = 1 << 20
MAX_FILENAME_CHARS = 255
# What the bytes of a type with a known signature begin with (an upload of that type must).
SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "application/pdf": (b"%PDF-",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "application/zip": (b"PK\x03\x04", b"PK\x05\x06"),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": (b"PK\x03\x04",),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": (b"PK\x03\x04",),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (b"PK\x03\x04",),
    "application/vnd.oasis.opendocument.text": (b"PK\x03\x04",),
    "application/vnd.oasis.opendocument.spreadsheet": (b"PK\x03\x04",),
}


@dataclass(frozen=True)
class StoredFile:
    """What a run's steps and events say of a stored download (never its bytes)."""

    artifact_id: str
    filename: str
    content_type: str
    size: int
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _storage() -> Storage:
    return storages[ARTIFACT_STORAGE]


def clean_filename(name: str, *, fallback: str = "") -> str:
    """A file name's base name without control characters, at most 255 characters ("" when nothing is left)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip().strip(".")
    return base[:MAX_FILENAME_CHARS] or fallback


def type_of(filename: str) -> str:
    """A downloaded file's content type, from its name (application/octet-stream when unknown)."""
    guessed, _ = mimetypes.guess_type(filename, strict=False)
    return (guessed or "application/octet-stream")[:100]


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK_BYTES):
        yield chunk


def _digest(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in _chunks(stream):
        digest.update(chunk)
    stream.seek(0)
    return digest.hexdigest()


def _save(*, artifact_id: uuid.UUID, content: File[Any]) -> str:
    return storage_save(_storage(), f"{timezone.now():%Y/%m/%d}/{artifact_id}.bin", content)


def storage_save(storage: Storage, name: str, content: File[Any]) -> str:
    """``storage.save``; a full disk or quota is ``StorageFull`` (what was partly written goes)."""
    try:
        return storage.save(name, content)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        with contextlib.suppress(Exception):
            if storage.exists(name):
                storage.delete(name)
        raise StorageFull() from None


def _record(*, name: str, **fields: Any) -> DiagnosticArtifact:
    """The artifact's row for a stored file (the file is deleted again if the row cannot be written)."""
    try:
        return DiagnosticArtifact.objects.create(storage_name=name, **fields)
    except Exception:
        _storage().delete(name)
        raise


def download_store(*, computer_id: str, path: Path, suggested_filename: str) -> StoredFile | None:
    """Store a finished download of the computer as an artifact of its (current) account.

    None when it is bigger than ``RAM_DOWNLOAD_MAX_BYTES`` (nothing is stored).
    """
    size = path.stat().st_size
    if size > settings.RAM_DOWNLOAD_MAX_BYTES:
        return None
    account_id = Computer.objects.values_list("account_id", flat=True).get(pk=computer_id)
    filename = clean_filename(suggested_filename, fallback="download")
    content_type = type_of(filename)
    artifact_id = uuid.uuid4()
    with open(path, "rb") as handle:
        sha256 = _digest(handle)
        name = _save(artifact_id=artifact_id, content=File(handle))
    _record(
        name=name,
        id=artifact_id,
        computer_id=computer_id,
        account_id=account_id,
        kind=DiagnosticArtifact.Kind.DOWNLOAD,
        content_type=content_type,
        filename=filename,
        size=size,
        sha256=sha256,
    )
    return StoredFile(str(artifact_id), filename, content_type, size, sha256)


def download_store_from_thread(**kwargs: Any) -> StoredFile | None:
    """``download_store`` for the executor's worker threads, which keep no connection open."""
    try:
        return download_store(**kwargs)
    finally:
        connection.close()


def upload_media_type(header: str) -> str:
    """The media type of a Content-Type header, lower case, without its parameters."""
    return header.split(";", 1)[0].strip().lower()


def upload_check(*, filename: str, content_type: str, length: int | None) -> str:
    """Refuse an upload before its bytes are read (name, type, declared length); its clean name."""
    cleaned = clean_filename(filename)
    if not filename or cleaned != filename:
        raise UploadInvalid(
            "Invalid upload: filename must be a plain file name (1-255 characters, no path, no control characters)."
        )
    if content_type not in settings.RAM_UPLOAD_CONTENT_TYPES:
        raise UploadTypeRefused()
    if length is not None and length > settings.RAM_UPLOAD_MAX_BYTES:
        raise UploadTooLarge()
    return cleaned


def upload_store(*, account: Account, stream: BinaryIO, filename: str, content_type: str, length: int | None) -> DiagnosticArtifact:
    """Store a file a harness sent as an ``upload`` artifact of ``account``.

    Refused — nothing stored — when its name, type or size is not accepted, when it is empty,
    or when the bytes of a type with a known signature do not begin with it.
    """
    cleaned = upload_check(filename=filename, content_type=content_type, length=length)
    data = stream.read(settings.RAM_UPLOAD_MAX_BYTES + 1)
    if len(data) > settings.RAM_UPLOAD_MAX_BYTES:
        raise UploadTooLarge()
    if not data:
        raise UploadInvalid("Invalid upload: the file is empty.")
    signatures = SIGNATURES.get(content_type)
    if signatures and not data.startswith(signatures):
        raise UploadTypeRefused(f"The file's bytes are not of its content type ({content_type}).")
    artifact_id = uuid.uuid4()
    name = _save(artifact_id=artifact_id, content=ContentFile(data))
    return _record(
        name=name,
        id=artifact_id,
        computer=None,
        account=account,
        kind=DiagnosticArtifact.Kind.UPLOAD,
        content_type=content_type,
        filename=cleaned,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def upload_read(*, account_id: str, artifact_id: str) -> DiagnosticArtifact | None:
    """An upload of the account (with its bytes read), or None: another account's, another kind, or none."""
    try:
        key = uuid.UUID(str(artifact_id))
    except ValueError:
        return None
    return DiagnosticArtifact.objects.filter(
        pk=key, account_id=account_id, kind=DiagnosticArtifact.Kind.UPLOAD
    ).first()


def upload_read_from_thread(**kwargs: Any) -> tuple[DiagnosticArtifact, bytes] | None:
    """``upload_read`` and the file's bytes, for the executor's worker threads."""
    try:
        artifact = upload_read(**kwargs)
        return (artifact, artifact.data) if artifact is not None else None
    finally:
        connection.close()


def remove_quietly(path: Path | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass
