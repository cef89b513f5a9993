"""The ``steps`` table: the run loop's cost per step, measured as ``make run`` runs it.

Each repeat is a child process (``python -m bench.steps child``) with a database and a broker of
its own: it starts the web server, one Celery worker (``RAM_WORKER_CONCURRENCY``) and one
executor (Chromium), as the embedded default does (SQLite, the filesystem transport) or, with
``--steps-postgres`` and ``--steps-redis``, on PostgreSQL and Redis; then it measures

- ``POST /api/runs`` → the first step recorded (the record is written right before the tool call),
  from the client's clock before the POST, for three one-step runs;
- a 40-step ``extract_text`` run: ``POST`` → the run's end as recorded (``finished_at``; it is
  polled every 100 ms only to know when); the period between two steps' records (p50), the
  tool's own time (p50 of the same ``extract_text`` called directly on one kept executor
  connection), and the loop overhead per step = period − tool; also the gap between one step's
  settle and the next step's record, and the CPU time per step of the worker, the executor (with
  Playwright's driver and Chromium) and the web server — the figure a busy machine changes least;
- a ``request_takeover`` step: its record → ``waiting_for_input`` seen by ``GET /api/runs/{id}``
  (polled every 5 ms; a takeover pause's masked screenshot is taken right after the pause is
  written, ``runs.browser.pause_captured_after``), beside that screenshot's own time (the
  executor's ``screenshot`` on a kept connection).

The figures are the median [min–max] of the repeats; nothing here is a pass/fail test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STEPS = 40
FIRST_RUNS = 3
TERMINAL = {"succeeded", "failed", "cancelled"}
GOALS = {"overhead": 0.025, "total": 2.0, "first": 0.100, "pause": 0.100}
MARK = "STEPSJSON "


def _setup() -> dict[str, Any]:
    from accounts.models import Account
    from accounts.services import account_top_up, api_key_create
    from computers.models import Computer

    account = Account.objects.create(name="Steps")
    account_top_up(account=account, microcredits=10**12, actor="bench")
    computer = Computer.objects.create(id=f"steps-{uuid.uuid4().hex[:8]}", account=account, name="steps").pk
    return {"key": api_key_create(account=account, kind="runner")[1], "computer": computer}


def _post(client: Any, data: dict[str, Any], steps: list[dict[str, Any]]) -> tuple[str, float]:
    """Create a run; its id and the wall clock just before the request was sent."""
    sent = time.time()
    response = client.post(
        "/api/runs",
        json={"computer_id": data["computer"], "task": {"goal": "bench", "steps": steps}, "max_model_calls": len(steps) + 1},
        headers={"Authorization": f"Bearer {data['key']}"},
    )
    if response.status_code != 201:
        raise RuntimeError(f"run refused: {response.status_code} {response.text}")
    return str(response.json()["id"]), sent


def _wait(client: Any, data: dict[str, Any], run_id: str, statuses: set[str], every: float) -> float:
    """Poll ``GET /api/runs/{id}`` until its status is one of ``statuses``; the wall clock then."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        body = client.get(f"/api/runs/{run_id}", headers={"Authorization": f"Bearer {data['key']}"}).json()
        if body["status"] in statuses:
            return time.time()
        time.sleep(every)
    raise RuntimeError(f"run {run_id} did not reach {statuses}")


def _steps(run_id: str) -> list[Any]:
    from django.db import close_old_connections

    from runs.models import RunStep

    close_old_connections()
    return list(RunStep.objects.filter(run_id=run_id).order_by("index"))


def _finished_at(run_id: str) -> float:
    from django.db import close_old_connections

    from runs.models import Run

    close_old_connections()
    finished = Run.objects.get(pk=run_id).finished_at
    if finished is None:
        raise RuntimeError(f"run {run_id} has no end")
    return float(finished.timestamp())


def _tool_time(computer_id: str) -> tuple[float, float]:
    """``extract_text`` called directly, 20 times on one kept connection under one lease, and the
    masked ``screenshot`` a pause takes, 5 times: their p50."""
    from computers.client import ExecutorClient, ExecutorError, executor_connections_kept
    from computers.models import Computer

    times = []
    with executor_connections_kept():
        client = ExecutorClient(Computer.objects.get(pk=computer_id))
        deadline = time.monotonic() + 10
        while True:  # the cancelled run's lease is released just after its cancel
            try:
                lease = client.lease_acquire()
                break
            except ExecutorError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        try:
            for _ in range(20):
                started = time.perf_counter()
                client.extract_text(lease)
                times.append(time.perf_counter() - started)
            shots = []
            for _ in range(5):
                started = time.perf_counter()
                client.screenshot(lease)
                shots.append(time.perf_counter() - started)
        finally:
            client.lease_release(lease)
    return statistics.median(times), statistics.median(shots)


