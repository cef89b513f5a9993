"""The ``webhooks`` phase of ``python -m bench``: how long a run's pause takes, from its
commit, to reach a receiver on loopback as a signed ``run.paused`` webhook, through a real
Celery worker consuming the ``webhooks`` queue.

It is measured twice, each in a child process with its own settings and a fresh SQLite
database under the work directory: with the embedded default's filesystem broker, and with
Redis when ``RAM_BENCH_REDIS_URL`` names a Redis database the benchmark may use (it is
flushed of RAM's queues). Nothing here passes or fails: the table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _child(samples: int) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command

    from accounts.models import Account
    from ramsite.celery import app
    from runs.contracts import TakeoverPause
    from runs.models import Run
    from runs.pauses import run_pause
    from webhooks import services

    call_command("migrate", verbosity=0)
    arrivals: list[float] = []
    arrived = threading.Condition()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(204)
            self.end_headers()
            with arrived:
                arrivals.append(time.time())
                arrived.notify_all()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    app.control.purge()
    with app.connection_for_write() as broker:
        try:
            broker.default_channel.queue_purge("webhooks")
        except Exception:  # noqa: BLE001, S110 - never declared: nothing to purge
            pass
    account = Account.objects.create(name="bench")
    services.webhook_create(
        account=account, url=f"http://127.0.0.1:{server.server_address[1]}/hook", event_types=["run.paused"]
    )
    worker = subprocess.Popen(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "-Q", "webhooks", "--pool=solo",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=WARNING"],
        cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    def pause_and_wait(seconds: float) -> float:
        run = Run.objects.create(account=account, computer=None, task={"goal": "bench"}, max_model_calls=3)
        with arrived:
            before = len(arrivals)
        committed = time.time()
        run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
        with arrived:
            if not arrived.wait_for(lambda: len(arrivals) > before, timeout=seconds):
                raise RuntimeError("no webhook arrived")
            return arrivals[before] - committed

    try:
        pause_and_wait(60)  # the worker is up and warm
        latencies = [pause_and_wait(20) for _ in range(samples)]
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        server.shutdown()
    latencies.sort()
    return {
        "samples": samples,
        "p50": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))],
        "max": latencies[-1],
    }


def measure(work: Path, *, name: str, redis_url: str, samples: int) -> dict[str, Any]:
    folder = work / f"webhooks-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "RAM_VAR_DIR": str(folder),
        "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
        "REDIS_URL": redis_url,
        "RAM_WEBHOOK_EGRESS_ALLOW": "127.0.0.1/32",
        "RAM_WEBHOOK_SECRET_KEYS": "",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "ramsite.settings",
    }
    result = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "bench.webhooks", "--child", "--samples", str(samples)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"the webhook benchmark ({name}) failed:\n{result.stderr[-2000:]}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def rows(work: Path, samples: int) -> list[list[str]]:
    """The table's rows: the embedded default's broker, and Redis when RAM_BENCH_REDIS_URL is set."""
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    configurations = [("embedded (filesystem broker, SQLite)", "embedded", "")]
    redis_url = os.environ.get("RAM_BENCH_REDIS_URL", "")
    if redis_url:
        configurations.append(("Redis broker (SQLite)", "redis", redis_url))
    table = []
    for label, name, url in configurations:
        print(f"webhooks: pause → receiver, {label}…", flush=True)
        r = measure(work, name=name, redis_url=url, samples=samples)
        table.append([label, str(r["samples"]), ms(r["p50"]), ms(r["p95"]), ms(r["max"])])
    if not redis_url:
        table.append(["Redis broker: set RAM_BENCH_REDIS_URL to measure", "—", "—", "—", "—"])
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks")
    parser.add_argument("--child", action="store_true", help="measure in this process's environment")
    parser.add_argument("--samples", type=int, default=20)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(json.dumps(_child(options.samples)))
