"""``manage.py run_executor``: registration, heartbeat and a new generation at every start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from accounts.models import Account
from executor.client import ExecutorClient
from executor.models import Computer

# Each test starts the executor process.
pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _start(computer_id: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": _database_url()}
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_executor", "--computer", computer_id],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def _wait_for(check: Callable[[], Any], seconds: float = 40) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_each_start_registers_a_new_generation_and_a_stop_marks_it_offline(
    transactional_db: None, account: Account, make_computer: Callable[..., Computer]
) -> None:
    make_computer(account, "pc-cmd")
    generations = []
    for _ in range(2):
        process = _start("pc-cmd")
        try:
            computer = _wait_for(
                lambda: Computer.objects.filter(pk="pc-cmd", status="ready").exclude(generation__in=generations).first()
            )
            assert computer.executor_address.startswith("127.0.0.1:")
            assert computer.last_heartbeat_at is not None
            status = ExecutorClient(computer).status()
            assert status["generation"] == str(computer.generation) and status["control"] == "available"
            generations.append(computer.generation)
        finally:
            _stop(process)
        stopped = Computer.objects.get(pk="pc-cmd")
        assert stopped.status == "offline" and stopped.executor_address == ""
    assert generations[0] != generations[1]


def test_an_unknown_computer_is_refused(transactional_db: None) -> None:
    process = _start("no-such-computer")
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and b"No computer" in err