def measure_here() -> dict[str, Any]:
    """One repeat, in this process (its environment names the database and the broker)."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from bench.procs import tree_cpu_seconds
    from bench.queue import embedded_processes

    data = _setup()
    extract = {"tool": "extract_text", "arguments": {}}
    with embedded_processes([data["computer"]]) as (client, pids):

        def cpu() -> dict[str, float]:
            return {role: sum(tree_cpu_seconds(pid) for pid in members) for role, members in pids.items()}

        run_id, _ = _post(client, data, [extract])  # warm: imports, connections, the page
        _wait(client, data, run_id, TERMINAL, 0.02)
        first = []
        for _ in range(FIRST_RUNS):
            run_id, sent = _post(client, data, [extract])
            _wait(client, data, run_id, TERMINAL, 0.02)
            first.append(_steps(run_id)[0].started_at.timestamp() - sent)
        cpu_before = cpu()
        run_id, sent = _post(client, data, [extract] * STEPS)
        _wait(client, data, run_id, TERMINAL, 0.1)  # slowly: the polling would eat the CPU it measures
        cpu_after = cpu()
        total = _finished_at(run_id) - sent
        steps = [s for s in _steps(run_id) if s.tool == "extract_text"]
        if len(steps) != STEPS or any(s.state != "succeeded" for s in steps):
            raise RuntimeError("the 40-step run did not succeed step by step")
        period = statistics.median((b.started_at - a.started_at).total_seconds() for a, b in zip(steps, steps[1:], strict=False))
        gap = statistics.median((b.started_at - a.finished_at).total_seconds() for a, b in zip(steps, steps[1:], strict=False))
        in_step = statistics.median((s.finished_at - s.started_at).total_seconds() for s in steps)
        run_id, _ = _post(client, data, [{"tool": "request_takeover", "arguments": {"reason": "other"}}])
        seen = _wait(client, data, run_id, {"waiting_for_input"}, 0.005)
        pause = seen - _steps(run_id)[0].started_at.timestamp()
        client.post(f"/api/runs/{run_id}/cancel", headers={"Authorization": f"Bearer {data['key']}"})
        tool, shot = _tool_time(data["computer"])
    per_step = {role: (cpu_after[role] - cpu_before[role]) / (STEPS + 1) for role in cpu_before}
    return {
        "cpu_worker": per_step["worker"],
        "cpu_executor": per_step["executors"],  # the executor, its Playwright driver and Chromium
        "cpu_web": per_step["web"],
        "first": statistics.median(first),
        "total": total,
        "period": period,
        "gap": gap,
        "in_step": in_step,
        "tool": tool,
        "overhead": period - tool,
        "pause": pause,
        "shot": shot,
    }


def measure(label: str, env: dict[str, str]) -> dict[str, Any]:
    """One repeat in a child process with ``env`` over this one's (and a var dir of its own)."""
    work = tempfile.mkdtemp(prefix="ram-bench-steps-")
    child_env = {**os.environ, "RAM_VAR_DIR": work, "DATABASE_URL": f"sqlite:///{work}/steps.sqlite3", "REDIS_URL": "", **env}
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "bench.steps", "child"], cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=900, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(f"the steps child ({label}) failed: {out.stderr[-2000:]}")
    return json.loads(line.removeprefix(MARK))


async def phase(args: Any) -> dict[str, Any]:
    """One repeat of every variant: the embedded default, and PostgreSQL + Redis when given."""
    import asyncio

    print("steps: a 40-step extract_text run, three one-step runs and a request_takeover step…", flush=True)
    sample = {"embedded default (SQLite, filesystem transport)": await asyncio.to_thread(measure, "embedded", {})}
    if args.steps_postgres and args.steps_redis:
        env = {"DATABASE_URL": args.steps_postgres, "REDIS_URL": args.steps_redis}
        sample["PostgreSQL + Redis"] = await asyncio.to_thread(measure, "postgres", env)
    return sample


def report(samples: list[dict[str, Any]], load: tuple[float, float, float], repeats: int) -> None:
    from bench.run import spread, table, verdict

    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    rows = []
    for variant in samples[0]:
        figures = {k: [sample[variant][k] for sample in samples] for k in samples[0][variant]}
        median = {k: statistics.median(v) for k, v in figures.items()}
        rows += [
            [variant, "loop overhead per step: period between two steps' records − the tool's own time (p50)",
             spread(figures["overhead"], ms), "≤ 25 ms", verdict(median["overhead"] <= GOALS["overhead"], load)],
            [variant, "  period between two steps' records (p50)", spread(figures["period"], ms), "", ""],
            [variant, "  the tool's own time (extract_text on a kept connection, p50)", spread(figures["tool"], ms), "", ""],
            [variant, "  a step's record → its settle (p50)", spread(figures["in_step"], ms), "", ""],
            [variant, "  a step's settle → the next step's record (p50)", spread(figures["gap"], ms), "", ""],
            [variant, "  CPU per step: worker (all its processes)", spread(figures["cpu_worker"], ms), "", ""],
            [variant, "  CPU per step: executor, its driver and Chromium", spread(figures["cpu_executor"], ms), "", ""],
            [variant, "  CPU per step: web server (the bench's polling included)", spread(figures["cpu_web"], ms), "", ""],
            [variant, f"{STEPS} × extract_text: POST → finished", spread(figures["total"], ms), "≤ 2 s",
             verdict(median["total"] <= GOALS["total"], load)],
            [variant, "POST /api/runs → first tool call (its step recorded)", spread(figures["first"], ms), "≤ 100 ms",
             verdict(median["first"] <= GOALS["first"], load)],
            [variant, "request_takeover recorded → waiting_for_input in GET /api/runs/{id}", spread(figures["pause"], ms),
             "≤ 100 ms", verdict(median["pause"] <= GOALS["pause"], load)],
            [variant, "  the pause's masked screenshot, taken right after the pause is written (p50)", spread(figures["shot"], ms), "", ""],
        ]
    table(
        f"steps: the run loop, scripted agent, one worker (concurrency {os.environ.get('RAM_WORKER_CONCURRENCY', '2')}), "
        f"median [min–max] of {repeats} repeats",
        ["setup", "figure", "value", "goal", "verdict"],
        rows,
        load,
    )


if __name__ == "__main__":
    if sys.argv[1:2] != ["child"]:
        raise SystemExit("usage: python -m bench.steps child")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")
    sys.path.insert(0, str(ROOT))
    print(MARK + json.dumps(measure_here()), flush=True)
