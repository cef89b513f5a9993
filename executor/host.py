"""An executor host (``manage.py run_executor_host``): the process on a machine that hosts browsers.

It holds no database and no executor token of its own: with its host token (``RAM_HOST_TOKEN``,
``ram_host_...``) it reports to the server's internal endpoint (``POST /internal/hosts/<name>/sync``,
every ``SYNC_SECONDS``) its slots, the computers whose executor it runs and those whose executor
exited, and its health; the answer says which executors to start (each with a fresh executor token
of that computer, handed to that ``run_executor`` process in its environment only) and which to stop.

An executor dies with its host (``PR_SET_PDEATHSIG``): a host killed with SIGKILL leaves no browser
behind, and its computers start again when it (or the server's placement) starts them. An executor
that keeps dying quickly is started again after a growing back-off, never in a tight loop.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pydantic

from executor import server_wire as wire

logger = logging.getLogger(__name__)

SYNC_SECONDS = 0.5
STOP_WAIT_SECONDS = 30.0
QUICK_DEATH_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 30.0
PR_SET_PDEATHSIG = 1


class HostRefused(Exception):
    """The server refused the host's token (401/403): the host cannot run."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the host goes, however it goes (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def health() -> dict[str, Any]:
    """The load average over a minute and the memory available (MB), when the system says."""
    report: dict[str, Any] = {"load1": round(os.getloadavg()[0], 2)}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                report["memory_available_mb"] = int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return report


@dataclass
class _Executor:
    process: subprocess.Popen[bytes]
    started_at: float
    stop_asked_at: float | None = None


@dataclass
class _Backoff:
    until: float = 0.0
    delay: float = 0.0


@dataclass
class ExecutorHost:
    """Runs the executors the server places on this host; ``spawn`` starts one (``run_executor``)."""

    name: str
    capacity: int
    server: str
    token: str
    spawn: Callable[[str, str], subprocess.Popen[bytes]]
    executors: dict[str, _Executor] = field(default_factory=dict)
    exited: set[str] = field(default_factory=set)
    backoff: dict[str, _Backoff] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)

    def _report(self) -> wire.InternalHostSync:
        return wire.InternalHostSync(
            capacity=self.capacity,
            running=sorted(self.executors),
            exited=sorted(self.exited),
            health=wire.InternalHostHealth(**health()),
        )

    def sync(self, client: httpx.Client) -> wire.InternalHostOrders | None:
        """One report and its orders (None when the server could not be reached: nothing changes)."""
        self._reap()
        report = self._report()
        try:
            response = client.post(
                f"{self.server}/internal/hosts/{self.name}/sync",
                json=report.model_dump(mode="json"),
                headers={"Authorization": f"Bearer {self.token}"},
            )
        except httpx.HTTPError as exc:
            logger.warning("executor host %s: the server is not reachable (%s)", self.name, type(exc).__name__)
            return None
        if response.status_code in (401, 403):
            raise HostRefused(f"The server refused the host token of {self.name!r} ({response.status_code}).")
        if response.status_code != 200:
            logger.warning("executor host %s: the server answered %s", self.name, response.status_code)
            return None
        try:
            orders = wire.InternalHostOrders.model_validate_json(response.content)
        except pydantic.ValidationError:
            logger.warning("executor host %s: the server's answer was not understood", self.name)
            return None
        self.exited -= set(report.exited)
        self._apply(orders)
        return orders

    def _reap(self) -> None:
        now = time.monotonic()
        for computer_id, running in list(self.executors.items()):
            code = running.process.poll()
            if code is None:
                if running.stop_asked_at is not None and now - running.stop_asked_at > STOP_WAIT_SECONDS:
                    running.process.kill()
                continue
            del self.executors[computer_id]
            self.exited.add(computer_id)
            if running.stop_asked_at is None:
                backoff = self.backoff.setdefault(computer_id, _Backoff())
                quick = now - running.started_at < QUICK_DEATH_SECONDS
                backoff.delay = min(MAX_BACKOFF_SECONDS, max(0.5, backoff.delay * 2)) if quick else 0.0
                backoff.until = now + backoff.delay
                logger.warning("executor of %s exited (code %s)", computer_id, code)

    def _apply(self, orders: wire.InternalHostOrders) -> None:
        now = time.monotonic()
        for computer_id in orders.stop:
            running = self.executors.get(computer_id)
            if running is not None and running.stop_asked_at is None:
                running.stop_asked_at = now
                running.process.terminate()  # a clean stop: the browser closes, the profile stays
        for order in orders.start:
            if order.computer_id in self.executors or len(self.executors) >= self.capacity:
                continue
            if self.backoff.get(order.computer_id, _Backoff()).until > now:
                continue  # its token is dropped; the next sync hands a new one
            self.executors[order.computer_id] = _Executor(self.spawn(order.computer_id, order.token), now)

    def serve(self) -> None:
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            while not self.stopping.is_set():
                self.sync(client)
                self.stopping.wait(SYNC_SECONDS)
            self.stop_all()
            self._reap()
            try:  # the slots free at once rather than when the host is found stale
                client.post(
                    f"{self.server}/internal/hosts/{self.name}/sync",
                    json=wire.InternalHostSync(capacity=0, exited=sorted(self.exited)).model_dump(mode="json"),
                    headers={"Authorization": f"Bearer {self.token}"},
                )
            except httpx.HTTPError:
                pass

    def stop_all(self) -> None:
        for running in self.executors.values():
            if running.process.poll() is None:
                running.process.terminate()
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        for running in self.executors.values():
            try:
                running.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                running.process.kill()


def spawn_executor(
    base_dir: Path, env: dict[str, str], address: str = "127.0.0.1"
) -> Callable[[str, str], subprocess.Popen[bytes]]:
    """Start ``manage.py run_executor --computer ID --host ADDRESS`` with that computer's executor token
    in its environment only (``env`` has no database URL and no host token)."""

    def spawn(computer_id: str, token: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "manage.py", "run_executor", "--computer", computer_id, "--host", address]
        return subprocess.Popen(  # noqa: S603 - fixed argv
            argv,
            cwd=base_dir,
            env={**env, "RAM_EXECUTOR_TOKEN": token},
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - prctl only, before exec
        )

    return spawn
