"""Computers on demand, measured as ``make run`` runs them: the web server (uvicorn), one Celery worker,
one executor host (``run_executor_host --capacity 3``) that starts and stops the executors (Chromium)
of the computers placed on it, SQLite.

* **stopped → ready**: ``POST /api/computers/{id}/start`` → ``GET /api/computers/{id}`` reads
  ``available`` (polled every 50 ms), for each of 3 computers, 3 times (a clean stop between).
* **memory per ready idle computer**: the PSS of each computer's own process tree (its executor,
  the driver, Chromium's processes) on ``about:blank``, from ``/proc/<pid>/smaps_rollup``.
* **20 one-step runs over 3 computers against 1**: ``POST /api/runs`` ×20 (``extract_text``) spread
  over 3 ready computers, then all on one; until every run is finished. The ratio is the figure.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.procs import process_tree
from bench.queue import ONE_STEP, TERMINAL, _listening
from bench.run import ROOT, free_port, process, table

COMPUTERS = ["od-1", "od-2", "od-3"]
REPEATS = 3
RUNS = 20
# The runs of one account may use the three computers at once.
CONCURRENCY = "3"
READY_GOAL_SECONDS = 1.5
PSS_GOAL_MB = 300


def _setup() -> dict[str, Any]:
    from django.db import close_old_connections

    from accounts.models import Account
    from accounts.services import account_top_up, api_key_create
    from computers.models import Computer
    from computers.placement import host_token_issue

    close_old_connections()
    account = Account.objects.create(name="On demand")
    account_top_up(account=account, microcredits=10**12, actor="bench")
    for computer_id in COMPUTERS:
        Computer.objects.create(id=computer_id, account=account, name=computer_id)
    return {"key": api_key_create(account=account, kind="runner")[1], "host_token": host_token_issue(host_id="bench")}


def _stop_and_wait(computer_ids: list[str]) -> None:
    from django.db import close_old_connections

    from computers.models import Computer
    from computers.placement import computer_stop

    close_old_connections()
    for computer_id in computer_ids:
        computer_stop(computer_id=computer_id)
    deadline = time.monotonic() + 60
    while Computer.objects.filter(pk__in=computer_ids, host__isnull=False).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the computers did not stop")
        time.sleep(0.1)
        close_old_connections()


@contextlib.contextmanager
def embedded_host(host_token: str) -> Iterator[tuple[httpx.Client, int]]:
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {
        "RAM_PUBLIC_ORIGIN": origin,
        "LOG_LEVEL": "WARNING",
        "RAM_WORKER_CONCURRENCY": CONCURRENCY,
        "RAM_ACCOUNT_MAX_ACTIVE_RUNS": CONCURRENCY,
        "RAM_ACCOUNT_MAX_RUNNING_COMPUTERS": "3",
    }
    with ExitStack() as stack:
        web = [sys.executable, "-m", "bench.server", str(port)]
        stack.enter_context(process(web, env))
        worker = [sys.executable, "-m", "celery", "-A", "ramsite", "worker", f"--concurrency={CONCURRENCY}"]
        stack.enter_context(process([*worker, "--loglevel=WARNING", "--without-gossip", "--without-mingle"], env))
        host_env = {
            **env,
            "RAM_HOST_TOKEN": host_token,
            "RAM_SERVER_INTERNAL_URL": origin,
        }
        argv = [sys.executable, "manage.py", "run_executor_host", "--name", "bench", "--capacity", "3"]
        host = stack.enter_context(_without_database(argv, host_env))
        deadline = time.monotonic() + 60
        while not _listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError("the web server did not start")
            time.sleep(0.2)
        yield stack.enter_context(httpx.Client(base_url=origin, timeout=60)), host.pid


@contextlib.contextmanager
def _without_database(argv: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """The executor host as in production: no DATABASE_URL in its environment."""
    inherited = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    child = subprocess.Popen(argv, cwd=ROOT, env={**inherited, **env}, stdin=subprocess.DEVNULL)  # noqa: S603
    try:
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()


def _start_seconds(client: httpx.Client, key: str, computer_id: str) -> float:
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    answer = client.post(f"/api/computers/{computer_id}/start", json={}, headers=headers)
    if answer.status_code != 202:
        raise RuntimeError(f"start refused: {answer.status_code} {answer.text}")
    deadline = started + 120
    while time.perf_counter() < deadline:
        if client.get(f"/api/computers/{computer_id}", headers=headers).json()["available"]:
            return time.perf_counter() - started
        time.sleep(0.05)
    raise RuntimeError(f"{computer_id} did not become ready")


def _pss_mb(pid: int) -> float:
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total / 1024


def _executor_pids(host_pid: int) -> dict[str, int]:
    found = {}
    for pid in process_tree(host_pid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"run_executor" in argv[2:3] and b"--computer" in argv:
                found[argv[argv.index(b"--computer") + 1].decode()] = pid
    return found


def _runs_seconds(client: httpx.Client, key: str, computers: list[str]) -> float:
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    ids = []
    for n in range(RUNS):
        body = {"computer_id": computers[n % len(computers)], "task": ONE_STEP, "max_model_calls": 5}
        answer = client.post("/api/runs", json=body, headers=headers)
        if answer.status_code != 201:
            raise RuntimeError(f"run refused: {answer.status_code} {answer.text}")
        ids.append(answer.json()["id"])
    left = set(ids)
    deadline = started + 600
    while left:
        if time.perf_counter() > deadline:
            raise RuntimeError("the runs did not finish within 600 s")
        for run_id in list(left):
            if client.get(f"/api/runs/{run_id}", headers=headers).json()["status"] in TERMINAL:
                left.discard(run_id)
        time.sleep(0.05)
    return time.perf_counter() - started


def computers_phase() -> dict[str, Any]:
    data = _setup()
    load = os.getloadavg()
    with embedded_host(data["host_token"]) as (client, host_pid):
        _start_seconds(client, data["key"], COMPUTERS[0])  # warm: imports, the first Chromium
        _stop_and_wait([COMPUTERS[0]])
        ready: list[float] = []
        for _ in range(REPEATS):
            for computer_id in COMPUTERS:
                ready.append(_start_seconds(client, data["key"], computer_id))
            time.sleep(2)  # settled: the pages are about:blank, nothing is loading
            pss = {computer_id: _pss_mb(pid) for computer_id, pid in _executor_pids(host_pid).items()}
            _stop_and_wait(COMPUTERS)
        for computer_id in COMPUTERS:
            _start_seconds(client, data["key"], computer_id)
        over_three = [_runs_seconds(client, data["key"], COMPUTERS) for _ in range(REPEATS)]
        over_one = [_runs_seconds(client, data["key"], COMPUTERS[:1]) for _ in range(REPEATS)]
    return {"ready": ready, "pss": pss, "three": over_three, "one": over_one, "load": load}


def report(result: dict[str, Any]) -> None:
    cores = os.cpu_count() or 1
    judged = result["load"][0] <= cores
    span = lambda values: f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"  # noqa: E731
    ready_p50 = statistics.median(result["ready"])
    pss = list(result["pss"].values())
    pss_each = statistics.median(pss) if pss else float("nan")
    three, one = statistics.median(result["three"]), statistics.median(result["one"])

    def verdict(met: bool) -> str:
        if not judged:
            return f"not judged: load {result['load'][0]:.2f} > {cores} cores"
        return "met" if met else "not met"

    table(
        f"Computers on demand: one executor host with 3 slots (make run's default), worker concurrency {CONCURRENCY}, "
        f"RAM_ACCOUNT_MAX_ACTIVE_RUNS {CONCURRENCY}; median of {REPEATS} (min–max)",
        ["figure", "measured", "goal", "verdict"],
        [
            [
                f"stopped → ready (POST start → available), p50 of {len(result['ready'])}",
                span(result["ready"]),
                f"≤ {READY_GOAL_SECONDS} s",
                verdict(ready_p50 <= READY_GOAL_SECONDS),
            ],
            [
                "memory per ready idle computer (executor + driver + Chromium, PSS, about:blank)",
                f"{pss_each:.0f} MB ({', '.join(f'{v:.0f}' for v in pss)})",
                f"≤ {PSS_GOAL_MB} MB",
                verdict(pss_each <= PSS_GOAL_MB),
            ],
            [f"{RUNS} one-step runs over 3 computers", span(result["three"]), "", ""],
            [f"{RUNS} one-step runs on 1 computer", span(result["one"]), "", ""],
            ["ratio (1 computer ÷ 3 computers)", f"{one / three:.2f}×", "", ""],
        ],
        result["load"],
    )
