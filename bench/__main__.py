"""``python -m bench``: the REST API under wrk, the jpeg-websocket-v1 gateway measured against raw CDP,
the run loop's steps (``bench/steps.py``), ``browser_login`` on a local portal (``bench/login.py``)
and the run queue's fairness between accounts (``bench/queue.py``).

Everything runs on this machine in a throw-away directory: SQLite, the
in-memory channel layer, one executor process (Chromium) and the gateway in a
uvicorn process, as ``make run`` starts them. Clients are real WebSocket
clients in this process. The tables are printed and written to ``docs/bench.md``
(``bench/page.py``: the latest figures of each table, with the machine and the load average);
nothing here is a pass/fail test (speed lives here, not in the test suite).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each fps/latency window")
    parser.add_argument("--rss-seconds", type=float, default=300.0, help="length of the stalled-viewer RSS window")
    parser.add_argument("--viewers", default="1,4,8,16,32", help="viewer counts for the per-core table")
    parser.add_argument("--slow-seconds", type=float, default=60.0, help="length of the slow-link window")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of every phase (figures: median [min–max])")
    parser.add_argument("--api-seconds", type=float, default=5.0, help="length of each wrk window")
    parser.add_argument(
        "--api-postgres",
        default="",
        help="also run the api table on PostgreSQL: a URL of its server (the bench drops and creates its own "
        "database ram_bench_api there, migrates and seeds it)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated phases to run (api,connect,fps,change,inputs,latency,viewers,rss,compression,slowlink,steps,"
        "browser_login,queue,webhooks,computers,recording); all when empty",
    )
    parser.add_argument("--steps-postgres", default="", help="also run the steps table on this PostgreSQL database URL…")
    parser.add_argument("--steps-redis", default="", help="…with this Redis URL as the broker and the channel layer")
    parser.add_argument("--webhook-samples", type=int, default=20, help="pauses measured per broker in the webhooks phase")
    parser.add_argument("--page", default=str(ROOT / "docs" / "bench.md"), help="the page the tables are written to")
    parser.add_argument("--no-page", action="store_true", help="print the tables only")
    args = parser.parse_args()
    try:
        measure(args)
    finally:
        if not args.no_page:
            from bench import page
            from bench.run import MEASURED

            page.write(Path(args.page), MEASURED)


def measure(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="ram-bench-"))
    os.environ.update(
        {
            "RAM_VAR_DIR": str(work),
            "DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}",
            "REDIS_URL": "",
            "VAULT_ADDR": "http://127.0.0.1:9",  # the gateway never talks to Vault
            "RAM_VISUAL_MAX_SOCKETS": "1000",
            "RAM_VISUAL_MAX_PENDING_TICKETS": "1000",
            "RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT": "1000",
            "RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT": "1000",
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "ramsite.settings",
        }
    )
    sys.path.insert(0, str(ROOT))
    only = {phase.strip() for phase in args.only.split(",") if phase.strip()}
    if not only or "webhooks" in only:
        from bench.run import table
        from bench.webhooks import rows

        load = os.getloadavg()
        table(
            "Webhooks: a run's pause (commit) → its signed run.paused at a receiver on loopback, one worker",
            ["broker", "pauses", "p50", "p95", "max"],
            rows(work, args.webhook_samples),
            load,
        )
    if not only or "recording" in only:
        from bench.recording import report
        from bench.recording import rows as recording_rows

        load = os.getloadavg()
        report(load, recording_rows())
    own = {"queue", "webhooks", "computers", "recording"}
    if not only or only - own:
        from bench.run import run_all

        asyncio.run(run_all(work, args))
    if not only or only & own:
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from bench.queue import queue_phase, report

        if not only or "queue" in only:
            print("run queue: one account floods 200 runs, another's one-step run is timed…", flush=True)
            report(queue_phase())
        if not only or "computers" in only:
            from bench import computers

            print("computers on demand: starts, memory, runs over 3 computers against 1…", flush=True)
            computers.report(computers.computers_phase())


if __name__ == "__main__":
    main()
