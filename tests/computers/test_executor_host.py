"""``manage.py run_executor_host`` as a real process: it registers with its own host token, the server
places computers on its slots, and it starts and stops real executors (Chromium) for them, each with
its own executor token in its environment only; idle computers stop (profile kept), a start after a
stop is a new generation, and when every slot is taken the least recently used idle computer is
stopped to make room."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from accounts.models import Account
from computers.models import Computer, ExecutorHost
from computers.placement import WAIT_NO_SLOT, computer_start, computer_wait_reason, computers_idle_stop
from computers.selectors import computer_is_ready
from computers.tokens import executor_token_digest
from tests.support.executors import children_of, start_host_process
from tests.support.waits import eventually

pytestmark = pytest.mark.live


def _ready(computer_id: str, *, besides: object = None) -> Computer:
    def check() -> Computer | None:
        row = Computer.objects.get(pk=computer_id)
        return row if computer_is_ready(row) and row.generation != besides else None

    return eventually(check, 90, interval=0.2, what=f"{computer_id} ready")


def _executor_of(host: subprocess.Popen[bytes], computer_id: str) -> int | None:
    for pid, argv in children_of(host.pid).items():
        if b"run_executor" in argv and computer_id.encode() in argv:
            return pid
    return None


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_a_host_runs_the_executors_placed_on_it_and_stops_idle_ones(
    live_origin: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    first, second, third = (make_computer(account, f"host-pc-{n}") for n in (1, 2, 3))
    host = start_host_process("test-host", live_origin, capacity=2)
    try:
        eventually(lambda: ExecutorHost.objects.filter(pk="test-host", capacity=2, last_seen_at__isnull=False).exists(), 30)
        assert "DATABASE_URL" not in _environ(host.pid)
        computer_start(computer=first)
        ready = _ready(first.pk)
        assert ready.host_id == "test-host"
        pid = _executor_of(host, first.pk)
        assert pid is not None
        env = _environ(pid)
        # Its own executor token, in its environment only; no database, no host token.
        assert executor_token_digest(env["RAM_EXECUTOR_TOKEN"]) == ready.executor_token_digest
        assert "DATABASE_URL" not in env and "RAM_HOST_TOKEN" not in env
        profile_root = Path(settings.RAM_BROWSER_PROFILE_DIR)
        # Idle: stopped cleanly, its slot freed, no process left; the profile stays on disk.
        Computer.objects.filter(pk=first.pk).update(last_used_at=timezone.now() - timedelta(hours=1))
        assert computers_idle_stop() == [first.pk]
        eventually(lambda: Computer.objects.filter(pk=first.pk, host__isnull=True, status="offline").exists(), 40)
        eventually(lambda: _executor_of(host, first.pk) is None, 10)
        assert (profile_root / first.pk / str(ready.profile_generation) / "chromium").is_dir()
        # A start after a stop is a new generation.
        computer_start(computer=first)
        again = _ready(first.pk, besides=ready.generation)
        assert again.generation != ready.generation
        # Two slots: the second fits; the third finds none free and the least recently used idle one
        # (the first, unused for an hour) is stopped to make room.
        computer_start(computer=second)
        _ready(second.pk)
        Computer.objects.filter(pk=first.pk).update(last_used_at=timezone.now() - timedelta(hours=1))
        Computer.objects.filter(pk=second.pk).update(last_used_at=timezone.now() - timedelta(minutes=1))
        computer_start(computer=third)
        _ready(third.pk)
        placed = dict(Computer.objects.filter(host__isnull=False).values_list("pk", "host_id"))
        assert placed == {second.pk: "test-host", third.pk: "test-host"}
        assert not Computer.objects.get(pk=first.pk).wanted_running
        # No slot and none idle (a run waits on each): a start waits, and says why.
        Computer.objects.filter(pk__in=[second.pk, third.pk]).update(last_used_at=timezone.now())
        computer_start(computer=first)
        waiting = Computer.objects.get(pk=first.pk)
        assert waiting.host_id is None and computer_wait_reason(waiting) == WAIT_NO_SLOT
    finally:
        host.send_signal(signal.SIGTERM)
        try:
            host.wait(timeout=60)
        except subprocess.TimeoutExpired:
            host.kill()
    # The host's executors stopped with it; none is left.
    assert not any(b"run_executor" in argv for argv in children_of(host.pid).values())
