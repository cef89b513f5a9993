"""A real Celery worker killed in the middle of a step leaves exactly one effect:
the redelivered task finds the step it never finished and pauses the run for a
person instead of repeating it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor.runtime import Executor
from ramsite.celery import app
from runs.models import Run, RunEvent, RunStep
from runs.services import run_create
from tests.support.tiers import live
from tests.support.waits import eventually

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql" or not settings.REDIS_URL,
    reason="a real worker needs the shared PostgreSQL database and the Redis broker",
)


class Effects:
    def __init__(self) -> None:
        self.hits = 0


@pytest.fixture
@live
def effects() -> Iterator[tuple[str, Effects]]:
    seen = Effects()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/effect":  # not the favicon Chromium asks for once the page arrives
                seen.hits += 1
            time.sleep(20)  # the side effect is in flight when the worker dies
            self.send_response(200)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "--pool=solo", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_killed_worker_produces_exactly_one_effect(
    screen: Executor, account: Account, effects: tuple[str, Effects], allow_egress: Callable[[str], None]
) -> None:
    url, seen = effects
    allow_egress(url)
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "RAM_STEP_MAX_SECONDS": "3",
        "RAM_CELERY_VISIBILITY_TIMEOUT": "4",
    }
    app.control.purge()
    first = _worker(env)
    second: subprocess.Popen[bytes] | None = None
    try:
        run = run_create(
            account=account,
            computer=Computer.objects.get(pk="pc-1"),
            task={"goal": "x", "steps": [{"tool": "navigate", "arguments": {"url": url + "/effect"}}, {"tool": "finish"}]},
            max_model_calls=5,
        )
        eventually(lambda: seen.hits == 1, 60, interval=0.2, what="the first worker to start the side effect")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        assert RunStep.objects.get(run=run, index=0).state == "started"
        time.sleep(5)  # past the visibility timeout and the step's maximum duration
        second = _worker(env)
        # The redelivered task finds the step started and pauses the run instead of running it again:
        # the pause is the later event, a second hit would have come before it.
        eventually(lambda: Run.objects.get(pk=run.pk).status == "waiting_for_input", 90, interval=0.2, what="the redelivered step")
        run.refresh_from_db()
        assert seen.hits == 1, "the side effect happened exactly once"
        assert run.pause_kind == "takeover"
        assert list(run.steps.values_list("index", "state")) == [(0, "uncertain")]
        assert RunEvent.objects.filter(run=run, kind="step_uncertain").count() == 1
        assert run.model_calls == 1
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
