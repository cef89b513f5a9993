"""``python manage.py run_executor_host --capacity N``: run the executors the server places on this machine.

The process needs no database: it reaches the server through the internal endpoint
(``RAM_SERVER_INTERNAL_URL``) with this host's own token (``RAM_HOST_TOKEN``, issued by
``manage.py executor_host_token --host NAME``), and starts ``run_executor`` for each computer placed
on it, each with its own executor token in its environment only (``executor/host.py``).
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from executor.host import ExecutorHost, HostRefused, spawn_executor


class Command(BaseCommand):
    help = "Run an executor host: report its computer slots to the server and run the executors placed on it."
    # An executor host has no database.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--capacity", type=int, required=True, help="computer slots: executors run at once")
        parser.add_argument("--name", default="", help="the host's name (default: this machine's host name)")
        parser.add_argument(
            "--executor-address",
            default="127.0.0.1",
            help="the loopback or private address the executors listen on (default 127.0.0.1)",
        )
        parser.add_argument("--server", default="", help="the server's internal URL (default RAM_SERVER_INTERNAL_URL)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.RAM_HOST_TOKEN:
            raise CommandError(
                "RAM_HOST_TOKEN must hold this host's token (manage.py executor_host_token --host NAME issues one)."
            )
        if options["capacity"] < 1:
            raise CommandError("--capacity must be at least 1.")
        name = options["name"] or socket.gethostname().split(".")[0]
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RAM_HOST_TOKEN", "RAM_EXECUTOR_TOKEN")}
        host = ExecutorHost(
            name=name,
            capacity=options["capacity"],
            server=(options["server"] or settings.RAM_SERVER_INTERNAL_URL).rstrip("/"),
            token=settings.RAM_HOST_TOKEN,
            spawn=spawn_executor(Path(settings.BASE_DIR), env, options["executor_address"]),
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: host.stopping.set())
        try:
            host.serve()
        except HostRefused as exc:
            host.stop_all()
            raise CommandError(str(exc)) from None
