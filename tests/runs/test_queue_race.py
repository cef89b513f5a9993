"""Several runs racing for one computer, created at once through the REST API and run by
a real Celery worker (three processes) on PostgreSQL and Redis against a real Chromium:
their steps never interleave and every run ends honestly, with its own output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from accounts.models import Account
from accounts.services import account_top_up
from ramsite.celery import app
from runs.models import Run, RunEvent, RunStep
from tests.support.waits import eventually

ROOT = Path(__file__).resolve().parents[2]
RUNS = 6

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql" or not settings.REDIS_URL,
    reason="a real worker needs the shared PostgreSQL database and the Redis broker",
)

# Whatever is typed shows in #out; the page is the same for every run.
FORM = b"""<!doctype html><title>Form</title><input id=box>
<p id=out></p><script>document.getElementById('box').addEventListener('input',
e => { document.getElementById('out').textContent = e.target.value; });</script>"""


@pytest.fixture
def form_page() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(FORM)))
            self.end_headers()
            self.wfile.write(FORM)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _create(origin: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{origin}/api/runs",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - a loopback test server
        assert response.status == 201
        return dict(json.loads(response.read()))


def test_runs_racing_for_one_computer_never_interleave_and_all_end_honestly(
    screen: Any,
    live_origin: str,
    account: Account,
    runner_key: str,
    form_page: str,
    allow_egress: Callable[[str], None],
    settings: Any,
) -> None:
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = RUNS  # only the computer may keep them apart
    allow_egress(form_page)
    account_top_up(account=account, microcredits=10_000_000, actor="test")
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "RAM_ACCOUNT_MAX_ACTIVE_RUNS": str(RUNS),
    }
    app.control.purge()
    worker = subprocess.Popen(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "--concurrency=3", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        bodies = [
            {
                "computer_id": "pc-1",
                "task": {
                    "goal": f"type run-{i}",
                    "steps": [
                        {"tool": "navigate", "arguments": {"url": f"{form_page}/?run={i}"}},
                        {"tool": "type", "arguments": {"selector": "#box", "text": f"run-{i}"}},
                        {"tool": "extract_text", "arguments": {"selector": "#out"}},
                    ],
                },
                "max_model_calls": 10,
            }
            for i in range(RUNS)
        ]
        created: list[dict[str, Any]] = [{}] * RUNS
        barrier = threading.Barrier(RUNS)

        def post(index: int) -> None:
            barrier.wait()
            created[index] = _create(live_origin, runner_key, bodies[index])

        threads = [threading.Thread(target=post, args=(i,)) for i in range(RUNS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ids = [run["id"] for run in created]
        statuses = sorted(run["status"] for run in created)
        assert statuses.count("running") <= 1, "one run per computer from the first answer on"
        assert all(run["queue_position"] >= 1 for run in created if run["status"] == "queued")

        # One query: two counts could miss a run that moves from queued to running between them.
        eventually(lambda: not Run.objects.filter(pk__in=ids, status__in=["running", "queued"]).exists(), 180, interval=0.2, what="every run to end")

        runs = {str(run.pk): run for run in Run.objects.filter(pk__in=ids)}
        for index, run_id in enumerate(ids):
            run = runs[run_id]
            assert run.status == "succeeded", (run.status, run.result)
            assert run.result == {"outcome": "succeeded", "output": f"run-{index}"}, "its own text, not another run's"
            assert not run.holds_computer
            kinds = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
            assert kinds.index("run_queued") < kinds.index("run_started") < kinds.index("step_started")
        steps = list(RunStep.objects.filter(run_id__in=ids).order_by("started_at", "id"))
        assert len(steps) == RUNS * 4  # three tools and the finish
        assert all(step.result is None or not step.result.get("isError") for step in steps)
        order = [str(step.run_id) for step in steps]
        blocks = [run_id for i, run_id in enumerate(order) if i == 0 or order[i - 1] != run_id]
        assert len(blocks) == RUNS, f"the runs' steps interleaved: {order}"
        for before, after in zip(steps, steps[1:], strict=False):
            assert before.finished_at is not None and before.finished_at <= after.started_at, "one step at a time"
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
