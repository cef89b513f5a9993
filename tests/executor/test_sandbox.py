"""The computer's Chromium keeps its sandbox: ``run_executor`` started as root (as on the
project's machines) runs the browser as an unprivileged user with the sandbox on, and only an
explicit ``RAM_CHROMIUM_NO_SANDBOX`` drops it, with a warning at start."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accounts.models import Account
from executor.client import ExecutorClient
from executor.models import Computer
from tests.executor.test_run_executor import _stop, _wait_for
from tests.support.executors import start_executor_process
from tests.support.portals import Portal, serve_portal


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
def portal() -> Iterator[Portal]:
    with serve_portal() as served:
        yield served


def _start(computer_id: str, origin: str, **env: str) -> subprocess.Popen[bytes]:
    return start_executor_process(computer_id, origin, stdout=subprocess.PIPE, **env)


@pytest.mark.skipif(os.geteuid() != 0, reason="the user switch is what an executor started as root does")
@pytest.mark.live
def test_an_executor_started_as_root_runs_chromium_sandboxed_as_an_unprivileged_user(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], portal: Portal
) -> None:
    make_computer(account, "pc-sandbox")
    process = _start("pc-sandbox", live_origin, RAM_BROWSER_EGRESS_ALLOW=portal.origin.removeprefix("http://"))
    try:
        computer = _wait_for(lambda: Computer.objects.filter(pk="pc-sandbox", status="ready").first(), 60)
        browsers = _chromium_processes(process.pid)
        assert browsers, "the executor started no Chromium"
        user = pwd.getpwnam("ram-browser")
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
        _wait_for(lambda: Computer.objects.filter(pk="pc-nosandbox", status="ready").first(), 60)
        browsers = _chromium_processes(process.pid)
        assert browsers and all("--no-sandbox" in argv for _, argv in browsers if "--type=" not in " ".join(argv))
    finally:
        _stop(process)
    assert process.stderr is not None
    assert b"WARNING" in process.stderr.read() + (process.stdout.read() if process.stdout else b"")
