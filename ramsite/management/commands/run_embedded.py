"""Run the embedded default on one machine: OpenBao, the Celery worker, the demo
account and the web server (uvicorn). Every child is supervised (restarted with a
back-off when it dies, ``ops/supervisor.py``) and stopped on exit."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from core.files import make_private
from executor.services import executor_process_gone, executor_token_issue
from ops.supervisor import Supervisor
from runs.management.commands.seed_demo import DEMO_COMPUTER
from vault_bridge import embedded


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn flags the gateway contract needs (Ping every 2 s, bounded messages).

    permessage-deflate is off: frames are JPEG, which deflate cannot shrink, and ASGI
    cannot choose compression per message, so a negotiated deflate only burns the
    gateway's CPU (``make bench`` measures it).
    """
    return {
        # The Ping every 2 s, its Pong awaited from when it has left (a frame in flight on a
        # slow link does not end the session): visual/heartbeat.py.
        "ws": "visual.heartbeat:HeartbeatProtocol",
        "ws_ping_interval": 2.0,
        "ws_per_message_deflate": False,
        "ws_ping_timeout": 2.0,
        "ws_max_size": 16_000,
        "proxy_headers": False,
        "server_header": False,
        "log_level": "info",
        # Django's LOGGING (with the redaction filter) handles uvicorn's loggers too.
        "log_config": None,
    }


def serve_web(*, host: str, port: int, **overrides: Any) -> None:
    """The web server: uvicorn with ``RAM_WEB_WORKERS`` processes sharing one listening socket."""
    workers = int(settings.RAM_WEB_WORKERS)
    options = {**uvicorn_options(), **overrides}
    if workers > 1:
        options["workers"] = workers
    uvicorn.run("ramsite.asgi:application", host=host, port=port, **options)


def start_worker() -> subprocess.Popen[bytes]:
    """The Celery worker (with beat for the sweeps) that runs the run loop and delivers webhooks."""
    schedule = settings.VAR_DIR / "celery" / "beat-schedule"
    argv = [sys.executable, "-m", "celery", "-A", "ramsite", "worker", "--beat", f"--schedule={schedule}"]
    argv += ["--queues", ",".join(settings.RAM_WORKER_QUEUES)]
    argv += [f"--concurrency={settings.RAM_WORKER_CONCURRENCY}", "--loglevel=INFO", "--without-gossip", "--without-mingle"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)  # noqa: S603 - fixed argv


def start_metrics() -> subprocess.Popen[bytes]:
    """The Prometheus scrape of every embedded process, on RAM_METRICS_ADDRESS (loopback by default)."""
    argv = [sys.executable, "manage.py", "serve_metrics"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=settings.BASE_DIR)  # noqa: S603 - fixed argv


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_dead_processes_metrics() -> None:
    """Metrics files (``<kind>_<pid>.db``) of processes that ended, from earlier starts, go."""
    for path in Path(settings.PROMETHEUS_MULTIPROC_DIR).glob("*_*.db"):
        pid = path.stem.rsplit("_", 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)


def demo_egress_allow() -> list[str]:
    """The egress allowances of the demo computer: the configured ones, plus this server's own
    host:port, which the demo runs navigate to (its sign-in page). Nothing else local is opened."""
    own = urlsplit(settings.RAM_PUBLIC_ORIGIN).netloc
    allow = [entry for entry in settings.RAM_BROWSER_EGRESS_ALLOW if entry]
    return allow if own in allow else [*allow, own]


def start_executor(computer_id: str) -> subprocess.Popen[bytes]:
    """The demo computer's executor (Chromium); it registers a new generation on start.

    Each start issues the computer a new executor token (the previous one stops working), handed
    to the process in its environment only; the process gets no DATABASE_URL."""
    argv = [sys.executable, "manage.py", "run_executor", "--computer", computer_id]
    allow = demo_egress_allow()
    sys.stdout.write(f"The demo computer's browser may reach public addresses and {', '.join(allow)} (RAM_BROWSER_EGRESS_ALLOW).\n")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        RAM_BROWSER_EGRESS_ALLOW=",".join(allow),
        RAM_EXECUTOR_TOKEN=executor_token_issue(computer_id=computer_id),
        RAM_SERVER_INTERNAL_URL=settings.RAM_SERVER_INTERNAL_URL,
    )
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=settings.BASE_DIR, env=env)  # noqa: S603 - fixed argv


class Command(BaseCommand):
    help = "Start the embedded default: OpenBao, demo data and uvicorn."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        supervisor = Supervisor()

        def terminate(*_: Any) -> None:
            supervisor.stop()
            sys.exit(0)

        signal.signal(signal.SIGTERM, terminate)
        # Every child inherits this: what they create under var/ is owner-only.
        os.umask(0o077)
        make_private(settings.VAR_DIR)
        port = options["port"] or int(settings.RAM_PORT)
        try:
            if not settings.VAULT_ADDR:
                self.start_openbao(supervisor)
            forget_dead_processes_metrics()
            supervisor.spawn("the Celery worker", start_worker)
            supervisor.spawn("the metrics server", start_metrics)
            call_command("seed_demo")
            supervisor.spawn(
                "the demo computer's executor",
                lambda: start_executor(DEMO_COMPUTER),
                on_death=lambda: executor_process_gone(computer_id=DEMO_COMPUTER),
            )
            supervisor.run_in_background()
            serve_web(host=options["host"], port=port)
        finally:
            supervisor.stop()

    @staticmethod
    def start_openbao(supervisor: Supervisor) -> None:
        """The embedded OpenBao, initialised and unsealed; after a restart it is unsealed again."""

        def unseal() -> str:
            return embedded.initialise_and_unseal(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, settings.VAULT_KV_MOUNT)

        def unseal_again() -> None:
            unseal()

        def start() -> subprocess.Popen[bytes]:
            child = embedded.start(settings.VAR_DIR, settings.RAM_OPENBAO_PORT)
            if child is None:
                raise RuntimeError("another process listens on the embedded OpenBao's port")
            return child

        child = embedded.start(settings.VAR_DIR, settings.RAM_OPENBAO_PORT)
        root = unseal()
        # The root token only sets up least-privilege roles; processes use those.
        embedded.configure_roles(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, settings.VAULT_KV_MOUNT, root)
        if child is not None:  # one already listening is not ours to supervise
            supervisor.adopt("the embedded OpenBao", child, start, after_start=unseal_again)
