"""Run the embedded default on one machine: OpenBao, the Celery worker, the demo
account, an executor host (``RAM_EMBEDDED_COMPUTERS`` computer slots) and the web server (uvicorn). Every child is supervised (restarted with a
back-off when it dies, ``ops/supervisor.py``) and stopped on exit."""

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from computers.models import Computer
from computers.placement import computer_start, host_process_gone, host_token_issue
from core.files import make_private
from ops.management.commands.serve_metrics import parse_address
from ops.supervisor import Supervisor
from runs.management.commands.seed_demo import DEMO_COMPUTER, Demo, demo_banner, demo_prepare, demo_runs
from vault_bridge import embedded

logger = logging.getLogger(__name__)


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn flags the gateway contract needs (Ping every 2 s, bounded messages).

    permessage-deflate is off: frames are JPEG, which deflate cannot shrink, and ASGI
    cannot choose compression per message, so a negotiated deflate only burns the
    gateway's CPU (``make bench`` measures it). The application has no lifespan events.
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
        "lifespan": "off",
        "log_level": "info",
        "access_log": bool(settings.RAM_ACCESS_LOG),
        # Django's LOGGING (with the redaction filter) handles uvicorn's loggers too.
        "log_config": None,
    }


class _OrderedServer(uvicorn.Server):
    """uvicorn, stopping the embedded children first when asked to stop: while they stop (the
    executor reports its stop to this server) it still serves; a second signal stops it at once."""

    def __init__(self, config: uvicorn.Config, before_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.before_exit = before_exit
        self.exiting = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.exiting:
            super().handle_exit(sig, frame)
            return
        self.exiting = True

        def stop_children_then_exit() -> None:
            try:
                self.before_exit()
            finally:
                super(_OrderedServer, self).handle_exit(sig, frame)

        threading.Thread(target=stop_children_then_exit, name="stop", daemon=True).start()


def serve_web(*, host: str, port: int, before_exit: Callable[[], None] | None = None, **overrides: Any) -> None:
    """The web server: uvicorn with ``RAM_WEB_WORKERS`` processes sharing one listening socket."""
    workers = int(settings.RAM_WEB_WORKERS)
    options = {**uvicorn_options(), **overrides}
    if workers > 1 or before_exit is None:
        if workers > 1:
            options["workers"] = workers
        uvicorn.run("ramsite.asgi:application", host=host, port=port, **options)
        return
    # uvicorn's loggers keep the levels LOGGING gives them (its startup lines are left to the banner).
    config = uvicorn.Config("ramsite.asgi:application", host=host, port=port, **{**options, "log_level": None})
    _OrderedServer(config, before_exit).run()


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on (or holds) ``host:port``: binding it as a server would fails."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def ports_needed(host: str, port: int, *, openbao: bool) -> list[tuple[str, str, int]]:
    """Every address ``make run`` listens on: (what sets it, host, port)."""
    metrics_host, metrics_port = parse_address(settings.RAM_METRICS_ADDRESS)
    needed = [("RAM_PORT (the web server)", host, port), ("RAM_METRICS_ADDRESS (the metrics server)", metrics_host, metrics_port)]
    if openbao:
        bao = int(settings.RAM_OPENBAO_PORT)
        needed += [
            ("RAM_OPENBAO_PORT (the embedded OpenBao)", "127.0.0.1", bao),
            ("RAM_OPENBAO_PORT + 1 (the embedded OpenBao's cluster port)", "127.0.0.1", bao + 1),
        ]
    return needed


def check_ports_free(host: str, port: int, *, openbao: bool) -> None:
    """One clear line and a clean stop for the first address in use (before anything starts)."""
    seen: dict[tuple[str, int], str] = {}
    for what, where, number in ports_needed(host, port, openbao=openbao):
        if (where, number) in seen:
            raise CommandError(f"{what} and {seen[(where, number)]} are both {where}:{number}; choose different ports.")
        seen[(where, number)] = what
        if port_taken(where, number):
            raise CommandError(
                f"{where}:{number} is in use by another process, and {what} needs it: stop that process, or "
                f"set another port (docs/deployment.md, \"Ports\")."
            )


def start_worker() -> subprocess.Popen[bytes]:
    """The Celery worker (with beat for the sweeps) that runs the run loop and delivers webhooks."""
    schedule = settings.VAR_DIR / "celery" / "beat-schedule"
    # -q: no banner. The superuser warning (a container running as root) is the operator's choice here:
    # the embedded worker accepts JSON only, never pickle.
    argv = [sys.executable, "-W", "ignore:You're running the worker with superuser privileges", "-m", "celery", "-q", "-A", "ramsite"]
    argv += ["worker", "--beat", f"--schedule={schedule}", "--queues", ",".join(settings.RAM_WORKER_QUEUES)]
    argv += [f"--concurrency={settings.RAM_WORKER_CONCURRENCY}", "--loglevel=WARNING", "--without-gossip", "--without-mingle"]
    # In a session of its own: a Ctrl-C or a signal to make run's process group reaches this
    # process only, which stops its children in order (the pool's processes are not signalled).
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603 - fixed argv


def start_metrics() -> subprocess.Popen[bytes]:
    """The Prometheus scrape of every embedded process, on RAM_METRICS_ADDRESS (loopback by default)."""
    argv = [sys.executable, "manage.py", "serve_metrics", "-v0"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=settings.BASE_DIR, start_new_session=True)  # noqa: S603 - fixed argv


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


EMBEDDED_HOST = "embedded"


def start_executor_host() -> subprocess.Popen[bytes]:
    """The embedded executor host: ``RAM_EMBEDDED_COMPUTERS`` computer slots (the demo computer and the
    ones created through the API), whose executors it starts and stops as the server places them.

    Each start issues the host a new host token (the previous one stops working), handed to the
    process in its environment only; the process gets no DATABASE_URL, and each executor it starts
    gets its computer's own executor token in its environment only."""
    argv = [sys.executable, "manage.py", "run_executor_host", "--name", EMBEDDED_HOST]
    argv += ["--capacity", str(max(1, int(settings.RAM_EMBEDDED_COMPUTERS)))]
    allow = demo_egress_allow()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        RAM_BROWSER_EGRESS_ALLOW=",".join(allow),
        RAM_HOST_TOKEN=host_token_issue(host_id=EMBEDDED_HOST),
        RAM_SERVER_INTERNAL_URL=settings.RAM_SERVER_INTERNAL_URL,
    )
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=settings.BASE_DIR, env=env, start_new_session=True)  # noqa: S603 - fixed argv


