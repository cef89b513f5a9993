"""A computer's browser profile on disk: where it lives, who owns it, and its cookie journal.

Layout under ``RAM_BROWSER_PROFILE_DIR`` (one directory per computer, one per profile generation)::

    <root>/<computer_id>/<profile_generation>/chromium/   Chromium's user data dir (0700, the browser's user)
    <root>/<computer_id>/<profile_generation>/downloads/  the download area (0700, the browser's user)
    <root>/<computer_id>/<profile_generation>/cookies.json the cookie journal (0600, the executor's user)

Chromium writes local storage and IndexedDB itself, but commits cookies to disk only every
30 seconds and never keeps session cookies across a restart. The executor therefore keeps a
journal of the context's cookies (session cookies included), rewritten atomically whenever
they change, and puts them back when the browser starts: a login survives a restart, a crash
(``kill -9``) and an upgrade. The journal lives beside Chromium's directory, not inside it,
so the browser's own (unprivileged) user cannot replace it.

A profile generation that is not the computer's current one (a reset, a move to another
account) is deleted before the browser starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

JOURNAL = "cookies.json"
USER_DATA = "chromium"
DOWNLOADS = "downloads"
# The most cookies a journal holds (Chromium's own per-profile limit is 3300).
MAX_JOURNAL_COOKIES = 3300


@dataclass(frozen=True)
class Owner:
    """The computer's own unprivileged user the browser runs as, when the executor runs as root
    (see executor/sandbox.py)."""

    uid: int
    gid: int

    @classmethod
    def for_user(cls, name: str | None) -> Owner | None:
        if name is None or os.geteuid() != 0:
            return None
        entry = pwd.getpwnam(name)
        if entry.pw_uid == 0:
            return None
        return cls(entry.pw_uid, entry.pw_gid)


@dataclass(frozen=True)
class Profile:
    """One computer's profile directories; ``owner`` is the browser's user when it differs from ours."""

    root: Path
    computer_id: str
    owner: Owner | None = None

    @property
    def computer_dir(self) -> Path:
        return self.root / self.computer_id

    def generation_dir(self, generation: uuid.UUID) -> Path:
        return self.computer_dir / str(generation)

    def user_data_dir(self, generation: uuid.UUID) -> Path:
        return self.generation_dir(generation) / USER_DATA

    def downloads_dir(self, generation: uuid.UUID) -> Path:
        """The computer's download area: files land here, then become artifacts and are deleted."""
        return self.generation_dir(generation) / DOWNLOADS

    def journal(self, generation: uuid.UUID) -> Path:
        return self.generation_dir(generation) / JOURNAL

    def prepare(self, generation: uuid.UUID) -> Path:
        """Create the profile of ``generation`` (0700) and delete every other one; its user data dir."""
        # With a separate browser user the directories above its own are traversable but not listable.
        above = 0o711 if self.owner is not None else 0o700
        for directory in (self.root, self.computer_dir):
            directory.mkdir(mode=above, parents=True, exist_ok=True)
            directory.chmod(above)
        if self.owner is not None:
            _traversable_above(self.root)
        for other in self.computer_dir.iterdir():
            if other.name != str(generation):
                _remove(other)
        current = self.generation_dir(generation)
        current.mkdir(mode=above, exist_ok=True)
        current.chmod(above)
        user_data = self.user_data_dir(generation)
        for own in (user_data, self.downloads_dir(generation)):
            own.mkdir(mode=0o700, exist_ok=True)
            own.chmod(0o700)
            if self.owner is not None:
                _own_tree(own, self.owner)
        _keep_no_secrets(user_data, self.owner)
        return user_data

    def wipe(self, generation: uuid.UUID) -> None:
        """Delete one profile generation (cookies, storage, cache, the journal)."""
        _remove(self.generation_dir(generation))

    def journal_load(self, generation: uuid.UUID) -> list[dict[str, Any]]:
        """The journal's cookies that have not expired (session cookies included); [] when absent or unreadable."""
        path = self.journal(generation)
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            logger.warning("the cookie journal of %s could not be read; starting from Chromium's own", self.computer_id)
            return []
        if not isinstance(data, list):
            return []
        now = time.time()
        return [
            c
            for c in data[:MAX_JOURNAL_COOKIES]
            if isinstance(c, dict) and (c.get("expires", -1) in (-1, None) or float(c.get("expires", -1)) > now)
        ]

    def journal_save(self, generation: uuid.UUID, cookies: list[dict[str, Any]]) -> None:
        """Replace the journal atomically (a new 0600 file renamed over the old one)."""
        directory = self.generation_dir(generation)
        if not directory.is_dir():
            return  # wiped meanwhile: never recreate it
        descriptor, temporary = tempfile.mkstemp(prefix=".cookies-", dir=directory)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(cookies[:MAX_JOURNAL_COOKIES], handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.journal(generation))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _traversable_above(root: Path) -> None:
    """Let the browser's user reach ``root``: every directory above it that is ours and closed to
    others (``var/`` is created 0700, as is a test's temporary directory) gets the traverse bit
    only (``o+x``: a name inside is reachable, nothing is listable, and every file the processes
    keep there stays 0600). A closed directory we do not own cannot be opened: a clear error."""
    for directory in reversed(root.absolute().parents):
        mode = directory.stat()
        if mode.st_mode & 0o001:
            continue
        if mode.st_uid != os.geteuid():
            raise PermissionError(
                f"The browser's user cannot reach {root}: {directory} is closed to it; "
                "set RAM_BROWSER_PROFILE_DIR to a directory it can reach."
            )
        directory.chmod((mode.st_mode & 0o7777) | 0o001)
        logger.info("%s is now traversable (not listable) by the browser's user", directory)


