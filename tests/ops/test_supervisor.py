"""The embedded default's supervisor, with real child processes: a dead child comes back within 5 s,
quick deaths back off up to 4 s, hooks run, and stopping ends every child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from ops.supervisor import CANNOT_RUN, FIRST_DELAY_SECONDS, MAX_DELAY_SECONDS, STABLE_SECONDS, Supervisor
from tests.support.waits import eventually

pytestmark = pytest.mark.live


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdin=subprocess.DEVNULL)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def supervisor() -> Iterator[Supervisor]:
    running = Supervisor()
    yield running
    running.stop(timeout=5)


def test_a_killed_child_is_started_again_within_5_seconds(supervisor: Supervisor) -> None:
    deaths: list[str] = []
    restarted: list[str] = []
    child = supervisor.spawn(
        "sleeper", sleeper, on_death=lambda: deaths.append("dead"), after_start=lambda: restarted.append("up")
    )
    supervisor.run_in_background()
    first = child.process
    assert first is not None
    killed_at = time.monotonic()
    os.kill(first.pid, signal.SIGKILL)
    eventually(lambda: child.process is not first and child.process.poll() is None, 5.0, what="the child started again")
    assert time.monotonic() - killed_at < 5.0
    assert deaths == ["dead"] and restarted == ["up"] and child.restarts == 1


def test_quick_deaths_back_off_up_to_4_seconds_and_a_stable_child_starts_over() -> None:
    clock = Clock()
    supervisor = Supervisor(clock=clock)
    try:
        child = supervisor.spawn("sleeper", sleeper)
        delays = []
        for _ in range(5):
            assert child.process is not None
            child.process.kill()
            child.process.wait()
            supervisor.check()  # notices the death
            assert child.restart_at is not None
            delays.append(child.restart_at - clock.now)
            clock.now = child.restart_at - 0.01
            supervisor.check()
            assert child.restart_at is not None  # not before its time
            clock.now = child.restart_at
            supervisor.check()  # restarts it
            assert child.restart_at is None and child.process.poll() is None
            clock.now += 1  # lives one second: a quick death
        assert delays == [FIRST_DELAY_SECONDS, 1.0, 2.0, MAX_DELAY_SECONDS, MAX_DELAY_SECONDS]
        clock.now += STABLE_SECONDS
        assert child.process is not None
        child.process.kill()
        child.process.wait()
        supervisor.check()
        assert child.restart_at == clock.now + FIRST_DELAY_SECONDS
    finally:
        supervisor.stop(timeout=5)


def test_a_failing_start_is_tried_again_later_and_a_failing_hook_stops_nothing() -> None:
    clock = Clock()
    supervisor = Supervisor(clock=clock)
    attempts: list[int] = []

    def flaky() -> subprocess.Popen[bytes]:
        attempts.append(1)
        if len(attempts) == 2:
            raise OSError("no such file")
        return sleeper()

    def broken_hook() -> None:
        raise RuntimeError("hook failed")

    try:
        child = supervisor.spawn("flaky", flaky, on_death=broken_hook)
        other = supervisor.spawn("other", sleeper)
        assert child.process is not None
        child.process.kill()
        child.process.wait()
        supervisor.check()
        clock.now = child.restart_at or 0
        supervisor.check()  # the start fails: tried again after a longer wait
        assert child.restart_at is not None and child.restart_at > clock.now
        clock.now = child.restart_at
        supervisor.check()
        assert child.process.poll() is None and len(attempts) == 3
        assert other.process is not None and other.process.poll() is None
    finally:
        supervisor.stop(timeout=5)


def test_stop_ends_every_child_and_restarts_nothing() -> None:
    clock = Clock()
    supervisor = Supervisor(clock=clock)
    children = [supervisor.spawn(f"sleeper {n}", sleeper) for n in range(3)]
    supervisor.run_in_background()
    supervisor.stop(timeout=5)
    assert all(child.process is not None and child.process.poll() is not None for child in children)
    assert supervisor.thread is not None and not supervisor.thread.is_alive(), "no pass runs by itself any more"
    for _ in range(3):  # passes past every back-off, as the thread would have made them
        clock.now += MAX_DELAY_SECONDS + 1
        supervisor.check()
    assert all(child.restarts == 0 and child.process.poll() is not None for child in children)  # type: ignore[union-attr]


def test_a_child_that_cannot_run_is_not_restarted_and_stops_the_supervision() -> None:
    """Exit status 78 (an address taken, a wrong setting) would only fail again: no restart loop."""
    clock = Clock()
    stopped: list[str] = []
    supervisor = Supervisor(clock=clock, on_cannot_run=stopped.append)
    starts: list[int] = []

    def cannot_run() -> subprocess.Popen[bytes]:
        starts.append(1)
        return subprocess.Popen([sys.executable, "-c", f"raise SystemExit({CANNOT_RUN})"], stdin=subprocess.DEVNULL)

    try:
        supervisor.spawn("the metrics server", cannot_run)
        survivor = supervisor.spawn("sleeper", sleeper)
        eventually(lambda: supervisor.children[0].process.poll() is not None, 10.0, what="the child ended")  # type: ignore[union-attr]
        for _ in range(10):
            supervisor.check()
            clock.now += MAX_DELAY_SECONDS + 1
        assert starts == [1] and stopped == ["the metrics server"]
        assert supervisor.cannot_run == "the metrics server"
        assert [child.name for child in supervisor.children] == ["sleeper"]
        assert survivor.process is not None and survivor.process.poll() is None
    finally:
        supervisor.stop(timeout=5)
