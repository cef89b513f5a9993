"""Backup, wipe, restore against the real parts: PostgreSQL (pg_dump and
pg_restore), an embedded-style OpenBao with raft storage (snapshot through its
API), the local keys; then the paused run is continued over HTTP and its stored
credential signs in with browser_login on a real executor and portal."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection

from accounts.models import Account
from accounts.services import PASSWORD, account_top_up
from runs import loop
from runs.models import Run
from runs.services import credential_request_save, intervention_open
from tests.support.live import free_port
from tests.support.portals import PASSWORD as PORTAL_PASSWORD
from tests.support.portals import USERNAME as PORTAL_USERNAME
from tests.support.portals import Portal, serve_portal
from tests.support.screen import db
from tests.support.tiers import live
from tests.support.vault import VaultServer
from vault_bridge import embedded


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


class EmbeddedVault:
    """The embedded default's OpenBao (raft storage under var/), started as ``make run`` does."""

    def __init__(self, var_dir: Path, port: int) -> None:
        self.var_dir, self.port = var_dir, port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = embedded.start(self.var_dir, self.port)
        root = embedded.initialise_and_unseal(self.var_dir, self.port, "ram")
        embedded.configure_roles(self.var_dir, self.port, "ram", root)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def embedded_vault(tmp_path: Path, settings: Any, executor: Any) -> Iterator[EmbeddedVault]:
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    settings.VAR_DIR = var_dir
    settings.VAULT_ADDR = ""
    settings.VAULT_KV_MOUNT = "ram"
    settings.RAM_OPENBAO_PORT = free_port()
    # The running executor's token and a secret key, kept under var/ like the embedded default's.
    (var_dir / "executor.token").write_text(executor.token)
    (var_dir / "secret_key").write_text("k" * 60)
    vault = EmbeddedVault(var_dir, settings.RAM_OPENBAO_PORT)
    vault.start()
    try:
        yield vault
    finally:
        vault.stop()


def drive(run_id: Any) -> Run:
    for _ in range(20):
        if not loop.run_step_advance(run_id=run_id):
            break
    return Run.objects.get(pk=run_id)


def wipe_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE")
        cursor.execute("CREATE SCHEMA public")


async def test_back_up_wipe_restore_then_the_paused_run_continues_and_logs_in(
    screen: Any,
    live_origin: str,
    embedded_vault: EmbeddedVault,
    account: Account,
    runner_key: str,
    make_user: Callable[..., User],
    portal: Portal,
    tmp_path: Path,
) -> None:
    person = await db(lambda: make_user(account, "ana", "correct horse battery"))
    await db(lambda: account_top_up(account=account, microcredits=1_000_000, actor="test"))
    steps = [
        {"tool": "navigate", "arguments": {"url": f"{portal.origin}/login/standard"}},
        {"tool": "request_credential", "arguments": {"portal_origin": portal.origin, "label": "Acme", "credential_id": "acme"}},
        {"tool": "browser_login", "arguments": {"credentialId": "acme"}},
        {"tool": "finish", "arguments": {"output": "signed in"}},
    ]
    auth = {"Authorization": f"Bearer {runner_key}"}
    async with httpx.AsyncClient(base_url=live_origin, timeout=60) as client:
        created = await client.post(
            "/api/runs", json={"task": {"goal": "Sign in", "steps": steps}, "computer_id": "pc-1", "max_model_calls": 10}, headers=auth
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]
        assert (await db(lambda: drive(run_id))).pause_kind == "credential"

        # The person saves the credential in the vault with the one-time invite.
        location = await db(lambda: intervention_open(run_id=run_id, user=person, auth_method=PASSWORD))
        invite = location.split("#invite=", 1)[1]
        await db(
            lambda: credential_request_save(
                run_id=run_id, user=person, auth_method=PASSWORD, invite=invite,
                username=PORTAL_USERNAME, password=PORTAL_PASSWORD, totp_secret=None,
            )
        )

        archive = tmp_path / "backups" / "ram.tar.gz"
        out = io.StringIO()
        await db(lambda: call_command("backup", output=str(archive), stdout=out))
        assert json.loads(out.getvalue())["vault"] == {"included": True, "kind": "embedded-openbao-raft"}
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
            manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        assert names == {"manifest.json", "database", "openbao.snap", "openbao-init.json", "var/secret_key", "var/executor.token"}
        assert manifest["database"]["engine"] == "postgresql"
        assert manifest["counts"]["runs"] == 1 and manifest["counts"]["credential_requests"] == 1
        assert manifest["migrations"]["runs"]
        for secret in (PORTAL_PASSWORD, runner_key):
            assert secret.encode() not in archive.read_bytes()  # compressed, and the credential lives in the snapshot

        # The machine is lost: OpenBao and its data, the local keys, every table.
        embedded_vault.stop()
        shutil.rmtree(embedded_vault.var_dir)
        embedded_vault.var_dir.mkdir()
        await db(wipe_database)
        assert (await client.get(f"/api/runs/{run_id}", headers=auth)).status_code == 500

        out = io.StringIO()
        await db(lambda: call_command("restore", str(archive), stdout=out))
        restored = json.loads(out.getvalue())
        assert restored["vault_restored"] is True and restored["counts"]["runs"] == 1
        assert (embedded_vault.var_dir / "executor.token").read_text() == screen.token
        assert stat.S_IMODE((embedded_vault.var_dir / "secret_key").stat().st_mode) == 0o600
        assert not embedded.is_listening(embedded_vault.port)  # restore leaves nothing running

        # RAM starts again as `make run` does: OpenBao unsealed with the restored key, fresh role tokens.
        embedded_vault.start()
        descriptor = await client.get(f"/api/runs/{run_id}/intervention-descriptor", headers=auth)
        assert descriptor.status_code == 200, descriptor.text
        assert descriptor.json()["intervention"]["state"] == "credential_saved"
        continued = await client.post(f"/api/runs/{run_id}/continue", json={"idempotency_key": "after-restore"}, headers=auth)
        assert continued.status_code == 201, continued.text
        finished = await db(lambda: drive(continued.json()["run"]["id"]))

    assert finished.status == "succeeded", finished.result
    login = await db(lambda: finished.steps.get(tool="browser_login").result)
    assert login == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert len(portal.posts) == 1


