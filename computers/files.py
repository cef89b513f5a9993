"""Files of a computer's account: what its browser downloads and what a harness uploads (server side).

A download lands in the computer's download area (``downloads/`` beside its browser profile
on disk, or the browser's own temporary area for a profile kept in memory); once finished, the
executor sends its bytes with their size and SHA-256 through its internal endpoint
(``downloads``, ``computers/internal.py``), and the server stores them through Django's storage
API (the ``artifacts`` alias, like the masked captures) as an artifact of the computer's account
with its file name, content type (from its name), size and SHA-256 — only when the bytes it
received are exactly those declared. The executor then deletes the file in the download area.
One bigger than ``RAM_DOWNLOAD_MAX_BYTES`` is refused: nothing is stored (nor sent).

An upload is a file a harness sends (``POST /api/artifacts``), at most ``RAM_UPLOAD_MAX_BYTES``
and of one of ``RAM_UPLOAD_CONTENT_TYPES`` (for the types with a known signature, the bytes must
begin with it); the ``upload`` tool sets a file input of the page from it, its bytes read by the
server for the run's own account once the run's binding holds (``uploads/read``).

The executor process never imports this module: it holds no database access.
Both are swept with the captures after ``RAM_ARTIFACT_RETENTION_DAYS`` (``computers.artifacts``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mimetypes
import tempfile
import uuid
from typing import IO, Any, BinaryIO

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection
from django.utils import timezone

from accounts.models import Account
from computers.errors import (
    DownloadInvalid,
    ExecutorBindingChanged,
    StorageFull,
    UploadInvalid,
    UploadTooLarge,
    UploadTypeRefused,
)
from computers.models import ARTIFACT_STORAGE, Computer, DiagnosticArtifact
from computers.selectors import computer_binding_holds
from executor.filenames import clean_filename
from executor.server_link import StoredFile, UploadFile

CHUNK_BYTES = 1 << 20
# A download being checked stays in memory up to this size, then in a temporary file.
SPOOL_BYTES = 8 * CHUNK_BYTES
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


def _storage() -> Storage:
    return storages[ARTIFACT_STORAGE]


def type_of(filename: str) -> str:
    """A downloaded file's content type, from its name (application/octet-stream when unknown)."""
    guessed, _ = mimetypes.guess_type(filename, strict=False)
    return (guessed or "application/octet-stream")[:100]


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


def _copy_checked(stream: BinaryIO, copy: IO[bytes], *, size: int, sha256: str) -> None:
    """Copy ``stream`` into ``copy``: exactly ``size`` bytes whose SHA-256 is ``sha256``, else
    ``DownloadInvalid`` (never more than ``size`` + 1 bytes are read)."""
    digest = hashlib.sha256()
    received = 0
    while chunk := stream.read(min(CHUNK_BYTES, size - received + 1)):
        received += len(chunk)
        if received > size:
            raise DownloadInvalid("The download is longer than its declared size; nothing was stored.")
        digest.update(chunk)
        copy.write(chunk)
    if received != size:
        raise DownloadInvalid("The download is shorter than its declared size; nothing was stored.")
    if digest.hexdigest() != sha256:
        raise DownloadInvalid()


def download_store(*, computer_id: str, stream: BinaryIO, filename: str, size: int, sha256: str) -> StoredFile | None:
    """Store a finished download the computer's executor sends as an artifact of the computer's
    (current) account: ``size`` bytes read from ``stream``, kept only when they are exactly that
    many with that SHA-256 (``DownloadInvalid`` otherwise: nothing is stored).

    None when it is bigger than ``RAM_DOWNLOAD_MAX_BYTES`` (nothing is read or stored).
    """
    if size > settings.RAM_DOWNLOAD_MAX_BYTES:
        return None
    account_id = Computer.objects.values_list("account_id", flat=True).get(pk=computer_id)
    filename = clean_filename(filename, fallback="download")
    content_type = type_of(filename)
    artifact_id = uuid.uuid4()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as copy:
        _copy_checked(stream, copy, size=size, sha256=sha256)
        copy.seek(0)
        name = _save(artifact_id=artifact_id, content=File(copy))
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
    """``download_store`` for an in-process executor's worker threads, which keep no connection open."""
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


def upload_for_run(*, computer_id: str, account_id: str, binding: str, artifact_id: str) -> UploadFile | None:
    """An upload of the run's account with its bytes, for the ``upload`` action on this computer.

    The run's binding (account, computer, binding) is checked first: ``ExecutorBindingChanged``
    when it no longer holds (nothing is read). None when the account has no such upload
    (another account's artifact, a capture or a download).
    """
    if not computer_binding_holds(computer_id=computer_id, account_id=account_id, binding=binding):
        raise ExecutorBindingChanged()
    artifact = upload_read(account_id=account_id, artifact_id=artifact_id)
    if artifact is None:
        return None
    data = artifact.data
    sha256 = artifact.sha256 or hashlib.sha256(data).hexdigest()
    return UploadFile(str(artifact.pk), artifact.filename, artifact.content_type, artifact.size, sha256, data)


def upload_for_run_from_thread(**kwargs: Any) -> UploadFile | None:
    """``upload_for_run`` for an in-process executor's worker threads, which keep no connection open."""
    try:
        return upload_for_run(**kwargs)
    finally:
        connection.close()
