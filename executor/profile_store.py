"""A computer's profile kept where every executor host can restore it (executor side).

At a clean stop (``SIGTERM``, ``stop()``; never after a browser failure) the executor packs the
profile generation it ran on into a gzip'd tar — Chromium's user data dir without its caches,
without the password and autofill databases (``executor.profile.SECRET_FILES``) and without the
session files it never keeps, plus the cookie journal — and sends it to the server
(``profile/store``), which encrypts it under a key the executor never sees and keeps it in the
artifact store (``computers/profiles.py``). When the browser starts, the last stored one is asked
for (``profile/restore``): the copy on this host's disk is used only when it is that very archive
(a marker beside it names the archive it was stored as or restored from) or when nothing is
stored; else the stored one replaces it before the browser opens it. So a computer that ran on
host A, then on B, then on A again starts from B's last clean stop, never from A's older copy.

A host killed with ``SIGKILL`` stores nothing: the logins made since that computer's last clean
stop are lost if the computer then starts on another host (or on a wiped directory); on the same
host they are kept while nothing newer was stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import tarfile
import uuid
from pathlib import Path

from executor.profile import JOURNAL, SECRET_FILES, SESSIONS, USER_DATA, Profile
from executor.server_link import LinkError, ServerLink

logger = logging.getLogger(__name__)

# Directories Chromium rebuilds by itself (caches, crash reports, downloaded components), by name
# wherever they are in the user data dir: never stored.
CACHE_DIRS = frozenset(
    {
        "Cache",
        "Code Cache",
        "GPUCache",
        "DawnCache",
        "DawnGraphiteCache",
        "DawnWebGPUCache",
        "GraphiteDawnCache",
        "GrShaderCache",
        "ShaderCache",
        "CacheStorage",  # Service Worker/CacheStorage
        "ScriptCache",  # Service Worker/ScriptCache
        "component_crx_cache",
        "extensions_crx_cache",
        "Crashpad",
        "BrowserMetrics",
        "Safe Browsing",
        "optimization_guide_model_store",
        "OnDeviceHeadSuggestModel",
    }
)
# A stored profile unpacks to at most this many bytes (the store keeps at most 1 GiB compressed,
# RAM_PROFILE_STORE_MAX_BYTES; a profile without its caches compresses a few times at most).
MAX_UNPACKED_BYTES = 4 * 1024 * 1024 * 1024
# Beside a generation's profile on a host's disk: the SHA-256 of the archive it was last stored as
# or restored from (never in an archive).
MARKER = ".stored-archive"
# Files that belong to one running browser (its lock and socket) or are secrets: never stored.
# The session-restore files (a ``Sessions`` directory too, above) hold what was typed into pages; so do
# the older single files of the same.
SESSION_FILES = frozenset({SESSIONS, "Current Session", "Last Session", "Current Tabs", "Last Tabs"})
SKIPPED_FILES = frozenset({"SingletonLock", "SingletonSocket", "SingletonCookie", "lockfile"}) | SESSION_FILES | SECRET_FILES


def pack(profile: Profile, generation: uuid.UUID) -> bytes | None:
    """The archive of ``generation``'s profile (paths relative to its directory); None when it is absent.

    Regular files and directories only (a symbolic link or a socket is skipped). Blocking: call it
    off the event loop, after the browser closed (it writes its cookies on the way out)."""
    base = profile.generation_dir(generation)
    user_data = profile.user_data_dir(generation)
    if not user_data.is_dir():
        return None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
        journal = profile.journal(generation)
        if journal.is_file() and not journal.is_symlink():
            archive.add(journal, arcname=JOURNAL, recursive=False)
        for parent, directories, files in os.walk(user_data):
            directories[:] = sorted(d for d in directories if d not in CACHE_DIRS and d != SESSIONS)
            here = Path(parent)
            archive.add(here, arcname=str(here.relative_to(base)), recursive=False)
            for name in sorted(files):
                path = here / name
                if name in SKIPPED_FILES or path.is_symlink() or not path.is_file():
                    continue
                try:
                    archive.add(path, arcname=str(path.relative_to(base)), recursive=False)
                except OSError:  # removed meanwhile
                    continue
    return buffer.getvalue()


def unpack(profile: Profile, generation: uuid.UUID, data: bytes) -> None:
    """Put a stored archive back as ``generation``'s profile (before ``Profile.prepare``, which
    then gives the browser's user its directory and deletes every other generation). Only regular
    files and directories inside the generation's directory are written."""
    base = profile.generation_dir(generation)
    above = 0o711 if profile.owner is not None else 0o700
    for directory in (profile.root, profile.computer_dir, base):
        directory.mkdir(mode=above, parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = [
            m
            for m in archive.getmembers()
            if (m.isfile() or m.isdir())
            and m.name.split("/")[0] in (USER_DATA, JOURNAL)
            and not ({*m.name.split("/")} & (CACHE_DIRS | SKIPPED_FILES))
        ]
        # An archive that would unpack to more than this is refused (whatever wrote it, it fills no disk).
        unpacked = sum(m.size for m in members)
        if unpacked > MAX_UNPACKED_BYTES:
            raise tarfile.TarError(f"the stored profile would unpack to {unpacked} bytes (at most {MAX_UNPACKED_BYTES})")
        # The "data" filter refuses absolute paths, "..", links and device files.
        archive.extractall(base, members=members, filter="data")
    journal = profile.journal(generation)
    if journal.exists():
        journal.chmod(0o600)


def _marker(profile: Profile, generation: uuid.UUID) -> Path:
    return profile.generation_dir(generation) / MARKER


def _mark(profile: Profile, generation: uuid.UUID, data: bytes) -> None:
    marker = _marker(profile, generation)
    marker.write_text(hashlib.sha256(data).hexdigest())
    marker.chmod(0o600)


def _marked(profile: Profile, generation: uuid.UUID, data: bytes) -> bool:
    """Whether the local copy is the one ``data`` archives (it was stored as or restored from it)."""
    try:
        return _marker(profile, generation).read_text().strip() == hashlib.sha256(data).hexdigest()
    except OSError:
        return False


async def store(server: ServerLink, profile: Profile, *, generation: uuid.UUID, profile_generation: uuid.UUID) -> bool:
    """Pack and send the profile at a clean stop; whether the server kept it (logged, never raised)."""
    try:
        data = await asyncio.to_thread(pack, profile, profile_generation)
        if data is None:
            return False
        kept = await server.profile_store(generation=generation, profile_generation=profile_generation, data=data)
        if kept:
            await asyncio.to_thread(_mark, profile, profile_generation, data)
    except (LinkError, OSError, tarfile.TarError) as exc:
        logger.warning("the profile of %s could not be stored: %s", profile.computer_id, exc)
        return False
    logger.info("profile of %s %s (%d bytes)", profile.computer_id, "stored" if kept else "not stored", len(data))
    return kept


async def restore(server: ServerLink, profile: Profile, *, profile_generation: uuid.UUID) -> bool:
    """The last stored profile of ``profile_generation`` in place of this host's copy, unless this
    copy is that very archive or nothing is stored; whether one was unpacked.

    The server cannot be asked: this host's copy, if any, is used (a new host starts signed out, as
    on a first start). A stored archive that cannot be unpacked leaves an empty profile."""
    local = profile.generation_dir(profile_generation).is_dir()
    try:
        data = await server.profile_restore(profile_generation=profile_generation)
    except LinkError as exc:
        logger.warning("the stored profile of %s could not be asked for: %s", profile.computer_id, exc)
        return False
    if data is None or (local and _marked(profile, profile_generation, data)):
        return False
    try:
        if local:  # an older copy (the computer ran elsewhere since): the stored one replaces it
            await asyncio.to_thread(profile.wipe, profile_generation)
        await asyncio.to_thread(unpack, profile, profile_generation, data)
        await asyncio.to_thread(_mark, profile, profile_generation, data)
    except (OSError, tarfile.TarError, EOFError) as exc:
        logger.warning("the stored profile of %s could not be restored: %s", profile.computer_id, exc)
        await asyncio.to_thread(profile.wipe, profile_generation)
        return False
    logger.info("profile of %s restored from the store", profile.computer_id)
    return True