def test_restore_refuses_a_used_database_and_an_altered_archive(
    transactional_db: None, vault: VaultServer, account: Account, tmp_path: Path, settings: Any
) -> None:
    settings.VAR_DIR = tmp_path / "var"
    archive = tmp_path / "ram.tar.gz"
    call_command("backup", output=str(archive), stdout=io.StringIO())
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert manifest["vault"]["included"] is False  # an external Vault keeps its own snapshots
    with pytest.raises(CommandError, match="already exists|exists; choose a new file name"):
        call_command("backup", output=str(archive), stdout=io.StringIO())

    with pytest.raises(CommandError, match="The database is not empty"):
        call_command("restore", str(archive), stdout=io.StringIO())

    altered = tmp_path / "altered.tar.gz"
    with tarfile.open(archive) as source, tarfile.open(altered, "w:gz") as target:
        for info in source.getmembers():
            data = source.extractfile(info).read()  # type: ignore[union-attr]
            if info.name == "database":
                data = data[:-1] + bytes([data[-1] ^ 1])
            target.addfile(info, io.BytesIO(data))
    with pytest.raises(CommandError, match="database does not match its checksum"):
        call_command("restore", str(altered), "--replace", stdout=io.StringIO())
    assert Account.objects.filter(pk=account.pk).exists()  # refused before anything was written

    # --replace restores over the existing state.
    Account.objects.create(name="After the backup")
    call_command("restore", str(archive), "--replace", stdout=io.StringIO())
    assert list(Account.objects.values_list("name", flat=True)) == ["Acme"]


@pytest.mark.live
def test_sqlite_backup_and_restore_through_the_commands(tmp_path: Path, openbao: VaultServer) -> None:
    """The embedded default's database: SQLite's online backup, restored into a fresh file."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'ram.sqlite3'}",
        "RAM_VAR_DIR": str(tmp_path / "var"),
        "VAULT_ADDR": openbao.addr,
        "VAULT_TOKEN": openbao.server_token,
    }
    env.pop("REDIS_URL", None)

    def manage(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "manage.py", *args], env=env, check=True, capture_output=True, text=True, cwd=Path(__file__).parents[2]
        ).stdout

    manage("migrate", "--noinput", "-v0")
    manage("shell", "-c", "from accounts.models import Account; Account.objects.create(name='Lite')")
    archive = tmp_path / "lite.tar.gz"
    assert json.loads(manage("backup", "--output", str(archive)))["counts"] == {
        "runs": 0, "credential_requests": 0, "diagnostic_artifacts": 0
    }
    (tmp_path / "ram.sqlite3").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"ram.sqlite3{suffix}").unlink(missing_ok=True)
    manage("restore", str(archive))
    names = manage("shell", "-c", "from accounts.models import Account; print(list(Account.objects.values_list('name', flat=True)))")
    assert names.strip().splitlines()[-1] == "['Lite']"
