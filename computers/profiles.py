"""Computers' browser profiles kept where every executor host can restore them (server side).

At a clean stop an executor sends its packed profile (``executor/profile_store.py``: no caches,
no password or autofill database) to ``profile/store``; the server encrypts it and keeps it in
the artifact store (``var/artifacts`` in the embedded default, the S3 bucket in production)
under ``profiles/<computer_id>/``, one per computer (``StoredProfile``): a newer one replaces
it and the older file is deleted. An executor that starts without the computer's current
profile generation on its disk asks ``profile/restore`` for it.

Encryption happens here, never in the executor: AES-256-GCM under a key derived (HKDF-SHA256)
per computer from the first of ``RAM_PROFILE_STORE_KEYS``, a server setting that is never in
the store; the additional data binds a blob to its computer and profile generation (a blob
copied under another computer's name does not decrypt). The store alone — a leaked bucket, a
copied ``var/artifacts`` — reads no profile. Each blob starts with ``RAMPROF1`` and the key's
8-byte id, so a blob stored under an older key still decrypts while that key is listed.

A reset, a move to another account and ``DELETE /api/computers/{id}`` end the profile
generation; every stored copy of the computer's profile then goes (``profile_store_forget``):
on S3, every object version under its prefix when the bucket keeps versions.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import uuid
from typing import IO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.db import close_old_connections, transaction

from computers.artifacts import artifact_storage
from computers.files import storage_save
from computers.models import Computer, StoredProfile

logger = logging.getLogger(__name__)

MAGIC = b"RAMPROF1"
KEY_ID_BYTES = 8
NONCE_BYTES = 12
PREFIX = "profiles"


def _master_keys() -> list[bytes]:
    keys = []
    for entry in settings.RAM_PROFILE_STORE_KEYS:
        raw = base64.urlsafe_b64decode(entry.encode())
        if len(raw) != 32:
            raise ValueError("An entry of RAM_PROFILE_STORE_KEYS is not 32 url-safe base64-encoded bytes.")
        keys.append(raw)
    return keys


def _key_id(master: bytes) -> bytes:
    return hashlib.sha256(b"ram-profile-key-id:" + master).digest()[:KEY_ID_BYTES]


def _computer_key(master: bytes, computer_id: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"ram-profile:" + computer_id.encode()).derive(
        master
    )


def _additional_data(computer_id: str, profile_generation: uuid.UUID) -> bytes:
    return MAGIC + computer_id.encode() + b"\0" + str(profile_generation).encode()


def profile_encrypt(*, computer_id: str, profile_generation: uuid.UUID, data: bytes) -> bytes:
    master = _master_keys()[0]
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(_computer_key(master, computer_id)).encrypt(
        nonce, data, _additional_data(computer_id, profile_generation)
    )
    return MAGIC + _key_id(master) + nonce + sealed


def profile_decrypt(*, computer_id: str, profile_generation: uuid.UUID, blob: bytes) -> bytes | None:
    """The archive in ``blob``; None when no listed key opens it (another key, another computer, altered)."""
    head = len(MAGIC) + KEY_ID_BYTES
    if not blob.startswith(MAGIC) or len(blob) < head + NONCE_BYTES + 16:
        return None
    key_id, nonce, sealed = blob[len(MAGIC) : head], blob[head : head + NONCE_BYTES], blob[head + NONCE_BYTES :]
    for master in _master_keys():
        if _key_id(master) != key_id:
            continue
        try:
            return AESGCM(_computer_key(master, computer_id)).decrypt(
                nonce, sealed, _additional_data(computer_id, profile_generation)
            )
        except InvalidTag:
            return None
    return None


def profile_store(
    *, computer_id: str, generation: uuid.UUID, profile_generation: uuid.UUID, stream: IO[bytes], size: int, sha256: str
) -> bool:
    """Keep the packed profile an executor sent at its clean stop; whether it was kept.

    Kept only when it is exactly ``size`` bytes with this SHA-256, within
    ``RAM_PROFILE_STORE_MAX_BYTES``, and sent by the computer's current executor generation for
    its current profile generation (a reset or a move meanwhile, a deleted computer, an executor
    another one replaced: nothing is kept). The stored profile it replaces is deleted."""
    if size > settings.RAM_PROFILE_STORE_MAX_BYTES:
        return False
    data = stream.read(size + 1)
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
        return False
    close_old_connections()
    blob = profile_encrypt(computer_id=computer_id, profile_generation=profile_generation, data=data)
    storage = artifact_storage()
    name = storage_save(storage, f"{PREFIX}/{computer_id}/{uuid.uuid4()}.bin", ContentFile(blob))
    old_name = ""
    try:
        with transaction.atomic():
            current = (
                Computer.objects.select_for_update()
                .filter(
                    pk=computer_id,
                    deleted_at__isnull=True,
                    generation=generation,
                    profile_generation=profile_generation,
                )
                .values_list("pk", flat=True)
                .first()
            )
            if current is None:
                kept = False
            else:
                kept = True
                previous = StoredProfile.objects.filter(computer_id=computer_id).first()
                old_name = previous.storage_name if previous is not None else ""
                StoredProfile.objects.update_or_create(
                    computer_id=computer_id,
                    defaults={
                        "profile_generation": profile_generation,
                        "generation": generation,
                        "storage_name": name,
                        "sha256": hashlib.sha256(blob).hexdigest(),
                        "size": len(blob),
                    },
                )
    except Exception:
        _delete_quietly(storage, name)
        raise
    if not kept:
        _delete_quietly(storage, name)
    elif old_name:
        _delete_quietly(storage, old_name)
    return kept


def profile_load(*, computer_id: str, profile_generation: uuid.UUID) -> bytes | None:
    """The decrypted archive of the computer's stored profile when it is of ``profile_generation``,
    the computer's current one (None otherwise, or when the stored bytes are not what was stored)."""
    close_old_connections()
    stored = StoredProfile.objects.filter(
        computer_id=computer_id,
        profile_generation=profile_generation,
        computer__profile_generation=profile_generation,
        computer__deleted_at__isnull=True,
    ).first()
    if stored is None:
        return None
    try:
        with artifact_storage().open(stored.storage_name, "rb") as handle:
            blob = handle.read()
    except (OSError, FileNotFoundError):
        logger.warning("the stored profile of %s could not be read", computer_id)
        return None
    if hashlib.sha256(blob).hexdigest() != stored.sha256:
        logger.warning("the stored profile of %s is not what was stored", computer_id)
        return None
    return profile_decrypt(computer_id=computer_id, profile_generation=profile_generation, blob=blob)


