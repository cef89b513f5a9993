"""``manage.py backup`` and ``manage.py restore``: one archive with everything
needed to bring RAM back on a fresh machine.

The archive (a gzip'd tar, written 0600) holds:

- ``database``: a PostgreSQL custom-format ``pg_dump`` (consistent: one
  snapshot transaction), or SQLite's online backup of the file;
- ``openbao.snap``: the embedded OpenBao's raft snapshot, taken through its API,
  with ``openbao-init.json`` (its unseal key and root token: without them the
  snapshot cannot be opened). An external Vault (``VAULT_ADDR``) is backed up
  with its own snapshots; the manifest says so;
- ``var/``: the embedded default's local keys (``secret_key``, the executors'
  token, the demo passwords, the key of webhook secrets) — diagnostic artifacts live in the database;
  token, the demo passwords). Masked captures (artifacts) are short-lived images in the
  artifacts storage (``var/artifacts`` or an S3 bucket) and are not archived: their rows are
  in the database, and a missing image answers 404;
- ``manifest.json``: format, creation time, what is included, each member's
  SHA-256, the applied migrations, and counts to check a restore against.

The archive holds secrets (the Vault unseal key, the Django secret key): keep
it like one. Restore refuses to write over existing state unless asked to
replace it, checks every member against the manifest first, and then runs
nothing else: ``manage.py migrate`` brings an older backup to the new code.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, connections
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from computers.models import DiagnosticArtifact
from runs.models import CredentialRequest, Run
from vault_bridge import embedded

FORMAT = "ram-backup"
VERSION = 1
VAR_FILES = ("secret_key", "executor.token", "demo_passwords.json", "webhook_key")
DATABASE_MEMBER = "database"
SNAPSHOT_MEMBER = "openbao.snap"
INIT_MEMBER = "openbao-init.json"


class BackupError(Exception):
    """The backup or restore could not be done; nothing was changed (for restore: before any write)."""


@dataclass(frozen=True)
class Restored:
    manifest: dict[str, Any]
    vault_restored: bool


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _engine() -> str:
    vendor = connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        raise BackupError(f"Backups support PostgreSQL and SQLite, not {vendor}.")
    return vendor


def _pg_env_args() -> tuple[dict[str, str], list[str]]:
    """libpq connection for pg_dump/pg_restore: the password in the environment, never on the command line."""
    db = connection.settings_dict
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    args = ["--dbname", str(db["NAME"])]
    if db.get("HOST"):
        args += ["--host", str(db["HOST"])]
    if db.get("PORT"):
        args += ["--port", str(db["PORT"])]
    if db.get("USER"):
        args += ["--username", str(db["USER"])]
    return env, args


def _run(argv: list[str], env: dict[str, str], what: str) -> bytes:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, check=False, timeout=3600)  # noqa: S603 - fixed argv
    except FileNotFoundError:
        raise BackupError(f"{argv[0]} was not found; install the PostgreSQL client tools matching the server.") from None
    if done.returncode != 0:
        # pg_* messages name objects and hosts, never the password (it is only in the environment).
        raise BackupError(f"{what} failed: {done.stderr.decode(errors='replace').strip()[-500:]}")
    return done.stdout


def _dump_database(folder: Path) -> Path:
    target = folder / DATABASE_MEMBER
    if _engine() == "postgresql":
        env, args = _pg_env_args()
        _run(["pg_dump", "--format=custom", "--no-owner", "--no-privileges", "--file", str(target), *args], env, "pg_dump")
    else:
        source = sqlite3.connect(str(connection.settings_dict["NAME"]))
        copy = sqlite3.connect(str(target))
        try:
            source.backup(copy)  # SQLite's online backup: consistent while others write
        finally:
            copy.close()
            source.close()
    return target


def _migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder.Migration.objects.order_by("app", "name").values_list("app", "name"):
        latest[app] = name
    return latest


def _embedded_vault() -> bool:
    return not settings.VAULT_ADDR


def backup_create(*, destination: Path) -> dict[str, Any]:
    """Write the archive to ``destination`` (0600); returns its manifest."""
    if destination.exists():
        raise BackupError(f"{destination} exists; choose a new file name.")
    members: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        members[DATABASE_MEMBER] = _dump_database(Path(tmp)).read_bytes()
    vault: dict[str, Any]
    if _embedded_vault():
        try:
            members[SNAPSHOT_MEMBER] = embedded.raft_snapshot_save(settings.VAR_DIR, settings.RAM_OPENBAO_PORT)
        except (OSError, RuntimeError, ValueError) as exc:
            raise BackupError(f"The embedded OpenBao could not be snapshotted ({type(exc).__name__}); is RAM running?") from None
        members[INIT_MEMBER] = embedded.init_file(settings.VAR_DIR).read_bytes()
        vault = {"included": True, "kind": "embedded-openbao-raft"}
    else:
        vault = {"included": False, "reason": "External Vault (VAULT_ADDR): back it up with its own raft snapshots."}
    for name in VAR_FILES:
        path = Path(settings.VAR_DIR) / name
        if path.exists():
            members[f"var/{name}"] = path.read_bytes()
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": timezone.now().isoformat(),
        "database": {"engine": _engine()},
        "vault": vault,
        "members": {name: _sha256(data) for name, data in sorted(members.items())},
        "migrations": _migrations(),
        "counts": {
            "runs": Run.objects.count(),
            "credential_requests": CredentialRequest.objects.count(),
            "diagnostic_artifacts": DiagnosticArtifact.objects.count(),
        },
    }
    members["manifest.json"] = json.dumps(manifest, indent=2, sort_keys=True).encode()
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600
            info.mtime = int(timezone.now().timestamp())
            archive.addfile(info, io.BytesIO(data))
    return manifest


def _read(archive_path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Every member, checked against the manifest; unknown or tampered members are refused."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(archive_path, mode="r:gz") as archive:
            for info in archive.getmembers():
                if not info.isfile():
                    raise BackupError(f"Unexpected entry {info.name!r} in the archive.")
                handle = archive.extractfile(info)
                if handle is None:
                    raise BackupError(f"Unreadable entry {info.name!r} in the archive.")
                members[info.name] = handle.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BackupError(f"{archive_path} is not a readable backup ({type(exc).__name__}).") from None
    try:
        manifest = json.loads(members.pop("manifest.json"))
    except (KeyError, ValueError):
        raise BackupError("The archive has no valid manifest.json.") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise BackupError("The archive is not a RAM backup of a version this code reads.")
    expected = manifest.get("members", {})
    if set(expected) != set(members):
        raise BackupError("The archive's members do not match its manifest.")
    for name, data in members.items():
        if _sha256(data) != expected[name]:
            raise BackupError(f"{name} does not match its checksum in the manifest: the archive was altered.")
    allowed = {DATABASE_MEMBER, SNAPSHOT_MEMBER, INIT_MEMBER, *(f"var/{n}" for n in VAR_FILES)}
    if not set(members) <= allowed:
        raise BackupError("The archive holds members this code does not restore.")
    return manifest, members


def _database_is_empty() -> bool:
    with connection.cursor() as cursor:
        return not connection.introspection.table_names(cursor)


def _database_wipe() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA public CASCADE")
            cursor.execute("CREATE SCHEMA public")
    else:
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f"DROP TABLE IF EXISTS {connection.ops.quote_name(table)}")  # noqa: S608 - catalog names


def _database_restore(engine: str, data: bytes) -> None:
    if engine != _engine():
        raise BackupError(f"The backup is of a {engine} database; this server uses {_engine()}.")
    if engine == "postgresql":
        env, args = _pg_env_args()
        with tempfile.NamedTemporaryFile(suffix=".dump") as dump:
            dump.write(data)
            dump.flush()
            _run(
                ["pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", *args, dump.name],
                env,
                "pg_restore",
            )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            copy_path = Path(tmp) / "restore.sqlite3"
            copy_path.write_bytes(data)
            source = sqlite3.connect(str(copy_path))
            target = sqlite3.connect(str(connection.settings_dict["NAME"]))
            try:
                source.backup(target)
            finally:
                target.close()
                source.close()
    connections.close_all()


def backup_restore(*, archive_path: Path, replace: bool = False) -> Restored:
    """Bring this machine to the archive's state: database, embedded OpenBao, local keys.

    RAM's processes must be stopped. Without ``replace`` an existing database or
    embedded OpenBao is refused; with it, they are wiped first.
    """
    manifest, members = _read(archive_path)
    engine = str(manifest["database"]["engine"])
    if engine != _engine():
        raise BackupError(f"The backup is of a {engine} database; this server uses {_engine()}.")
    restore_vault = SNAPSHOT_MEMBER in members
    openbao_dir = Path(settings.VAR_DIR) / "openbao"
    if restore_vault and not _embedded_vault():
        raise BackupError("The backup holds an embedded OpenBao, but VAULT_ADDR points at an external Vault.")
    if not replace:
        if not _database_is_empty():
            raise BackupError("The database is not empty; restore into a fresh one, or pass --replace.")
        if restore_vault and embedded.init_file(settings.VAR_DIR).exists():
            raise BackupError(f"{openbao_dir} holds an OpenBao already; remove it, or pass --replace.")
    if restore_vault and embedded.is_listening(settings.RAM_OPENBAO_PORT):
        raise BackupError("The embedded OpenBao is running; stop RAM before restoring.")

    if replace:
        _database_wipe()
    _database_restore(engine, members[DATABASE_MEMBER])
    for name in VAR_FILES:
        data = members.get(f"var/{name}")
        if data is not None:
            _write_private(Path(settings.VAR_DIR) / name, data)
    if restore_vault:
        shutil.rmtree(openbao_dir, ignore_errors=True)
        child = embedded.start(settings.VAR_DIR, settings.RAM_OPENBAO_PORT)
        try:
            embedded.raft_snapshot_restore(
                settings.VAR_DIR, settings.RAM_OPENBAO_PORT, members[SNAPSHOT_MEMBER], members[INIT_MEMBER].decode()
            )
        finally:
            if child is not None:
                child.terminate()
                child.wait(timeout=30)
    return Restored(manifest=manifest, vault_restored=restore_vault)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)
