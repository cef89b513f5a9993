"""The run queue's fairness, measured as ``make run`` runs it: one account floods 200 runs
while another account's one-step run is timed against its idle time.

Processes as in the embedded default: the web server (uvicorn), one Celery worker on the
filesystem transport with ``RAM_WORKER_CONCURRENCY`` (2) processes, one executor
(Chromium) per computer, SQLite. Account "flood" has two computers and submits 200
one-step runs; account "other" has one computer and submits a one-step run
(``extract_text``) three times alone, then three times while the flood waits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx

from bench.run import executor_env, free_port, process, table

FLOOD_RUNS = 200
REPEATS = 3
GOAL_RATIO = 2.0
TERMINAL = {"succeeded", "failed", "cancelled"}
ONE_STEP = {"goal": "read the page", "steps": [{"tool": "extract_text", "arguments": {}}]}


def _setup() -> dict[str, Any]:
    from django.db import close_old_connections

    from accounts.models import Account
    from accounts.services import account_top_up, api_key_create
    from computers.models import Computer

    close_old_connections()
    flood = Account.objects.create(name="Flood")
    other = Account.objects.create(name="Other")
    for account in (flood, other):
        account_top_up(account=account, microcredits=10**12, actor="bench")
    flood_pcs = [Computer.objects.create(id=f"flood-{i}", account=flood, name=f"flood-{i}").pk for i in (1, 2)]
    other_pc = Computer.objects.create(id="other-1", account=other, name="other-1").pk
    return {
        "flood_key": api_key_create(account=flood, kind="runner")[1],
        "other_key": api_key_create(account=other, kind="runner")[1],
        "flood_pcs": flood_pcs,
        "other_pc": other_pc,
    }


def _ready(computer_ids: list[str]) -> bool:
    from django.db import close_old_connections

    from computers.models import Computer

    close_old_connections()
    return Computer.objects.filter(pk__in=computer_ids, status="ready").count() == len(computer_ids)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _create(client: httpx.Client, key: str, computer_id: str) -> str:
    response = client.post(
        "/api/runs",
        json={"computer_id": computer_id, "task": ONE_STEP, "max_model_calls": 5},
        headers={"Authorization": f"Bearer {key}"},
    )
    if response.status_code != 201:
        raise RuntimeError(f"run refused: {response.status_code} {response.text}")
    return str(response.json()["id"])


def _one_run_seconds(client: httpx.Client, key: str, computer_id: str) -> tuple[float, dict[str, Any]]:
    """``POST /api/runs`` → the run seen finished by ``GET /api/runs/{id}`` (polled every 50 ms)."""
    started = time.perf_counter()
    run_id = _create(client, key, computer_id)
    deadline = started + 600
    while time.perf_counter() < deadline:
        run = client.get(f"/api/runs/{run_id}", headers={"Authorization": f"Bearer {key}"}).json()
        if run["status"] in TERMINAL:
            return time.perf_counter() - started, run
        time.sleep(0.05)
    raise RuntimeError("the run did not finish within 600 s")


def _flood_left(client: httpx.Client, key: str) -> dict[str, int]:
    counts = {}
    for status in ("queued", "running"):
        body = client.get("/api/runs", params={"status": status, "limit": 1}, headers={"Authorization": f"Bearer {key}"}).json()
        counts[status] = int(body["count"])
    return counts


@contextlib.contextmanager
def embedded(computers: list[str]) -> Iterator[httpx.Client]:
    """The web server, the worker and one executor per computer, as ``make run`` starts them."""
    with embedded_processes(computers) as (client, _pids):
        yield client


@contextlib.contextmanager
def embedded_processes(computers: list[str]) -> Iterator[tuple[httpx.Client, dict[str, list[int]]]]:
    """``embedded``, with the process ids of the ``web`` server, the ``worker`` and the ``executors``."""
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {"RAM_PUBLIC_ORIGIN": origin, "LOG_LEVEL": "WARNING"}
    concurrency = os.environ.get("RAM_WORKER_CONCURRENCY", "2")
    pids: dict[str, list[int]] = {"executors": []}
    with ExitStack() as stack:
        for computer_id in computers:
            executor = [sys.executable, "manage.py", "run_executor", "--computer", computer_id]
            pids["executors"].append(stack.enter_context(process(executor, {**env, **executor_env(computer_id, origin)})).pid)
        pids["web"] = [stack.enter_context(process([sys.executable, "-m", "bench.server", str(port)], env)).pid]
        worker = [sys.executable, "-m", "celery", "-A", "ramsite", "worker", f"--concurrency={concurrency}"]
        pids["worker"] = [stack.enter_context(process([*worker, "--loglevel=WARNING", "--without-gossip", "--without-mingle"], env)).pid]
        deadline = time.monotonic() + 90
        while not _ready(computers) or not _listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError("the executors or the web server did not start")
            time.sleep(0.2)
        yield stack.enter_context(httpx.Client(base_url=origin, timeout=60)), pids


def queue_phase() -> dict[str, Any]:
    data = _setup()
    with embedded([*data["flood_pcs"], data["other_pc"]]) as client:
        _one_run_seconds(client, data["other_key"], data["other_pc"])  # warm: imports, connections, first page
        idle = []
        for _ in range(REPEATS):
            seconds, run = _one_run_seconds(client, data["other_key"], data["other_pc"])
            idle.append(seconds)
        load_before = os.getloadavg()
        submitted = time.perf_counter()
        flood_ids = [
            _create(client, data["flood_key"], data["flood_pcs"][i % 2]) for i in range(FLOOD_RUNS)
        ]
        submit_seconds = time.perf_counter() - submitted
        left_before = _flood_left(client, data["flood_key"])
        loaded = []
        statuses = []
        for _ in range(REPEATS):
            seconds, run = _one_run_seconds(client, data["other_key"], data["other_pc"])
            loaded.append(seconds)
            statuses.append(run["status"])
        left_after = _flood_left(client, data["flood_key"])
        flood_headers = {"Authorization": f"Bearer {data['flood_key']}"}
        for run_id in flood_ids:  # end the flood quickly: what is left is cancelled
            if client.get(f"/api/runs/{run_id}", headers=flood_headers).json()["status"] not in TERMINAL:
                client.post(f"/api/runs/{run_id}/cancel", headers=flood_headers)
    return {
        "idle": idle,
        "loaded": loaded,
        "statuses": statuses,
        "submit_seconds": submit_seconds,
        "left_before": left_before,
        "left_after": left_after,
        "load_before": load_before,
        "concurrency": os.environ.get("RAM_WORKER_CONCURRENCY", "2"),
    }


def report(result: dict[str, Any]) -> None:
    from django.conf import settings

    idle, loaded = result["idle"], result["loaded"]
    idle_median, loaded_median = statistics.median(idle), statistics.median(loaded)
    ratio = loaded_median / idle_median
    cores = os.cpu_count() or 1
    if result["load_before"][0] > cores:
        verdict = f"not judged: load {result['load_before'][0]:.2f} > {cores} cores before the run"
    elif ratio <= GOAL_RATIO and all(s == "succeeded" for s in result["statuses"]):
        verdict = "met"
    else:
        verdict = "not met"
    span = lambda values: f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"  # noqa: E731
    table(
        f"Run queue fairness: one account floods {FLOOD_RUNS} one-step runs on 2 computers "
        f"(submitted in {result['submit_seconds']:.1f} s; queued/running before {result['left_before']['queued']}/"
        f"{result['left_before']['running']}, after {result['left_after']['queued']}/{result['left_after']['running']}); "
        f"another account's one-step run, POST → finished, median of {REPEATS} (min–max); worker concurrency "
        f"{result['concurrency']}, RAM_ACCOUNT_MAX_ACTIVE_RUNS {settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS}",
        ["idle", "during the flood", "ratio", "goal", "verdict"],
        [[span(idle), span(loaded), f"{ratio:.2f}×", f"≤ {GOAL_RATIO:.0f}× idle", verdict]],
        result["load_before"],  # before the flood
    )
