"""A computer's browser profile persists: a portal login survives killing the executor
(every process of it, Chromium included) and starting it again; a reset and a move to
another account wipe it. The executor runs as ``manage.py run_executor`` would in
production (a subprocess, its browser as the unprivileged browser user when root)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accounts.models import Account
from computers.client import ExecutorClient
from computers.models import Computer, DiagnosticArtifact
from computers.services import computer_profile_reset, computer_reassign
from executor.profile import DOWNLOADS, JOURNAL, USER_DATA
from tests.support.executors import start_executor_process
from tests.support.files_site import REPORT, FilesSite, serve_files_site
from tests.support.site import Site, serve_site
from tests.support.waits import eventually

pytestmark = pytest.mark.live


@pytest.fixture
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture
def profiles() -> Iterator[Path]:
    # Closed to others (0700), as var/ is: the executor opens it for the browser's user to traverse.
    root = Path(tempfile.mkdtemp(prefix="ram-profiles-"))
    yield root / "profiles"
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607 - a test's own directory


def start(computer_id: str, profiles: Path, site: Site | FilesSite, origin: str) -> subprocess.Popen[bytes]:
    extra = {
        "RAM_BROWSER_PROFILE_DIR": str(profiles),
        "RAM_BROWSER_EGRESS_ALLOW": site.origin.removeprefix("http://"),
    }
    return start_executor_process(
        computer_id,
        origin,
        stderr=subprocess.DEVNULL,
        new_session=True,  # its own process group: the crash below takes Chromium with it
        **extra,
    )


def crash(process: subprocess.Popen[bytes]) -> None:
    """kill -9 of the executor and every process it started (Playwright's driver, Chromium)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=20)


def stop(process: subprocess.Popen[bytes]) -> None:
    with_group = process.poll() is None
    if with_group:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ready(computer_id: str, *, not_generation: Any = None) -> Computer:
    return eventually(
        lambda: Computer.objects.filter(pk=computer_id, status="ready").exclude(generation=not_generation).first(),
        60,
        interval=0.1,
    )


def portal_heading(computer: Computer, site: Site) -> str:
    client = ExecutorClient(computer)
    lease = client.lease_acquire()
    try:
        client.navigate(lease, site.origin + "/")
        return client.extract_text(lease, "h1")
    finally:
        client.lease_release(lease)


def sign_in(computer: Computer, site: Site, name: str) -> None:
    client = ExecutorClient(computer)
    lease = client.lease_acquire()
    try:
        client.navigate(lease, site.origin + "/")
        client.type(lease, "#name", name)
        client.click(lease, "#sign-in")
        client.wait_for(lease, "#connect", timeout_ms=5000)
    finally:
        client.lease_release(lease)


def test_a_login_survives_killing_the_executor_and_a_reset_signs_out(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], site: Site, profiles: Path
) -> None:
    make_computer(account, "pc-home")
    process = start("pc-home", profiles, site, live_origin)
    try:
        computer = ready("pc-home")
        assert portal_heading(computer, site) == "Portal sign-in"
        sign_in(computer, site, "Ana")
        assert portal_heading(computer, site) == "Signed in as Ana"

        generation_dir = profiles / "pc-home" / str(computer.profile_generation)
        user_data = generation_dir / USER_DATA
        assert stat.S_IMODE(user_data.stat().st_mode) == 0o700
        if os.geteuid() == 0:  # the browser runs as its own user, which owns its profile
            assert user_data.stat().st_uid != 0
            # The closed directory above became traversable by others, never listable.
            assert stat.S_IMODE(profiles.parent.stat().st_mode) == 0o701
        # The session cookie (no expiry: Chromium itself would drop it) reaches the journal within a second or two.
        journal = generation_dir / JOURNAL
        eventually(lambda: journal.exists() and "sid" in journal.read_text(), 10, interval=0.1)
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600

        crash(process)
        process = start("pc-home", profiles, site, live_origin)
        restarted = ready("pc-home", not_generation=computer.generation)
        assert restarted.generation != computer.generation
        assert portal_heading(restarted, site) == "Signed in as Ana"

        # Reset: the executor wipes the profile and registers a new generation, signed out everywhere.
        computer_profile_reset(computer=restarted)
        fresh = ready("pc-home", not_generation=restarted.generation)
        assert fresh.profile_generation != restarted.profile_generation
        assert portal_heading(fresh, site) == "Portal sign-in"
        assert not generation_dir.exists()
        assert [p.name for p in (profiles / "pc-home").iterdir()] == [str(fresh.profile_generation)]
    finally:
        stop(process)


def test_a_move_while_the_executor_is_down_never_loads_the_old_owners_profile(
    live_origin: str,
    account: Account,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    site: Site,
    profiles: Path,
) -> None:
    make_computer(account, "pc-moved")
    process = start("pc-moved", profiles, site, live_origin)
    try:
        computer = ready("pc-moved")
        sign_in(computer, site, "Ana")
        journal = profiles / "pc-moved" / str(computer.profile_generation) / JOURNAL
        eventually(lambda: journal.exists() and "sid" in journal.read_text(), 10, interval=0.1)
        stop(process)
        computer_reassign(computer_id="pc-moved", account=make_account("Newcomer"))
        process = start("pc-moved", profiles, site, live_origin)
        moved = ready("pc-moved", not_generation=computer.generation)
        assert portal_heading(moved, site) == "Portal sign-in"
        assert not journal.parent.exists()
    finally:
        stop(process)


def test_downloads_land_in_the_computers_download_area_and_leave_it_as_artifacts(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], profiles: Path
) -> None:
    make_computer(account, "pc-files")
    with serve_files_site() as files:
        # The executor has no database: the finished download's bytes go to the server, which keeps them.
        process = start("pc-files", profiles, files, live_origin)
        try:
            computer = ready("pc-files")
            area = profiles / "pc-files" / str(computer.profile_generation) / DOWNLOADS
            assert stat.S_IMODE(area.stat().st_mode) == 0o700
            if os.geteuid() == 0:  # the browser's own user writes there
                assert area.stat().st_uid != 0
            client = ExecutorClient(computer)
            lease = client.lease_acquire()
            try:
                client.navigate(lease, files.origin + "/files")
                # A download that is still running is a file in the download area.
                client.action(lease, "click", selector="#slow")
                eventually(lambda: any(area.iterdir()), 20, interval=0.1)
                files.release.set()  # the server stops short: that download fails
                reply = client.action(lease, "click", selector="#report")
                if not any(d["outcome"] == "stored" for d in reply.get("downloads", [])):
                    reply = client.action(lease, "extract_text", selector="body")
            finally:
                client.lease_release(lease)
            stored = [d for d in reply["downloads"] if d["outcome"] == "stored"]
            assert [d["filename"] for d in stored] == ["report-2026-11.csv"]
            artifact = DiagnosticArtifact.objects.get(pk=stored[0]["artifact_id"])
            assert (artifact.kind, artifact.account_id, artifact.data) == ("download", account.pk, REPORT)
            # Once stored (or failed), nothing stays in the download area.
            eventually(lambda: not any(area.iterdir()), 20, interval=0.1)
        finally:
            stop(process)
