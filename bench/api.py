"""The ``api`` table: the REST API under ``wrk`` (Debian's native HTTP load generator, so the
load generator does not eat a core the server needs), against the web server exactly as
``make run`` starts it (``run_embedded.serve_web``: same uvicorn flags, same number of web
processes), on SQLite (the embedded default) and, with ``--api-postgres``, on PostgreSQL: the
bench drops and creates its own database there (``ram_bench_api``), migrates and seeds it.

``python -m bench.api seed`` (run with the DATABASE_URL to fill) prints the key and the ids the
table reads; ``python -m bench.api serve PORT`` is the web server.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench.procs import tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
LIST_RUNS = 25  # the 20-run page reads from more runs than it shows
POSTGRES_DATABASE = "ram_bench_api"  # the api table's own database on --api-postgres's server

# wrk's own summary as one JSON line: requests, duration (µs), errors and latency percentiles (µs).
WRK_REPORT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,"p50":%d,"p95":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99)))
end
"""

# (label, path template, goal req/s at 16 clients, goal server CPU per request in ms); the 1-client
# goal is a p50.
ENDPOINTS = [
    ("GET /api/runs/{id}", "/api/runs/{run}", 600, 1.5),
    ("GET …/intervention-descriptor", "/api/runs/{run}/intervention-descriptor", 600, 1.5),
    ("GET /api/runs?limit=20", "/api/runs?limit=20", 300, 3.0),
    ("GET /api/computers", "/api/computers", None, None),
    # The floor: the same middleware, routing and key check, then an empty answer (bench/urls.py).
    ("GET key check only (floor)", "/api/bench/key-check", None, None),
]
P95_GOAL_MS = 50.0
ONE_CLIENT_P50_GOAL_MS = 3.0


def fresh_postgres(server_url: str) -> str:
    """The URL of ``POSTGRES_DATABASE`` on ``server_url``'s server, dropped and created empty (any
    database named in ``server_url`` is ignored; the drop and create go through ``postgres``)."""
    import psycopg

    parts = urllib.parse.urlsplit(server_url)
    maintenance = urllib.parse.urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {POSTGRES_DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {POSTGRES_DATABASE}")
    return urllib.parse.urlunsplit(parts._replace(path="/" + POSTGRES_DATABASE))


def seed() -> dict[str, str]:
    """An account with a computer, a runner key, a run paused for a takeover and ``LIST_RUNS`` runs."""
    import django

    django.setup()
    from django.core.management import call_command

    from accounts.models import Account
    from accounts.services import api_key_create
    from computers.models import Computer
    from runs.contracts import TakeoverPause
    from runs.services import run_create, run_pause

    call_command("migrate", verbosity=0)
    account = Account.objects.create(name="Bench API")
    computer = Computer.objects.create(id=f"bench-api-{os.getpid()}", account=account, name="Bench API")
    for _ in range(LIST_RUNS - 1):
        run_create(account=account, computer=computer, task={"goal": "bench"}, max_model_calls=3)
    run = run_create(account=account, computer=computer, task={"goal": "bench"}, max_model_calls=3)
    run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
    key = api_key_create(account=account, kind="runner")[1]
    return {"key": key, "run": str(run.id), **_long_action()}


def _long_action() -> dict[str, str]:
    """Another account whose external run has one action recorded as started (its tool never runs):
    the long-polls of the api table's last rows wait on it."""
    from accounts.models import Account
    from accounts.services import account_top_up, api_key_create
    from computers.models import Computer
    from runs import external
    from runs.loop import run_ready
    from runs.services import run_create
    from runs.tool_calls import ToolCall

    account = Account.objects.create(name="Bench API long-polls")
    account_top_up(account=account, microcredits=1_000_000, actor="bench")
    computer = Computer.objects.create(id=f"bench-wait-{os.getpid()}", account=account, name="Bench waits")
    run = run_create(
        account=account, computer=computer, task={"goal": "wait"}, max_model_calls=3, agent_config={"type": "external"}
    )
    run_ready(run.id)
    call = ToolCall(tool="wait_for", arguments={"selector": "#never", "timeout_ms": 20_000})
    step, _ = external._record(run.id, call, "bench-long-0001", external._digest(call))
    key = api_key_create(account=account, kind="runner")[1]
    return {"wait_key": key, "wait_path": f"/api/runs/{run.id}/actions/{step.pk}?wait=25"}


def _hold(url: str, key: str) -> None:
    """One long-poll, held until the server answers it (at most 25 s)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=40) as answer:  # noqa: S310 - loopback
            answer.read()
    except OSError:
        pass


def wrk(url: str, key: str, *, clients: int, seconds: float) -> dict[str, float]:
    """One wrk window; latencies in seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_REPORT)
    try:
        argv = [
            shutil.which("wrk") or "wrk",
            f"-t{min(clients, 2)}",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            "--timeout=10s",
            "-s",
            script.name,
            "-H",
            f"Authorization: Bearer {key}",
            url,
        ]
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout  # noqa: S603
    finally:
        os.unlink(script.name)
    line = next(x for x in out.splitlines() if x.startswith("WRKJSON "))
    data = json.loads(line.removeprefix("WRKJSON "))
    return {
        "rps": data["requests"] / (data["duration_us"] / 1e6),
        "p50": data["p50"] / 1e6,
        "p95": data["p95"] / 1e6,
        "failed": data["errors"] + data["non2xx"],
    }


