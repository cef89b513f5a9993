"""The computer's Chromium keeps its sandbox: ``run_executor`` started as root (as on the
project's machines) runs the browser as an unprivileged user with the sandbox on, and only an
explicit ``RAM_CHROMIUM_NO_SANDBOX`` drops it, with a warning at start."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accounts.models import Account
from computers.client import ExecutorClient
from computers.models import Computer
from executor.profile import Owner, Profile
from executor.sandbox import browser_user_ensure, browser_user_name
from tests.executor.test_run_executor import _stop
from tests.support.executors import start_executor_process
from tests.support.portals import Portal, serve_portal
from tests.support.tiers import live
from tests.support.waits import eventually


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current:
                found.append(child)
                frontier.append(child)
    return found


def _chromium_processes(pid: int) -> list[tuple[int, list[str]]]:
    """(uid, argv) of every Chromium process the executor started."""
    processes = []
    for child in _children(pid):
        try:
            argv = (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")
            uid = (Path("/proc") / str(child)).stat().st_uid
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if words and "chromium" in words[0]:
            processes.append((uid, words))
    return processes


@pytest.fixture
@live
def portal() -> Iterator[Portal]:
    with serve_portal() as served:
        yield served


def _start(computer_id: str, origin: str, **env: str) -> subprocess.Popen[bytes]:
    return start_executor_process(computer_id, origin, stdout=subprocess.PIPE, **env)


@pytest.mark.skipif(os.geteuid() != 0, reason="the user switch is what an executor started as root does")
@pytest.mark.live
def test_an_executor_started_as_root_runs_chromium_sandboxed_as_the_computers_own_user(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], portal: Portal
) -> None:
    make_computer(account, "pc-sandbox")
    process = _start("pc-sandbox", live_origin, RAM_BROWSER_EGRESS_ALLOW=portal.origin.removeprefix("http://"))
    try:
        computer = eventually(lambda: Computer.objects.filter(pk="pc-sandbox", status="ready").first(), 60, interval=0.1)
        browsers = _chromium_processes(process.pid)
        assert browsers, "the executor started no Chromium"
        user = pwd.getpwnam(browser_user_name("pc-sandbox"))
        for uid, argv in browsers:
            assert uid == user.pw_uid, (uid, argv[:2])
            assert "--no-sandbox" not in argv
        # And the browser works: the agent's navigate reaches the allowed portal.
        client = ExecutorClient(computer)
        lease = client.lease_acquire()
        assert client.navigate(lease, portal.origin + "/welcome")["url"].startswith(portal.origin)
        assert "Welcome back" in client.extract_text(lease)
        client.lease_release(lease)
    finally:
        _stop(process)


@pytest.mark.live
def test_no_sandbox_only_when_configured_and_with_a_warning(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-nosandbox")
    process = _start("pc-nosandbox", live_origin, RAM_CHROMIUM_NO_SANDBOX="true")
    try:
        eventually(lambda: Computer.objects.filter(pk="pc-nosandbox", status="ready").first(), 60, interval=0.1)
        browsers = _chromium_processes(process.pid)
        assert browsers and all("--no-sandbox" in argv for _, argv in browsers if "--type=" not in " ".join(argv))
    finally:
        _stop(process)
    assert process.stderr is not None
    assert b"WARNING" in process.stderr.read() + (process.stdout.read() if process.stdout else b"")


@pytest.mark.skipif(os.geteuid() != 0, reason="creating users and switching to them needs root")
def test_each_computer_has_its_own_user_and_one_cannot_read_anothers_profile(tmp_path: Path) -> None:
    """A renderer compromised in computer A runs as A's user: B's profile (0700, B's user) is closed
    to it, checked by the operating system itself."""
    a, b = browser_user_ensure("pc-tenant-a"), browser_user_ensure("pc-tenant-b")
    assert a.pw_name == browser_user_name("pc-tenant-a") and a.pw_name.startswith("ram-c-")
    assert len({a.pw_uid, b.pw_uid, 0}) == 3 and a.pw_gid != b.pw_gid
    assert browser_user_ensure("pc-tenant-a").pw_uid == a.pw_uid, "the same computer keeps its user"
    root = tmp_path / "profiles"
    generation = uuid.uuid4()
    profiles = {}
    for computer, user in (("pc-tenant-a", a), ("pc-tenant-b", b)):
        user_data = Profile(root=root, computer_id=computer, owner=Owner(user.pw_uid, user.pw_gid)).prepare(generation)
        assert (user_data.stat().st_uid, stat.S_IMODE(user_data.stat().st_mode)) == (user.pw_uid, 0o700)
        profiles[computer] = user_data
    secret = profiles["pc-tenant-b"] / "Web Data"
    written = subprocess.run(  # noqa: S603 - fixed argv
        ["/usr/sbin/runuser", "-u", b.pw_name, "--", "/bin/sh", "-c", f"echo alice@example.com > '{secret}'"],
        capture_output=True,
    )
    assert written.returncode == 0, written.stderr
    own = subprocess.run(["/usr/sbin/runuser", "-u", b.pw_name, "--", "/bin/cat", str(secret)], capture_output=True)  # noqa: S603
    assert own.stdout == b"alice@example.com\n", "B's own user reads it"
    for argv in (["/bin/cat", str(secret)], ["/bin/ls", str(profiles["pc-tenant-b"])]):
        other = subprocess.run(["/usr/sbin/runuser", "-u", a.pw_name, "--", *argv], capture_output=True)  # noqa: S603
        assert other.returncode != 0 and b"alice" not in other.stdout, (argv, other.stdout)
        assert b"Permission denied" in other.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
def test_a_profile_from_a_shared_user_is_handed_to_the_computers_own_user(tmp_path: Path) -> None:
    shared, own = browser_user_ensure("pc-shared-before"), browser_user_ensure("pc-own-now")
    generation = uuid.uuid4()
    user_data = Profile(root=tmp_path / "p", computer_id="pc-own-now", owner=Owner(shared.pw_uid, shared.pw_gid)).prepare(
        generation
    )
    (user_data / "Default").mkdir(exist_ok=True)
    (user_data / "Default" / "Cookies").write_bytes(b"x")
    for path in (user_data / "Default", user_data / "Default" / "Cookies"):
        os.chown(path, shared.pw_uid, shared.pw_gid)
    Profile(root=tmp_path / "p", computer_id="pc-own-now", owner=Owner(own.pw_uid, own.pw_gid)).prepare(generation)
    for path in (user_data, user_data / "Default", user_data / "Default" / "Cookies"):
        assert path.stat().st_uid == own.pw_uid, path
