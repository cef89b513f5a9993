"""``manage.py run_executor``: registration, heartbeat and a new generation at every start; an
executor process with no database that still keeps captures and downloads and sets uploads."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as sync_connect

from accounts.models import Account
from computers import files
from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer, DiagnosticArtifact
from computers.selectors import computer_is_ready
from computers.services import computer_settings_set, executor_token_issue
from computers.tokens import private_interface_token
from executor.contracts import computer_settings
from executor.server_link import HEARTBEAT_SECONDS, HttpServerLink
from tests.support.executors import ROOT as ROOT
from tests.support.executors import start_executor_process
from tests.support.files_site import REPORT, serve_files_site
from tests.support.waits import eventually
from vault_bridge.credentials import VaultRefused, computer_proxy_credentials_read

# Each test starts the executor process and a live server it talks to.
pytestmark = pytest.mark.live


def _start(computer_id: str, origin: str, *, token: str | None = None, **env: str) -> subprocess.Popen[bytes]:
    return start_executor_process(computer_id, origin, token=token, **env)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_each_start_registers_a_new_generation_and_a_stop_marks_it_offline(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-cmd")
    generations = []
    for _ in range(2):
        process = _start("pc-cmd", live_origin)
        try:
            computer = eventually(
                lambda: Computer.objects.filter(pk="pc-cmd", status="ready").exclude(generation__in=generations).first(),
                40,
                interval=0.1,
            )
            assert computer.executor_address.startswith("127.0.0.1:")
            assert computer.last_heartbeat_at is not None
            status = ExecutorClient(computer).status()
            assert status["generation"] == str(computer.generation) and status["control"] == "available"
            generations.append(computer.generation)
        finally:
            _stop(process)
        stopped = Computer.objects.get(pk="pc-cmd")
        assert stopped.status == "offline" and stopped.executor_address == ""
    assert generations[0] != generations[1]


def test_an_unknown_computer_is_refused(live_origin: str) -> None:
    process = _start("no-such-computer", live_origin)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and b"401" in err and b"executor token" in err


PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def _upload(account: Account, data: bytes, filename: str) -> DiagnosticArtifact:
    """A file a harness uploaded to ``account`` (``POST /api/artifacts``'s service)."""
    return files.upload_store(
        account=account, stream=io.BytesIO(data), filename=filename, content_type="application/pdf", length=len(data)
    )


def test_an_executor_with_no_database_keeps_captures_and_downloads_and_sets_uploads_through_the_server(
    live_origin: str, account: Account, make_account: Callable[..., Account], make_computer: Callable[..., Computer]
) -> None:
    """No DATABASE_URL, no artifacts storage and a var/ of its own: had the executor opened a
    database, Django's SQLite file would appear there. Everything goes through the internal
    endpoint: a masked capture, a download's bytes (checked and stored by the server for the
    computer's account) and an upload's bytes (read by the server for the run's own account only)."""
    make_computer(account, "pc-nodb")
    other = make_account("Other")
    mine = _upload(account, PDF, "statement.pdf")
    theirs = _upload(other, PDF.replace(b"1.4", b"1.7"), "their-statement.pdf")
    var = Path(tempfile.mkdtemp(prefix="ram-executor-var-"))
    var.chmod(0o711)  # the browser's own user traverses it to its profile
    with serve_files_site() as site:
        process = _start(
            "pc-nodb",
            live_origin,
            RAM_VAR_DIR=str(var),
            RAM_ARTIFACT_DIR=str(var / "no-artifacts-here"),
            RAM_BROWSER_EGRESS_ALLOW=site.origin.removeprefix("http://"),
        )
        try:
            computer = eventually(lambda: Computer.objects.filter(pk="pc-nodb", status="ready").first(), 40, interval=0.1)
            client = ExecutorClient(computer)
            lease = client.lease_acquire()
            try:
                shot = client.screenshot(lease)
                # A download: the page's file, sent by the executor, stored by the server.
                client.navigate(lease, site.origin + "/files")
                reply = client.action(lease, "click", selector="#report")
                if not reply.get("downloads"):  # still running when the click answered
                    reply = client.action(lease, "extract_text", selector="body")
                [download] = reply["downloads"]
                # An upload of the run's account, set on the page's file input and sent by the page.
                run = {"account_id": str(account.id), "computer_binding": str(computer.binding)}
                client.navigate(lease, site.origin + "/upload")
                set_file = client.action(lease, "upload", context=run, selector="#doc", artifact_id=str(mine.pk))
                client.click(lease, "#send")
                eventually(lambda: site.received, 20, interval=0.1)
                # Another account's upload is no upload of this run's account.
                with pytest.raises(ExecutorError) as foreign:
                    client.action(lease, "upload", context=run, selector="#doc", artifact_id=str(theirs.pk))
                # Nor does naming the other account help: the computer is not bound to it.
                claimed = {"account_id": str(other.id), "computer_binding": str(computer.binding)}
                with pytest.raises(ExecutorError) as unbound:
                    client.action(lease, "upload", context=claimed, selector="#doc", artifact_id=str(theirs.pk))
            finally:
                client.lease_release(lease)
            artifact = DiagnosticArtifact.objects.get(pk=shot["artifact_id"])
            assert artifact.computer_id == "pc-nodb" and artifact.account_id == account.pk
            assert artifact.kind == "screenshot" and artifact.data.startswith(b"\x89PNG")
            assert download == {
                "outcome": "stored",
                "artifact_id": download["artifact_id"],
                "filename": "report-2026-11.csv",
                "content_type": "text/csv",
                "size": len(REPORT),
                "sha256": hashlib.sha256(REPORT).hexdigest(),
            }
            stored = DiagnosticArtifact.objects.get(pk=download["artifact_id"])
            assert (stored.kind, stored.computer_id, stored.account_id) == ("download", "pc-nodb", account.pk)
            assert stored.data == REPORT
            assert set_file["artifact_id"] == str(mine.pk) and set_file["filename"] == "statement.pdf"
            assert site.received == [("statement.pdf", "application/pdf", PDF)]
            assert (foreign.value.reason, unbound.value.reason) == ("artifact_not_found", "binding_changed")
            # The heartbeat arrives over HTTP too.
            first_beat = computer.last_heartbeat_at
            eventually(lambda: Computer.objects.get(pk="pc-nodb").last_heartbeat_at > first_beat, 20, interval=0.1)
        finally:
            _stop(process)
            assert not list(var.rglob("*.sqlite3")), "the executor opened a database"
            assert not (var / "no-artifacts-here").exists(), "the executor wrote to the artifacts storage"
            subprocess.run(["rm", "-rf", str(var)], check=False)  # noqa: S603, S607 - the test's own directory
    assert process.returncode == 0
    assert Computer.objects.get(pk="pc-nodb").status == "offline"


def _internal(origin: str, computer_id: str, op: str, token: str | None, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(f"{origin}/internal/executors/{computer_id}/{op}", json=body, headers=headers, timeout=20)


def test_the_internal_endpoint_refuses_a_missing_unknown_or_other_computers_token(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-mine")
    make_computer(account, "pc-other")
    mine = executor_token_issue(computer_id="pc-mine")
    other = executor_token_issue(computer_id="pc-other")
    assert mine.startswith("ram_ex_") and Computer.objects.get(pk="pc-mine").executor_token_digest not in mine
    before = Computer.objects.get(pk="pc-mine")
    register = {"generation": str(uuid.uuid4()), "address": "127.0.0.1:9"}
    for token, status in [(None, 401), ("ram_ex_guessed", 401), ("ram_abc", 401), (mine + "x", 401), (other, 403)]:
        response = _internal(live_origin, "pc-mine", "register", token, register)
        assert response.status_code == status, (token, response.text)
        assert set(response.json()) == {"error"} and (not token or token not in response.text)
    # Nothing changed.
    after = Computer.objects.get(pk="pc-mine")
    assert (after.generation, after.status, after.executor_address) == (before.generation, "offline", "")
    # A rotated token stops working at once; the new one works, for its own computer only.
    rotated = executor_token_issue(computer_id="pc-mine")
    assert _internal(live_origin, "pc-mine", "register", mine, register).status_code == 401
    answer = _internal(live_origin, "pc-mine", "register", rotated, register)
    assert answer.status_code == 200 and answer.json()["found"] is True
    assert _internal(live_origin, "pc-mine", "no-such-op", rotated, {}).status_code == 404
    bad = _internal(live_origin, "pc-mine", "heartbeat", rotated, {"generation": "x", "extra": 1})
    assert bad.status_code == 400 and set(bad.json()) == {"error"}


def test_the_server_keeps_a_download_only_as_declared_and_within_its_limit(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    """``downloads``: the bytes are stored only when they are exactly the declared size and
    SHA-256, and never over RAM_DOWNLOAD_MAX_BYTES; a refusal stores nothing."""
    make_computer(account, "pc-dl")
    token = executor_token_issue(computer_id="pc-dl")
    settings.RAM_DOWNLOAD_MAX_BYTES = 100

    def send(data: bytes, **declared: Any) -> httpx.Response:
        meta = {"filename": "a.csv", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **declared}
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/octet-stream",
            "Ram-Download": json.dumps(meta),
        }
        url = f"{live_origin}/internal/executors/pc-dl/downloads"
        return httpx.post(url, content=data, headers=headers, timeout=20)

    invalid = [
        send(b"a,b\n1,2\n", sha256=hashlib.sha256(b"other").hexdigest()),  # another file's digest
        send(b"a,b\n1,2\n", size=7),  # a size that is not the body's
        send(b"a,b\n1,2\n", extra=1),  # the header's object is closed
    ]
    for response in invalid:
        assert response.status_code == 400 and set(response.json()) == {"error"}, response.text
    too_large = send(b"x" * 101)
    assert too_large.status_code == 200 and too_large.json() == {"stored": None}
    assert not DiagnosticArtifact.objects.filter(kind="download").exists()
    kept = send(b"x" * 100, filename="../../report\n.csv")
    assert kept.status_code == 200, kept.text
    stored = kept.json()["stored"]
    assert (stored["filename"], stored["size"]) == ("report.csv", 100)
    artifact = DiagnosticArtifact.objects.get(pk=stored["artifact_id"])
    assert (artifact.account_id, artifact.computer_id, artifact.data) == (account.pk, "pc-dl", b"x" * 100)


def test_an_executor_given_another_computers_token_never_registers(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-victim")
    make_computer(account, "pc-thief")
    thief = executor_token_issue(computer_id="pc-thief")
    process = _start("pc-victim", live_origin, token=thief)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and b"403" in err and thief.encode() not in err
    victim = Computer.objects.get(pk="pc-victim")
    assert victim.status == "offline" and victim.generation is None


def test_the_private_interface_takes_only_its_own_generations_token(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-private")
    process = _start("pc-private", live_origin)
    try:
        computer = eventually(lambda: Computer.objects.filter(pk="pc-private", status="ready").first(), 40, interval=0.1)
        assert ExecutorClient(computer).status()["generation"] == str(computer.generation)
        address = f"ws://{computer.executor_address}/"
        wrong = [
            private_interface_token(computer_id="pc-private", generation=uuid.uuid4()),  # another generation's
            private_interface_token(computer_id="pc-elsewhere", generation=computer.generation),  # another computer's
            executor_token_issue(computer_id="pc-private"),  # the executor's own token is not the private one
        ]
        for token in wrong:
            with pytest.raises(InvalidStatus) as refused:
                sync_connect(address, additional_headers={"Authorization": f"Bearer {token}"}, proxy=None).close()
            assert refused.value.response.status_code == 401
    finally:
        _stop(process)


def test_rotating_the_executor_token_stops_the_executor_that_holds_the_old_one(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-rotated")
    process = _start("pc-rotated", live_origin)
    try:
        eventually(lambda: Computer.objects.filter(pk="pc-rotated", status="ready").first(), 40, interval=0.1)
        executor_token_issue(computer_id="pc-rotated")
        assert Computer.objects.get(pk="pc-rotated").generation is None  # unavailable at once
        process.wait(timeout=40)  # its next heartbeat is refused: it stops by itself
    finally:
        _stop(process)
    assert Computer.objects.get(pk="pc-rotated").status == "offline"


def test_the_settings_come_over_the_link_with_a_one_use_grant_for_the_proxys_credentials_only(
    live_origin: str, vault: Any, account: Account, make_computer: Callable[..., Computer]
) -> None:
    """An executor process reads its computer's settings through the internal endpoint, and its
    upstream proxy's credentials with a grant that reads only them, once (it holds no Vault role)."""
    mine = make_computer(account, "pc-settings")
    other = make_computer(account, "pc-other")
    stored = {"locale": "pt-BR", "timezone": "Europe/Lisbon", "proxy": {"server": "http://proxy.example:3128"}}
    for computer, password in [(mine, "mine-secret"), (other, "other-secret")]:
        computer_settings_set(
            computer=computer, settings=computer_settings(stored), proxy_username="u", proxy_password=password
        )
    token = executor_token_issue(computer_id="pc-settings")
    link = HttpServerLink(base_url=live_origin, computer_id="pc-settings", token=token)

    launch = asyncio.run(link.launch_settings(proxy_grant=True))
    assert launch is not None and launch.valid and launch.account_id == str(account.id)
    assert computer_settings(launch.settings).model_dump(exclude_none=True) == {
        "locale": "pt-BR",
        "timezone": "Europe/Lisbon",
        "proxy": {"server": "http://proxy.example:3128", "credentials": True},
    }
    assert "mine-secret" not in repr(launch) and launch.proxy_grant
    with pytest.raises(VaultRefused):  # another computer's credentials: not with this grant
        computer_proxy_credentials_read(account_id=account.id, computer_id="pc-other", grant=launch.proxy_grant)
    launch = asyncio.run(link.launch_settings(proxy_grant=True))
    assert launch is not None
    read = computer_proxy_credentials_read(account_id=account.id, computer_id="pc-settings", grant=launch.proxy_grant)
    assert read == ("u", "mine-secret")
    with pytest.raises(VaultRefused):  # used once
        computer_proxy_credentials_read(account_id=account.id, computer_id="pc-settings", grant=launch.proxy_grant)
    # Not asked (a browser whose network is not RAM's): no grant.
    launch = asyncio.run(link.launch_settings(proxy_grant=False))
    assert launch is not None and launch.proxy_grant == ""
    # Stored settings that no longer pass the checks: refused, without their content.
    Computer.objects.filter(pk="pc-settings").update(browser_settings={"locale": "not a locale!"})
    launch = asyncio.run(link.launch_settings(proxy_grant=True))
    assert launch is not None and not launch.valid and launch.settings == {} and launch.proxy_grant == ""


def test_a_live_executor_stays_ready_and_a_killed_one_reads_unavailable_within_two_heartbeats(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], settings: Any
) -> None:
    """Heartbeats come from a thread of their own every 5 s; the server calls an executor silent
    for two of them (RAM_EXECUTOR_STALE_SECONDS, default 10) unavailable."""
    settings.RAM_EXECUTOR_STALE_SECONDS = 2 * HEARTBEAT_SECONDS
    make_computer(account, "pc-beats")
    process = start_executor_process("pc-beats", live_origin, new_session=True)
    try:
        eventually(lambda: Computer.objects.filter(pk="pc-beats", status="ready").first(), 40, interval=0.1)
        until = time.monotonic() + 3 * HEARTBEAT_SECONDS
        while time.monotonic() < until:  # longer than the threshold: only heartbeats keep it ready
            assert computer_is_ready(Computer.objects.get(pk="pc-beats"))
            time.sleep(0.5)
        os.killpg(process.pid, signal.SIGKILL)  # the executor and its browser, without a word
        killed = time.monotonic()
        eventually(lambda: not computer_is_ready(Computer.objects.get(pk="pc-beats")), 20, interval=0.1)
        assert time.monotonic() - killed <= 2 * HEARTBEAT_SECONDS + 0.5
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