def measure(url: str, key: str, server_pid: int, *, clients: int, seconds: float) -> dict[str, float]:
    """A wrk window and the server's CPU per answered request over it."""
    cpu = tree_cpu_seconds(server_pid)
    started = time.monotonic()
    result = wrk(url, key, clients=clients, seconds=seconds)
    elapsed = time.monotonic() - started
    requests = result["rps"] * min(elapsed, max(1, round(seconds)))
    result["cpu_ms"] = (tree_cpu_seconds(server_pid) - cpu) * 1000 / requests if requests else float("nan")
    return result


def api_phase(database_url: str, *, seconds: float, repeats: int) -> list[dict[str, Any]]:
    """Seed, start the web server as ``make run`` does, then each endpoint at 16 clients and the
    run read at 1 client, ``repeats`` windows each; one row per (endpoint, clients) with lists."""
    # The long-polls of the last rows are more than the account bound's default: raised for them.
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "RAM_ACCOUNT_MAX_LONG_WAITS": "64",
    }
    seeding = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "bench.api", "seed"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if seeding.returncode != 0:  # its own error, not only an exit status
        raise RuntimeError(f"the api table's seed step failed:\n{seeding.stderr[-3000:]}")
    ids = json.loads(seeding.stdout.strip().splitlines()[-1])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    origin = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "bench.api", "serve", str(port)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL
    )
    rows: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{origin}/healthz", timeout=2) as answer:  # noqa: S310 - loopback
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the web server did not start")
            time.sleep(0.3)
        plan = [(label, path, 16, goal, cpu) for label, path, goal, cpu in ENDPOINTS]
        plan.append((ENDPOINTS[0][0], ENDPOINTS[0][1], 1, None, None))
        for label, path, clients, goal, cpu_goal in plan:
            url = origin + path.format(run=ids["run"])
            wrk(url, ids["key"], clients=clients, seconds=1)  # warm-up: every worker, thread and connection
            windows = [measure(url, ids["key"], server.pid, clients=clients, seconds=seconds) for _ in range(repeats)]
            rows.append(
                {
                    "endpoint": label,
                    "clients": clients,
                    "goal_rps": goal,
                    "goal_cpu_ms": cpu_goal,
                    **{name: [w[name] for w in windows] for name in ("rps", "p50", "p95", "cpu_ms", "failed")},
                }
            )
        rows += _beside_long_polls(origin, ids, server.pid, seconds=seconds, repeats=repeats)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return rows


def _beside_long_polls(origin: str, ids: dict[str, str], pid: int, *, seconds: float, repeats: int) -> list[dict[str, Any]]:
    """Another tenant's run list at 1 client, idle and then while one tenant holds more long-polls
    than the web process has threads (goal: at most twice its idle p50)."""
    url = origin + "/api/runs?limit=20"
    rows: list[dict[str, Any]] = []
    polls = int(os.environ.get("RAM_WEB_THREADS", "4")) + 1
    idle = [measure(url, ids["key"], pid, clients=1, seconds=seconds) for _ in range(repeats)]
    rows.append({"endpoint": "GET /api/runs?limit=20, idle", "clients": 1, "goal_rps": None, "reference": True})
    holders = [threading.Thread(target=_hold, args=(origin + ids["wait_path"], ids["wait_key"]), daemon=True) for _ in range(polls)]
    for holder in holders:
        holder.start()
    time.sleep(1)  # every long-poll has arrived and waits
    busy = [measure(url, ids["key"], pid, clients=1, seconds=seconds) for _ in range(min(repeats, max(1, int(20 // (seconds + 1)))))]
    rows.append(
        {
            "endpoint": f"GET /api/runs?limit=20, another tenant holding {polls} long-polls",
            "clients": 1,
            "goal_rps": None,
            "max_p50": 2 * statistics.median(w["p50"] for w in idle),
        }
    )
    for row, windows in zip(rows, (idle, busy), strict=True):
        row.update({name: [w[name] for w in windows] for name in ("rps", "p50", "p95", "cpu_ms", "failed")})
    for holder in holders:
        holder.join(timeout=40)
    return rows


def serve(port: int) -> None:
    """The web server as ``make run`` starts it (its number of processes included)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from ramsite.management.commands.run_embedded import serve_web

    serve_web(host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    if sys.argv[1:2] == ["seed"]:
        print(json.dumps(seed()))
    elif sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]))
    else:
        raise SystemExit("usage: python -m bench.api seed | serve PORT")


if __name__ == "__main__":
    main()
