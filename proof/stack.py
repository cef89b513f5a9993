"""The production topology, started by the proof on free loopback ports, in a directory of its own.

PostgreSQL (``initdb`` into the proof's directory, run as the ``postgres`` user when the proof runs
as root), redis-server without persistence, OpenBao with raft storage (the embedded default's own
lifecycle: initialised, unsealed, unsealed again after a restart), two uvicorn web processes, two
Celery workers and one beat, two executors for two computers (each with its own ``ram_ex_`` token,
no database, no Vault token), Redis as channel layer and broker, and a local portal the computers'
browsers may reach (its exact ``host:port`` in ``RAM_BROWSER_EGRESS_ALLOW``).

Every process is the proof's own child, in a process group of its own: the experiments kill and
restart them by that group, and never touch a service the machine runs for others.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from proof.portal import Portal, start_portal

ROOT = Path(__file__).resolve().parent.parent
PG_BIN = Path(os.environ.get("RAM_PROOF_PG_BIN", "/usr/lib/postgresql/15/bin"))
# A step unfinished after this long belonged to a dead worker (production default: 150 s).
STEP_MAX_SECONDS = 20
PERSON_USERNAME = "proof-person"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], Any], seconds: float, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = check()
        except Exception:  # noqa: BLE001 - a service coming up answers errors meanwhile
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {seconds:.0f} s")
        time.sleep(interval)


@dataclass
class Child:
    """One supervised-by-the-proof process: started, killed and started again by its process group."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path = ROOT
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(  # noqa: S603 - the proof's fixed argv
                self.argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else -1

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole group (a Celery worker's pool, an executor's browser go with it)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)

    def stop(self, timeout: float = 20) -> None:
        if not self.alive():
            self.kill(signal.SIGKILL)  # leftovers of the group, if any
            return
        self.kill(signal.SIGTERM)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=timeout)
        self.kill(signal.SIGKILL)