def profile_store_forget(*, computer_id: str) -> None:
    """Delete every stored copy of the computer's profile: its row, every file under its prefix,
    and on a versioned S3 bucket every version of those objects."""
    close_old_connections()
    StoredProfile.objects.filter(computer_id=computer_id).delete()
    storage = artifact_storage()
    folder = f"{PREFIX}/{computer_id}"
    bucket = getattr(storage, "bucket", None)
    if bucket is not None:
        # django-storages' S3Storage: its boto3 bucket. Deleting every version (and delete marker)
        # under the prefix removes the objects themselves; an unversioned bucket has one each.
        key_prefix = storage._normalize_name(folder) + "/"  # type: ignore[attr-defined]  # its location prefixed
        bucket.object_versions.filter(Prefix=key_prefix).delete()
        return
    try:
        _, files = storage.listdir(folder)
    except FileNotFoundError:
        return
    for name in files:
        _delete_quietly(storage, f"{folder}/{name}")


def profile_store_forget_on_commit(*, computer_id: str) -> None:
    """``profile_store_forget`` once the transaction that ended the profile generation commits."""

    def forget() -> None:
        try:
            profile_store_forget(computer_id=computer_id)
        except Exception:  # noqa: BLE001 - restores are refused for the old generation regardless
            logger.warning("the stored profile of %s could not be deleted", computer_id, exc_info=True)

    transaction.on_commit(forget)


def _delete_quietly(storage: Storage, name: str) -> None:
    try:
        storage.delete(name)
    except Exception:  # noqa: BLE001 - a leftover under the prefix goes with the next forget
        logger.warning("a stored profile file could not be deleted")