def wait_executor_ready(computer_id: str, previous: Any, stop: threading.Event, timeout: float = 180.0) -> bool:
    """Until the computer's executor registered a new generation (it reads ready)."""
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        computer = Computer.objects.filter(pk=computer_id).values("status", "generation").first()
        if computer and computer["status"] == Computer.Status.READY and computer["generation"] not in (None, previous):
            return True
        stop.wait(0.25)
    return False


class Command(BaseCommand):
    help = (
        "Start the embedded default: OpenBao, the worker, the metrics server, an executor host "
        "(RAM_EMBEDDED_COMPUTERS computer slots, the demo computer started on one) and uvicorn."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        port = options["port"] or int(settings.RAM_PORT)
        check_ports_free(options["host"], port, openbao=not settings.VAULT_ADDR)
        stopped = threading.Event()
        cannot_run: list[str] = []

        def stop_all() -> None:
            stopped.set()
            supervisor.stop()

        def on_cannot_run(name: str) -> None:
            cannot_run.append(name)
            os.kill(os.getpid(), signal.SIGTERM)

        supervisor = Supervisor(on_cannot_run=on_cannot_run)

        def terminate(*_: Any) -> None:
            stop_all()
            sys.exit(1 if cannot_run else 0)

        signal.signal(signal.SIGTERM, terminate)
        signal.signal(signal.SIGINT, terminate)
        # Every child inherits this: what they create under var/ is owner-only.
        os.umask(0o077)
        make_private(settings.VAR_DIR)
        try:
            if not settings.VAULT_ADDR:
                self.start_openbao(supervisor)
            forget_dead_processes_metrics()
            supervisor.spawn("the Celery worker", start_worker)
            supervisor.spawn("the metrics server", start_metrics)
            demo = demo_prepare()
            previous = Computer.objects.filter(pk=DEMO_COMPUTER).values_list("generation", flat=True).first()
            supervisor.spawn(
                "the executor host",
                start_executor_host,
                on_death=lambda: host_process_gone(host_id=EMBEDDED_HOST),
            )
            # The demo computer starts now (its demo runs are prepared on it); the others on demand.
            computer_start(computer=Computer.objects.get(pk=DEMO_COMPUTER))
            supervisor.run_in_background()
            threading.Thread(
                target=self.when_ready, args=(demo, previous, port, stopped), name="ready", daemon=True
            ).start()
            serve_web(host=options["host"], port=port, before_exit=stop_all)
        finally:
            stop_all()

    def when_ready(self, demo: Demo, previous: Any, port: int, stopped: threading.Event) -> None:
        """Once the executor is up, the demo's paused runs (each pause with its capture), then the one banner."""
        try:
            if not wait_executor_ready(DEMO_COMPUTER, previous, stopped):
                if not stopped.is_set():
                    logger.error("The demo computer's executor did not become ready; the demo runs were not created.")
                return
            runs = demo_runs(demo)
            if stopped.is_set():
                return
            metrics_host, metrics_port = parse_address(settings.RAM_METRICS_ADDRESS)
            access = "on" if settings.RAM_ACCESS_LOG else "off (RAM_ACCESS_LOG=true shows a line per request)"
            banner = demo_banner(demo, runs) + (
                f"  the demo computer's browser may reach public addresses and {', '.join(demo_egress_allow())}\n"
                f"  metrics: http://{metrics_host}:{metrics_port}/metrics; access log {access}\n"
                "  stop with Ctrl-C\n"
            )
            self.stdout.write("\n" + banner)
            self.stdout.flush()
        except Exception:  # noqa: BLE001 - the server keeps running; the reason is logged
            logger.exception("The demo could not be prepared")
        finally:
            close_old_connections()

    @staticmethod
    def start_openbao(supervisor: Supervisor) -> None:
        """The embedded OpenBao, initialised and unsealed; after a restart it is unsealed again."""

        def unseal() -> str:
            return embedded.initialise_and_unseal(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, settings.VAULT_KV_MOUNT)

        def unseal_again() -> None:
            unseal()

        def start() -> subprocess.Popen[bytes]:
            child = embedded.start(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, new_session=True)
            if child is None:
                raise RuntimeError("another process listens on the embedded OpenBao's port")
            return child

        child = embedded.start(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, new_session=True)
        root = unseal()
        # The root token only sets up least-privilege roles; processes use those.
        embedded.configure_roles(settings.VAR_DIR, settings.RAM_OPENBAO_PORT, settings.VAULT_KV_MOUNT, root)
        if child is not None:  # one already listening is not ours to supervise
            supervisor.adopt("the embedded OpenBao", child, start, after_start=unseal_again)
