"""``manage.py run_executor`` as a real process talking to a live server over loopback.

The executor process gets no database: ``DATABASE_URL`` is removed from its environment, and
it reaches the server only through the internal endpoint (``RAM_SERVER_INTERNAL_URL``) with
its computer's own executor token.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from computers.models import Computer
from computers.placement import host_token_issue
from computers.services import executor_token_issue

ROOT = Path(__file__).resolve().parents[2]


def executor_env(computer_id: str, origin: str, *, token: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of ``computer_id``'s executor: a fresh executor token of that computer
    (or ``token``), the server's origin, and no database."""
    if token is None:
        exists = Computer.objects.filter(pk=computer_id).exists()
        token = executor_token_issue(computer_id=computer_id) if exists else "ram_ex_" + "x" * 43
    inherited = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RAM_CHROMIUM_NO_SANDBOX")}
    return {**inherited, "RAM_SERVER_INTERNAL_URL": origin, "RAM_EXECUTOR_TOKEN": token, **extra}


def start_executor_process(
    computer_id: str,
    origin: str,
    *,
    token: str | None = None,
    stdout: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.PIPE,
    new_session: bool = False,
    **extra: str,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_executor", "--computer", computer_id],
        cwd=ROOT, env=executor_env(computer_id, origin, token=token, **extra),
        stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=new_session,
    )  # fmt: skip


def start_host_process(
    name: str,
    origin: str,
    *,
    capacity: int,
    token: str | None = None,
    stderr: int | None = subprocess.PIPE,
    **extra: str,
) -> subprocess.Popen[bytes]:
    """``manage.py run_executor_host`` for ``name``: a fresh host token of its own (or ``token``), the
    server's origin, no database; the executors it starts are its children."""
    if token is None:
        token = host_token_issue(host_id=name)
    inherited = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "RAM_CHROMIUM_NO_SANDBOX", "RAM_EXECUTOR_TOKEN")
    }
    env = {**inherited, "RAM_SERVER_INTERNAL_URL": origin, "RAM_HOST_TOKEN": token, **extra}
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_executor_host", "--name", name, "--capacity", str(capacity)],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
    )  # fmt: skip


def children_of(parent: int) -> dict[int, list[bytes]]:
    """``parent``'s child processes (pid → argv), from /proc."""
    found: dict[int, list[bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent:
            found[int(entry.name)] = argv
    return found
