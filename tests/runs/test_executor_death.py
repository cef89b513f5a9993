"""An executor that dies while a step's action is in flight: the answer is lost, so the step is
``uncertain`` at once (not a failure the run could be retried on), the run pauses for a person, and
the side effect happened exactly once."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run, RunEvent, RunStep
from runs.services import run_create
from tests.support.executors import start_executor_process
from tests.support.waits import eventually

pytestmark = pytest.mark.live


@pytest.fixture
def slow_effect() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/effect":
                hits.append(self.path)
                time.sleep(15)  # in flight when the executor dies
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_an_executor_killed_mid_action_leaves_the_step_uncertain_and_never_replays_it(
    live_origin: str, account: Account, make_computer: Callable[..., Computer], slow_effect: tuple[str, list[str]]
) -> None:
    host_port, hits = slow_effect
    make_computer(account, "pc-dies")
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    process = start_executor_process("pc-dies", live_origin, new_session=True, RAM_BROWSER_EGRESS_ALLOW=host_port)
    try:
        eventually(lambda: Computer.objects.filter(pk="pc-dies", status="ready").exists(), 60, interval=0.1)
        steps = [{"tool": "navigate", "arguments": {"url": f"http://{host_port}/effect"}}, {"tool": "finish"}]
        run = run_create(account=account, computer=Computer.objects.get(pk="pc-dies"), task={"goal": "x", "steps": steps}, max_model_calls=5)
        went_on: list[bool] = []

        def advance() -> None:
            try:
                went_on.append(loop.run_step_advance(run_id=run.id))
            finally:
                connection.close()

        worker = threading.Thread(target=advance)
        worker.start()
        eventually(lambda: hits, 60, interval=0.1)
        os.killpg(process.pid, signal.SIGKILL)
        worker.join(timeout=60)
        assert went_on == [False]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
    run = Run.objects.get(pk=run.pk)
    assert run.status == "waiting_for_input" and run.pause_kind == "takeover"
    assert list(RunStep.objects.filter(run=run).values_list("index", "tool", "state")) == [(0, "navigate", "uncertain")]
    assert RunEvent.objects.filter(run=run, kind="step_uncertain").count() == 1
    # Nothing takes the step again: the next advance finds the run paused.
    assert loop.run_step_advance(run_id=run.id) is False
    assert hits == ["/effect"] and RunStep.objects.filter(run=run).count() == 1
