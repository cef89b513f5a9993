"""The embedded default's supervisor: every child it starts is restarted when it dies.

A child that exits while the server runs is started again after a back-off of 0.5 s, doubling on
each quick death (one that lived less than ``STABLE_SECONDS``) up to 4 s, so a restart always begins
within 5 s of the death; a child that lived long enough starts over at 0.5 s. Each child may have a
hook that runs when it is found dead (the demo computer is marked offline at once, rather than when
its heartbeats go stale) and one that runs after each restart (OpenBao is unsealed again).

A child that exits with ``CANNOT_RUN`` (78, ``EX_CONFIG``: its address is taken, its settings are
wrong) is not restarted, since it would only fail again: the supervisor calls ``on_cannot_run``
(``make run`` stops), having said so in one line.

Production runs the same children under systemd (``docs/deployment.md``), which does the same job
(``RestartPreventExitStatus=78`` there).
"""

from __future__ import annotations

import functools
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 0.5
MAX_DELAY_SECONDS = 4.0
STABLE_SECONDS = 30.0
POLL_SECONDS = 0.25
CANNOT_RUN = 78


@dataclass
class Child:
    name: str
    start: Callable[[], subprocess.Popen[bytes]]
    on_death: Callable[[], None] | None = None
    after_start: Callable[[], None] | None = None
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    delay: float = FIRST_DELAY_SECONDS
    restart_at: float | None = None
    restarts: int = 0
    deaths: list[float] = field(default_factory=list)


class Supervisor:
    """Starts children, restarts the ones that die, and stops them all on request."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, on_cannot_run: Callable[[str], None] | None = None) -> None:
        self.children: list[Child] = []
        self.on_cannot_run = on_cannot_run
        self.cannot_run: str | None = None
        self.clock = clock
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def adopt(self, name: str, process: subprocess.Popen[bytes], start: Callable[[], subprocess.Popen[bytes]], **hooks: Callable[[], None] | None) -> Child:
        """Supervise a child that is already running (``start`` starts it again)."""
        child = Child(name=name, start=start, process=process, started_at=self.clock(), **hooks)  # type: ignore[arg-type]
        with self.lock:
            self.children.append(child)
        return child

    def spawn(self, name: str, start: Callable[[], subprocess.Popen[bytes]], **hooks: Callable[[], None] | None) -> Child:
        return self.adopt(name, start(), start, **hooks)

    def check(self) -> None:
        """One pass: notice deaths, and restart the children whose back-off has passed."""
        now = self.clock()
        with self.lock:
            children = list(self.children)
        for child in children:
            if self.stopping.is_set():
                return
            if child.restart_at is None:
                code = child.process.poll() if child.process is not None else 0
                if code is None:
                    continue
                if code == CANNOT_RUN:
                    logger.error("%s cannot run (see above); stopping", child.name)
                    with self.lock:
                        self.children.remove(child)
                    self.cannot_run = child.name
                    if self.on_cannot_run is not None:
                        _quietly(functools.partial(self.on_cannot_run, child.name), "the stop")
                    return
                lived = now - child.started_at
                child.delay = FIRST_DELAY_SECONDS if lived >= STABLE_SECONDS else child.delay
                child.restart_at = now + child.delay
                child.deaths.append(now)
                logger.warning("%s exited (code %s); restarting it in %.1f s", child.name, code, child.delay)
                if child.on_death is not None:
                    _quietly(child.on_death, f"{child.name}'s death hook")
            elif now >= child.restart_at:
                try:
                    child.process = child.start()
                except Exception:  # noqa: BLE001 - it is tried again after a longer back-off
                    logger.exception("%s could not be started", child.name)
                    child.restart_at = now + min(child.delay * 2, MAX_DELAY_SECONDS)
                    child.delay = min(child.delay * 2, MAX_DELAY_SECONDS)
                    continue
                child.started_at, child.restart_at = self.clock(), None
                child.delay = min(child.delay * 2, MAX_DELAY_SECONDS)
                child.restarts += 1
                logger.warning("%s restarted (restart %d)", child.name, child.restarts)
                if child.after_start is not None:
                    _quietly(child.after_start, f"{child.name}'s start hook")

    def run_in_background(self) -> None:
        def loop() -> None:
            while not self.stopping.wait(POLL_SECONDS):
                self.check()

        self.thread = threading.Thread(target=loop, name="supervisor", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop supervising, then terminate every child (killed if it does not stop in ``timeout``)."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        with self.lock:
            processes = [child.process for child in reversed(self.children) if child.process is not None]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()


def _quietly(hook: Callable[[], None], what: str) -> None:
    try:
        hook()
    except Exception:  # noqa: BLE001 - a failing hook must not stop the supervision of the others
        logger.exception("%s failed", what)
