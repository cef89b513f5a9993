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
    from executor.models import Computer

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

    from executor.models import Computer

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
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    env = {"RAM_PUBLIC_ORIGIN": origin, "LOG_LEVEL": "WARNING"}
    concurrency = os.environ.get("RAM_WORKER_CONCURRENCY", "2")
    with ExitStack() as stack:
        for computer_id in computers:
            executor = [sys.executable, "manage.py", "run_executor", "--computer", computer_id]
            stack.enter_context(process(executor, {**env, **executor_env(computer_id, origin)}))
        stack.enter_context(process([sys.executable, "-m", "bench.server", str(port)], env))
        worker = [sys.executable, "-m", "celery", "-A", "ramsite", "worker", f"--concurrency={concurrency}"]
        stack.enter_context(process([*worker, "--loglevel=WARNING", "--without-gossip", "--without-mingle"], env))
        deadline = time.monotonic() + 90
        while not _ready(computers) or not _listening(port):
            if time.monotonic() > deadline:
                raise RuntimeError("the executors or the web server did not start")
            time.sleep(0.2)
        yield stack.enter_context(httpx.Client(base_url=origin, timeout=60))


def queue_phase() -> dict[str, Any]:
    data = _setup()
    with embedded([*data["flood_pcs"], data["other_pc"]]) as client:
        _one_run_seconds(client, data["other_key"], data["other_pc"])  # warm: imports, connections, first page
        idle = []
        for _ in range(REPEATS):
            seconds, run = _one_run_seconds(client, data["other_key"], data["other_pc"])
            idle.append(seconds)
        load_before = os.getloadavg()[0]
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
    if result["load_before"] > cores:
        verdict = f"not judged: load {result['load_before']:.2f} > {cores} cores before the run"
    elif ratio <= GOAL_RATIO and all(s == "succeeded" for s in result["statuses"]):
        verdict = "met"
    else:
        verdict = "not met"
    span = lambda values: f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"  # noqa: E731
    print(f"\nload average before the flood: {result['load_before']:.2f} ({cores} CPUs)")
    table(
        f"Run queue fairness: one account floods {FLOOD_RUNS} one-step runs on 2 computers "
        f"(submitted in {result['submit_seconds']:.1f} s; queued/running before {result['left_before']['queued']}/"
        f"{result['left_before']['running']}, after {result['left_after']['queued']}/{result['left_after']['running']}); "
        f"another account's one-step run, POST → finished, median of {REPEATS} (min–max); worker concurrency "
        f"{result['concurrency']}, RAM_ACCOUNT_MAX_ACTIVE_RUNS {settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS}",
        ["idle", "during the flood", "ratio", "goal", "verdict"],
        [[span(idle), span(loaded), f"{ratio:.2f}×", f"≤ {GOAL_RATIO:.0f}× idle", verdict]],
    )


# --- steps: the run loop's overhead per step (issue: steps at the speed of the tool) ------------

STEP_COUNTS = (20, 40)
STEPS_GOALS = {"overhead": 0.025, "forty": 2.0, "first": 0.100}


def _steps_setup() -> dict[str, Any]:
    from django.db import close_old_connections

    from accounts.models import Account
    from accounts.services import account_top_up, api_key_create
    from executor.models import Computer

    close_old_connections()
    account = Account.objects.create(name="Steps")
    account_top_up(account=account, microcredits=10**12, actor="bench")
    computer = Computer.objects.create(id="steps-1", account=account, name="steps-1").pk
    return {"key": api_key_create(account=account, kind="runner")[1], "computer": computer}


def _step_timings(run_id: str) -> dict[str, Any]:
    """From the run's own records: the gaps between one step's end and the next one's start (the
    loop's overhead: settle, the next decision, the record), each tool's time, and creation → first step."""
    from django.db import close_old_connections

    from runs.models import Run, RunStep

    close_old_connections()
    run = Run.objects.get(pk=run_id)
    steps = list(RunStep.objects.filter(run_id=run_id).order_by("index"))
    gaps = [(b.started_at - a.finished_at).total_seconds() for a, b in zip(steps, steps[1:], strict=False) if a.finished_at]
    tools = [(s.finished_at - s.started_at).total_seconds() for s in steps if s.finished_at]
    return {"gaps": gaps, "tools": tools, "first": (steps[0].started_at - run.created_at).total_seconds()}


def steps_phase() -> dict[str, Any]:
    data = _steps_setup()
    rows: dict[int, dict[str, list[float]]] = {}
    with embedded([data["computer"]]) as client:
        headers = {"Authorization": f"Bearer {data['key']}"}
        for count in (1, *STEP_COUNTS):  # the first run warms imports, connections and the page
            task = {"goal": "read", "steps": [{"tool": "extract_text", "arguments": {}}] * count}
            measured: dict[str, list[float]] = {"total": [], "overhead": [], "tool": [], "first": []}
            for _ in range(1 if count == 1 else REPEATS):
                started = time.perf_counter()
                response = client.post(
                    "/api/runs", json={"computer_id": data["computer"], "task": task, "max_model_calls": count + 1}, headers=headers
                )
                run_id = str(response.json()["id"])
                while client.get(f"/api/runs/{run_id}", headers=headers).json()["status"] not in TERMINAL:
                    time.sleep(0.02)
                measured["total"].append(time.perf_counter() - started)
                timing = _step_timings(run_id)
                measured["overhead"].append(statistics.median(timing["gaps"]) if timing["gaps"] else 0.0)
                measured["tool"].append(statistics.median(timing["tools"]))
                measured["first"].append(timing["first"])
            if count != 1:
                rows[count] = measured
    return {"rows": rows, "load_before": os.getloadavg()[0]}


def steps_report(result: dict[str, Any], load_before: float) -> None:
    from django.conf import settings

    cores = os.cpu_count() or 1
    ms = lambda values: f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}–{max(values) * 1000:.0f})"  # noqa: E731

    def verdict(value: float, goal: float) -> str:
        if load_before > cores:
            return f"not judged (load {load_before:.2f} > {cores})"
        return "met" if value <= goal else "not met"

    print(f"\nload average before the steps runs: {load_before:.2f} ({cores} CPUs)")
    rows = []
    for count, measured in result["rows"].items():
        rows.append([f"{count} × extract_text", "loop overhead per step (p50 of gaps)", ms(measured["overhead"]),
                     "≤ 25 ms", verdict(statistics.median(measured["overhead"]), STEPS_GOALS["overhead"])])
        rows.append([f"{count} × extract_text", "tool time per step (p50)", ms(measured["tool"]), "—", "—"])
        rows.append([f"{count} × extract_text", "POST → first step recorded", ms(measured["first"]),
                     "≤ 100 ms", verdict(statistics.median(measured["first"]), STEPS_GOALS["first"])])
        goal = "≤ 2 s" if count == 40 else "—"
        judged = verdict(statistics.median(measured["total"]), STEPS_GOALS["forty"]) if count == 40 else "—"
        rows.append([f"{count} × extract_text", "POST → finished (end to end)", ms(measured["total"]), goal, judged])
    table(
        f"steps: a scripted run's loop overhead, embedded default (filesystem transport, SQLite), "
        f"RAM_RUN_SLICE_SECONDS {settings.RAM_RUN_SLICE_SECONDS:g}; median of {REPEATS} runs (min–max)",
        ["run", "what", "figure", "goal", "verdict"],
        rows,
    )