@dataclass
class ProofStack:
    """The running stack (``proof.core.Stack``)."""

    root: Path
    portal: Portal
    web_urls: list[str] = field(default_factory=list)
    runner_key: str = ""
    observer_key: str = ""
    account_id: str = ""
    computers: list[str] = field(default_factory=list)
    var_dir: Path = Path()
    log_paths: list[Path] = field(default_factory=list)
    database_url: str = ""
    redis_url: str = ""
    vault_addr: str = ""
    planted_secrets: list[str] = field(default_factory=list)
    portal_url: str = ""
    person_password: str = ""
    ops_token: str = ""
    pg_port: int = 0
    redis_port: int = 0
    bao_port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    webs: list[Child] = field(default_factory=list)
    workers: list[Child] = field(default_factory=list)
    beat: Child | None = None
    executors: dict[str, Child] = field(default_factory=dict)
    redis: Child | None = None
    bao: subprocess.Popen[bytes] | None = None
    _next: itertools.cycle[str] | None = None
    supervising: threading.Event = field(default_factory=threading.Event)
    restarts: dict[str, int] = field(default_factory=dict)

    # --- the Stack protocol -------------------------------------------------

    def plant(self, secret: str) -> None:
        if secret and secret not in self.planted_secrets:
            self.planted_secrets.append(secret)

    def next_url(self) -> str:
        if self._next is None:
            self._next = itertools.cycle(self.web_urls)
        return next(self._next)

    def sign_in_person(self) -> requests.Session:
        """A password session of the proof's person, signed in through the login form."""
        origin = self.web_urls[0]
        session = requests.Session()
        session.get(f"{origin}/accounts/login/", timeout=30).raise_for_status()
        answer = session.post(
            f"{origin}/accounts/login/",
            data={
                "username": PERSON_USERNAME,
                "password": self.person_password,
                "csrfmiddlewaretoken": session.cookies.get("csrftoken", ""),
                "next": "/",
            },
            headers={"Origin": origin, "Referer": f"{origin}/accounts/login/"},
            timeout=30,
            allow_redirects=False,
        )
        if answer.status_code != 302:
            raise RuntimeError(f"the person's sign-in answered {answer.status_code}")
        return session

    # --- helpers for experiments ----------------------------------------------

    def api(self, method: str, path: str, *, key: str | None = None, timeout: float = 30, **kwargs: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {key or self.runner_key}", **kwargs.pop("headers", {})}
        return requests.request(method, self.next_url() + path, headers=headers, timeout=timeout, **kwargs)

    def computer_available(self, computer_id: str) -> bool | None:
        try:
            answer = self.api("GET", "/api/computers", timeout=10)
            if answer.status_code != 200:
                return None
            for computer in answer.json()["computers"]:
                if computer["id"] == computer_id:
                    return bool(computer["available"])
        except (requests.RequestException, ValueError, KeyError):
            return None
        return None

    def wait_computer_ready(self, computer_id: str, seconds: float = 90) -> None:
        wait_until(lambda: self.computer_available(computer_id) is True, seconds, 0.25, f"{computer_id} ready")

    def ready(self) -> bool:
        for url in self.web_urls:
            try:
                if requests.get(f"{url}/readyz", timeout=5).status_code != 200:
                    return False
            except requests.RequestException:
                return False
        return True

    def wait_ready(self, seconds: float = 120) -> None:
        wait_until(self.ready, seconds, 0.5, "every web process ready")
        for computer_id in self.computers:
            self.wait_computer_ready(computer_id, seconds)

    def orm_reset(self) -> None:
        """Drop the proof process's own database connection (after PostgreSQL restarted)."""
        from django.db import connections

        for connection in connections.all():
            with contextlib.suppress(Exception):
                connection.close()

    # --- PostgreSQL --------------------------------------------------------------

    def _as_postgres(self, argv: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return argv

    def pg_start(self) -> None:
        log = self.root / "logs" / "postgresql.log"
        options = (
            f"-p {self.pg_port} -k {self.root / 'pgsock'} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(  # noqa: S603 - fixed argv
            self._as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.root / "pg"), "-l", str(log), "-o", options, "-w", "-t", "60", "start"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def pg_stop(self, mode: str = "fast") -> None:
        subprocess.run(  # noqa: S603 - fixed argv
            self._as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.root / "pg"), "-m", mode, "-w", "-t", "60", "stop"]),
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _pg_init(self) -> None:
        data, sock = self.root / "pg", self.root / "pgsock"
        data.mkdir()
        sock.mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (data, sock, self.root / "logs" / "postgresql.log"):
                path.touch(exist_ok=True)
                os.chown(path, user.pw_uid, user.pw_gid)
        subprocess.run(  # noqa: S603 - fixed argv
            self._as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.pg_start()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE ram")

    # --- Redis and OpenBao ----------------------------------------------------------

    def redis_start(self) -> None:
        if self.redis is None:
            (self.root / "redis").mkdir()
            argv = ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(self.root / "redis"), "--protected-mode", "yes"]  # fmt: skip
            self.redis = Child("redis", argv, dict(os.environ), self.root / "logs" / "redis.log")
        self.redis.start()
        import redis

        wait_until(lambda: redis.Redis(port=self.redis_port, socket_timeout=1).ping(), 30, 0.1, "redis")

    def bao_start(self) -> None:
        from vault_bridge import embedded

        self.bao = embedded.start(self.var_dir, self.bao_port, new_session=True)
        embedded.initialise_and_unseal(self.var_dir, self.bao_port, "ram")

    def bao_kill(self) -> None:
        if self.bao is not None:
            self.bao.kill()
            self.bao.wait(timeout=15)

    def bao_seal(self) -> None:
        from vault_bridge import embedded

        embedded.root_client(self.var_dir, self.bao_port).sys.seal()

    def bao_unseal(self) -> None:
        from vault_bridge import embedded

        embedded.initialise_and_unseal(self.var_dir, self.bao_port, "ram")

    # --- RAM's processes -----------------------------------------------------------------

    def _child(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        log = self.root / "logs" / f"{name}.log"
        self.log_paths.append(log)
        return Child(name, argv, env, log)

    def executor_start(self, computer_id: str) -> None:
        self.executors[computer_id].start()

    def worker_holding(self, address: str) -> Child | None:
        """The worker whose process group holds a connection to ``address`` (host:port): the one acting."""
        port = int(address.rsplit(":", 1)[1])
        for worker in self.workers:
            if worker.alive() and _group_connects_to(worker.pid, port):
                return worker
        return None

    # --- lifecycle -------------------------------------------------------------------------

    def supervise(self) -> None:
        """Like systemd's ``Restart=always``: a web process, worker or beat that exits is started
        again after 0.5 s. (Executors are restarted by the experiment that kills them, which
        first measures how long the API takes to call them unavailable.)"""

        def watch() -> None:
            while self.supervising.is_set():
                for child in [*self.webs, *self.workers, *([self.beat] if self.beat else [])]:
                    if child.process is not None and not child.alive() and self.supervising.is_set():
                        child.kill(signal.SIGKILL)  # what is left of its group
                        time.sleep(0.5)
                        child.start()
                        self.restarts[child.name] = self.restarts.get(child.name, 0) + 1
                time.sleep(0.25)

        self.supervising.set()
        threading.Thread(target=watch, name="proof-supervisor", daemon=True).start()

    def stop(self) -> None:
        self.supervising.clear()
        time.sleep(0.5)
        for child in [*self.executors.values(), *self.workers, *([self.beat] if self.beat else []), *self.webs]:
            child.stop(timeout=20)
        if self.bao is not None:
            with contextlib.suppress(Exception):
                self.bao.terminate()
                self.bao.wait(timeout=10)
        if self.redis is not None:
            self.redis.stop(timeout=10)
        self.pg_stop("fast")
        self.portal.close()


def _alive(url: str) -> bool:
    try:
        return requests.get(f"{url}/healthz", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _group_connects_to(pgid: int, port: int) -> bool:
    inodes: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except (OSError, ProcessLookupError):
            continue
    wanted = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                # remote address, state 01 (established), inode
                if fields[2].endswith(wanted) and fields[3] == "01" and fields[9] in inodes:
                    return True
    return False


def start_stack(*, web_threads: int = 4) -> ProofStack:
    """Start everything; the caller must ``stop()`` it. Django is set up in this process against the
    proof's own database, Redis and OpenBao (the proof reads and seeds rows through the ORM)."""
    root = Path(tempfile.mkdtemp(prefix="ram-proof-"))
    root.chmod(0o711)  # the browser's own user traverses it to its profile under var/
    (root / "logs").mkdir()
    var = root / "var"
    var.mkdir()
    var.chmod(0o711)
    portal = start_portal()
    stack = ProofStack(root=root, portal=portal, var_dir=var, portal_url=portal.origin)
    stack.plant(portal.password)
    stack.pg_port, stack.redis_port, stack.bao_port = free_port(), free_port(), free_port()
    try:
        _start_services(stack)
        _start_ram(stack, web_threads=web_threads)
    except BaseException:
        stack.stop()
        raise
    return stack


def _start_services(stack: ProofStack) -> None:
    stack.log_paths += [stack.root / "logs" / "postgresql.log", stack.root / "logs" / "redis.log"]
    stack._pg_init()
    stack.database_url = f"postgres://postgres@127.0.0.1:{stack.pg_port}/ram"
    stack.redis_start()
    stack.redis_url = f"redis://127.0.0.1:{stack.redis_port}/0"
    stack.bao_start()
    stack.vault_addr = f"http://127.0.0.1:{stack.bao_port}"
    stack.log_paths.append(stack.var_dir / "openbao" / "server.log")


def _start_ram(stack: ProofStack, *, web_threads: int) -> None:
    from vault_bridge import embedded

    web_ports = [free_port(), free_port()]
    stack.web_urls = [f"http://127.0.0.1:{port}" for port in web_ports]
    secret_key = secrets.token_urlsafe(50)
    stack.ops_token = secrets.token_urlsafe(32)
    for secret in (secret_key, stack.ops_token):
        stack.plant(secret)
    embedded.configure_roles(stack.var_dir, stack.bao_port, "ram", embedded.root_client(stack.var_dir, stack.bao_port).token)
    tokens = embedded.embedded_role_tokens(stack.var_dir)
    stack.plant(tokens.server)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAM_", "DATABASE_", "REDIS_", "VAULT_"))}
    base.update(
        DJANGO_SETTINGS_MODULE="ramsite.settings",
        PYTHONUNBUFFERED="1",
        SECRET_KEY=secret_key,
        DEBUG="false",
        DATABASE_URL=stack.database_url,
        REDIS_URL=stack.redis_url,
        VAULT_ADDR=stack.vault_addr,
        VAULT_TOKEN=tokens.server,
        VAULT_KV_MOUNT="ram",
        RAM_VAR_DIR=str(stack.var_dir),
        RAM_OPS_TOKEN=stack.ops_token,
        RAM_STEP_MAX_SECONDS=str(STEP_MAX_SECONDS),
        # Two computers, each with its runs and viewers at once (the load's four viewers included).
        RAM_WORKER_CONCURRENCY="3",
        RAM_VISUAL_MAX_SOCKETS="16",
        RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT="8",
        RAM_VISUAL_MAX_PENDING_TICKETS="64",
        RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT="32",
        RAM_WEB_THREADS=str(web_threads),
        RAM_BROWSER_EGRESS_ALLOW=stack.portal.host_port,
        RAM_PUBLIC_ORIGIN=stack.web_urls[0],
        PROMETHEUS_MULTIPROC_DIR=str(stack.var_dir / "prometheus"),
    )
    (stack.var_dir / "prometheus").mkdir(exist_ok=True)
    stack.env = base
    # This process: the ORM against the proof's database (seeding, and reading what happened).
    os.environ.update(base)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    _seed(stack)

    python = sys.executable
    uvicorn_flags = ["--ws", "visual.heartbeat:HeartbeatProtocol", "--ws-ping-interval", "2", "--ws-ping-timeout", "2", "--ws-max-size", "16000",
                     "--ws-per-message-deflate", "false", "--no-server-header", "--log-level", "warning"]  # fmt: skip
    for index, port in enumerate(web_ports):
        env = {**base, "RAM_PUBLIC_ORIGIN": stack.web_urls[index]}
        argv = [python, "-m", "uvicorn", "ramsite.asgi:application", "--host", "127.0.0.1", "--port", str(port), *uvicorn_flags]
        stack.webs.append(stack._child(f"web-{index + 1}", argv, env))
    for index in range(2):
        argv = [python, "-m", "celery", "-A", "ramsite", "worker", "-Q", "celery,webhooks", "--concurrency=3",
                "--loglevel=INFO", "--without-gossip", "--without-mingle", "-n", f"proof-{index + 1}@%h"]  # fmt: skip
        stack.workers.append(stack._child(f"worker-{index + 1}", argv, base))
    schedule = stack.root / "beat-schedule"
    stack.beat = stack._child("beat", [python, "-m", "celery", "-A", "ramsite", "beat", "--loglevel=INFO", f"--schedule={schedule}"], base)
    for child in [*stack.webs, *stack.workers, stack.beat]:
        child.start()
    # Alive first (/readyz waits for a ready executor, started below).
    wait_until(lambda: all(_alive(url) for url in stack.web_urls), 120, 0.5, "the web processes")
    from computers.services import executor_token_issue

    executor_env = {k: v for k, v in base.items() if k not in ("DATABASE_URL", "VAULT_TOKEN", "SECRET_KEY")}
    for index, computer_id in enumerate(stack.computers):
        token = executor_token_issue(computer_id=computer_id)
        stack.plant(token)
        env = {**executor_env, "RAM_EXECUTOR_TOKEN": token, "RAM_SERVER_INTERNAL_URL": stack.web_urls[index % 2]}
        argv = [python, "manage.py", "run_executor", "--computer", computer_id]
        stack.executors[computer_id] = stack._child(f"executor-{computer_id}", argv, env)
        stack.executors[computer_id].start()
    stack.supervise()
    stack.wait_ready(180)


def _seed(stack: ProofStack) -> None:
    from django.contrib.auth.models import User

    from accounts.models import Account, ApiKey, Membership
    from accounts.services import account_top_up, api_key_create
    from computers.models import Computer

    account = Account.objects.create(name="Proof")
    account_top_up(account=account, microcredits=10**12, actor="proof")
    stack.account_id = str(account.pk)
    stack.person_password = "Proof-" + secrets.token_urlsafe(18)
    stack.plant(stack.person_password)
    user = User.objects.create_user(username=PERSON_USERNAME, password=stack.person_password)
    Membership.objects.create(user=user, account=account)
    stack.runner_key = api_key_create(account=account, kind=ApiKey.Kind.RUNNER, name="proof")[1]
    stack.observer_key = api_key_create(account=account, kind=ApiKey.Kind.TASK_OBSERVER, name="proof")[1]
    stack.plant(stack.runner_key)
    stack.plant(stack.observer_key)
    stack.computers = ["proof-pc-1", "proof-pc-2"]
    for computer_id in stack.computers:
        Computer.objects.create(id=computer_id, account=account, name=computer_id)


def remove_tree(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
