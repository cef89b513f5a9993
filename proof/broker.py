"""``embedded-broker``: tasks through the embedded default's broker (``ramsite/broker.py``) while its
workers are restarted, some cleanly (SIGTERM: a warm shutdown) and some killed (SIGKILL to the
worker's whole process group, its pool included).

It needs none of the proof's stack: two Celery workers (two pool processes each) of a small app of
its own (this module's ``app``) consume from a private folder; four threads publish
``profile.broker_tasks`` tasks. Each execution appends ``<n> <redelivered> <pid>`` to a file of its
process. What the rows count:

- *lost*: a task never executed;
- *duplicated*: an execution beyond the first that was not marked ``redelivered`` (a second run
  nobody could notice); a task run again after its worker was killed is marked, as with Redis;
- the workers' row: every worker ended by the proof's hand only (no worker death), and no message
  was set aside as unreadable.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from celery import Celery

from proof.core import Profile, Row

ROOT = Path(__file__).resolve().parent.parent
DIR_VARIABLE = "RAM_PROOF_BROKER_DIR"
RESTART_SECONDS = 8.0


def transport_options(root: Path) -> dict[str, Any]:
    """As ``ramsite/settings.py`` configures the embedded default, in ``root``."""
    return {
        "polling_interval": 0.05,
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "processed_folder": str(root / "processed"),
        "control_folder": str(root / "control"),
        "claims_folder": str(root / "claims"),
        "quarantine_folder": str(root / "quarantine"),
        "store_processed": False,
    }


def make_app(root: Path) -> Celery:
    for folder in ("queue", "control", "claims", "executed"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    app = Celery("proof_broker", broker="ramfs://", set_as_current=False)
    app.conf.update(
        broker_transport="ramsite.broker:Transport",
        broker_transport_options=transport_options(root),
        broker_connection_retry_on_startup=True,
        # As the embedded default: acknowledged after the task, requeued if its pool process dies.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        worker_enable_remote_control=False,
        worker_hijack_root_logger=False,
    )

    @app.task(name="proof.broker.record", bind=True)
    def record(self: Any, n: int) -> None:
        redelivered = int(bool((self.request.delivery_info or {}).get("redelivered")))
        line = f"{n} {redelivered} {os.getpid()}\n".encode()
        fd = os.open(root / "executed" / f"{os.getpid()}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)  # one append: whole, whatever kills the process next
        finally:
            os.close(fd)
        time.sleep(random.uniform(0, 0.004))  # noqa: S311 - not for security

    return app


# What a worker started by this experiment loads (``celery -A proof.broker:app``).
app = make_app(Path(os.environ[DIR_VARIABLE])) if DIR_VARIABLE in os.environ else None


class Slot:
    """One worker place: a Celery worker, started again whenever the experiment stops it."""

    def __init__(self, root: Path, index: int) -> None:
        self.root, self.index, self.generation = root, index, 0
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.deaths: list[int | None] = []

    def start(self) -> None:
        self.generation += 1
        log = open(self.root / f"worker-{self.index}-{self.generation}.log", "wb")  # noqa: SIM115 - the child keeps it
        argv = [sys.executable, "-m", "celery", "-A", "proof.broker:app", "worker", "--concurrency=2", "--loglevel=WARNING"]
        argv += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"w{self.index}-{self.generation}@%h"]
        env = {**os.environ, DIR_VARIABLE: str(self.root), "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603
        log.close()
        self.started += 1

    def stop(self, kill: bool) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is not None:  # it died by itself
            self.deaths.append(process.returncode)
            return
        if kill:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            self.deaths.append(None)  # it did not stop when asked

    def died_by_itself(self) -> bool:
        process = self.process
        if process is not None and process.poll() is not None:
            self.deaths.append(process.returncode)
            return True
        return False


def executions(root: Path) -> list[tuple[int, int]]:
    out = []
    for path in (root / "executed").glob("*.log"):
        for line in path.read_text().splitlines():
            n, redelivered, _ = line.split()
            out.append((int(n), int(redelivered)))
    return out


def embedded_broker(stack: object, profile: Profile) -> list[Row]:
    total = profile.broker_tasks
    root = Path(tempfile.mkdtemp(prefix="ram-proof-broker-"))
    producer_app = make_app(root)
    record = producer_app.tasks["proof.broker.record"]
    slots = [Slot(root, i) for i in range(2)]
    for slot in slots:
        slot.start()
    published = threading.Event()

    def publish(part: int) -> None:
        for n in range(part, total, 4):
            record.apply_async(args=[n])

    began = time.monotonic()
    publishers = [threading.Thread(target=publish, args=(p,), daemon=True) for p in range(4)]
    for thread in publishers:
        thread.start()
    restarts = kills = 0
    deadline = began + max(600.0, total * 0.06)
    try:
        while time.monotonic() < deadline:
            time.sleep(RESTART_SECONDS)
            if not published.is_set() and not any(t.is_alive() for t in publishers):
                published.set()
            for slot in slots:
                if slot.died_by_itself():
                    slot.start()
            done = len({n for n, _ in executions(root)})
            if published.is_set() and done >= total:
                break
            # Restart one worker, in turn; every third restart (the first included) is a kill.
            slot = slots[restarts % len(slots)]
            kill = restarts % 3 == 0
            slot.stop(kill=kill)
            slot.start()
            restarts += 1
            kills += kill
        elapsed = time.monotonic() - began
    finally:
        for slot in slots:
            if slot.process is not None and not slot.died_by_itself():
                slot.stop(kill=False)
    ran = executions(root)
    counts = Counter(n for n, _ in ran)
    flagged = Counter(n for n, redelivered in ran if redelivered)
    lost = sum(1 for n in range(total) if counts[n] == 0)
    unnoticed = sum(max(0, counts[n] - 1 - flagged[n]) for n in counts)
    reruns = sum(counts.values()) - len(counts)
    quarantined = len(list((root / "quarantine").glob("*"))) if (root / "quarantine").exists() else 0
    logs = "".join(p.read_text(errors="replace") for p in root.glob("worker-*.log"))
    crashes = logs.count("Unrecoverable error")
    deaths = sum(len(slot.deaths) for slot in slots)
    started = sum(slot.started for slot in slots)
    tasks_row = Row(
        experiment="embedded-broker: tasks with worker restarts",
        tries=total,
        held=total - lost - min(unnoticed, total - lost),
        lost=lost,
        duplicated=unnoticed,
        figure=(
            f"{total} tasks published by 4 threads, 2 workers × 2 pool processes, {restarts} restarts "
            f"({kills} killed with their pool, the rest warm); {len(counts)} executed, {reruns} run again after "
            f"a kill (each marked redelivered), {unnoticed} unnoticed; {total / elapsed:.0f} tasks/s"
        ),
    )
    workers_row = Row(
        experiment="embedded-broker: no worker death",
        tries=started,
        held=0 if crashes or quarantined else max(0, started - deaths),
        lost=0,
        duplicated=0,
        figure=f"{started} workers started, {deaths} ended by themselves, {crashes} unrecoverable errors, {quarantined} unreadable messages",
    )
    if tasks_row.holds and workers_row.holds:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"  embedded-broker: kept {root} (logs)", flush=True)
    return [tasks_row, workers_row]