# Chromium's per-profile preferences that would keep what is typed into forms: saved passwords
# (and the usernames it offers to save, "Login Data"), autocomplete and address/card autofill
# ("Web Data": ``username|alice@example.com``). Set off before every launch.
NO_SAVED_SECRETS: dict[str, Any] = {
    "credentials_enable_service": False,
    "profile": {"password_manager_enabled": False},
    "autofill": {"enabled": False, "profile_enabled": False, "credit_card_enabled": False},
}
# The databases those preferences keep empty, by name (under ``Default/``): saved passwords and
# the usernames Chromium offers to save, autocomplete and autofill. Never in a stored profile
# (executor/profile_store.py), even if a browser wrote one.
SECRET_FILES = frozenset(
    {
        "Login Data",
        "Login Data-journal",
        "Login Data For Account",
        "Login Data For Account-journal",
        "Web Data",
        "Web Data-journal",
    }
)
# Session restore writes every tab's history with its form state (what was typed into text
# fields) under ``Sessions/``. A plain file in its place keeps Chromium from creating it.
SESSIONS = "Sessions"


def _keep_no_secrets(user_data: Path, owner: Owner | None) -> None:
    """Write the preferences that keep credentials out of the profile, and block session files."""
    default = user_data / "Default"
    default.mkdir(mode=0o700, exist_ok=True)
    preferences = default / "Preferences"
    try:
        current = json.loads(preferences.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        current = {}
    if not isinstance(current, dict):
        current = {}
    for name, value in NO_SAVED_SECRETS.items():
        if isinstance(value, dict):
            section = current.get(name)
            current[name] = {**(section if isinstance(section, dict) else {}), **value}
        else:
            current[name] = value
    descriptor, temporary = tempfile.mkstemp(prefix=".preferences-", dir=default)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(current, handle, separators=(",", ":"))
    os.replace(temporary, preferences)
    sessions = default / SESSIONS
    if sessions.is_dir() and not sessions.is_symlink():
        shutil.rmtree(sessions, ignore_errors=True)
    if not sessions.exists():
        sessions.write_bytes(b"")
    sessions.chmod(0o400)
    if owner is not None:
        for path in (default, preferences):
            os.chown(path, owner.uid, owner.gid)
        # Owned by the executor's user, read-only: the browser's user can neither write nor replace it.
        os.chown(sessions, os.geteuid(), os.getegid())


def _own_tree(directory: Path, owner: Owner) -> None:
    """Give ``directory`` to the browser's user, and everything inside when it belonged to another
    (a profile from before each computer had its own user). Symbolic links are not followed."""
    if directory.stat().st_uid == owner.uid:
        return
    for parent, directories, files in os.walk(directory):
        for name in directories + files:
            os.chown(os.path.join(parent, name), owner.uid, owner.gid, follow_symlinks=False)
    os.chown(directory, owner.uid, owner.gid)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)
