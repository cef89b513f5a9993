"""Webhook test support: a real receiver (an HTTP server on a loopback port that
records every request and answers with the statuses a test scripts, 200 once the
script runs out), and a real Celery worker consuming the ``webhooks`` queue."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from ramsite.celery import app


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when the request was read


@dataclass
class Receiver:
    origin: str
    statuses: list[int] = field(default_factory=list)
    # Extra headers of the next answers (e.g. a Location for a redirect).
    answer_headers: dict[str, str] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.origin}/hooks/ram"

    @property
    def host_port(self) -> str:
        return self.origin.removeprefix("http://")

    def wait_for(self, count: int, seconds: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver got {len(self.requests)} request(s), expected {count}")
            time.sleep(0.01)


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    receiver = Receiver(origin="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                receiver.requests.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            for name, value in receiver.answer_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST  # noqa: N815 - a followed redirect would arrive as a GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


ROOT = Path(__file__).resolve().parents[2]


def broker_purge() -> None:
    """Empty the broker's queues of the run loop and of webhooks."""
    app.control.purge()
    with app.connection_for_write() as broker:
        for queue in ("celery", "webhooks"):
            try:
                broker.default_channel.queue_purge(queue)
            except Exception:  # noqa: BLE001, S110 - a queue never declared has nothing to purge
                pass


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker process on the test database and broker."""
    database = connection.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "RAM_WEBHOOK_SECRET_KEYS": ",".join(settings.RAM_WEBHOOK_SECRET_KEYS),
        "LOG_LEVEL": "WARNING",
        **extra,
    }


@contextmanager
def webhook_workers(env: dict[str, str]) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start workers that consume only the ``webhooks`` queue; every one started is stopped."""
    broker_purge()
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "-Q", "webhooks", "--pool=solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=WARNING"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        broker_purge()
