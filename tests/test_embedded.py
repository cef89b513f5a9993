"""Smoke test of the embedded default: SQLite, in-memory layer, embedded OpenBao,
uvicorn — the same commands `make run` uses, with no environment at all."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.live import free_port

# It starts the embedded default (OpenBao, a worker, an executor and uvicorn) in subprocesses.
pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent


def _get(url: str, key: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _post(url: str, key: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
        return dict(json.loads(response.read()))


def test_embedded_default_serves_a_valid_descriptor(tmp_path: Path) -> None:
    port, bao_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "VAULT_", "RAM_", "DJANGO_"))}
    env.update(RAM_VAR_DIR=str(tmp_path), RAM_PORT=str(port), RAM_OPENBAO_PORT=str(bao_port))
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([*manage, "run_embedded"], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        origin = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if _get(f"{origin}/api/openapi.json")[0] == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, "the embedded server did not come up"
            time.sleep(0.5)
        seeded = subprocess.run(
            [*manage, "seed_demo", "--json"], cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120
        )
        demo = json.loads(seeded.stdout)
        assert set(demo) == {
            "origin", "account_id", "user", "staff", "runner_key", "observer_key", "computer_id", "runs"
        }
        assert set(demo["runs"]) == {"takeover", "credential", "connection", "continue", "credits"}
        assert demo["origin"] == origin
        status, body = _get(f"{origin}/api/runs/{demo['runs']['credential']}/intervention-descriptor", demo["runner_key"])
        assert status == 200, body
        intervention = json.loads(body)["intervention"]
        assert intervention["kind"] == "credential"
        assert intervention["human_action"]["url"] == f"{origin}/tasks/{demo['runs']['credential']}/intervention"
        # A second seed is idempotent for runs and mints fresh keys.
        again = json.loads(
            subprocess.run(
                [*manage, "seed_demo", "--json"], cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=120
            ).stdout
        )
        assert again["runs"] == demo["runs"]
        assert again["runner_key"] != demo["runner_key"]
        # Every demo run reached its pause through the run loop.
        for kind, run_id in demo["runs"].items():
            status, body = _get(f"{origin}/api/runs/{run_id}", demo["runner_key"])
            assert json.loads(body)["required_action"]["kind"] == kind
        # The embedded Celery worker runs a run created through the API to the end.
        created = _post(
            f"{origin}/api/runs",
            demo["runner_key"],
            {"task": {"goal": "finish", "steps": [{"tool": "finish", "arguments": {"output": "done"}}]},
             "computer_id": demo["computer_id"], "max_model_calls": 2},
        )
        deadline = time.monotonic() + 90
        while True:
            run = json.loads(_get(f"{origin}/api/runs/{created['id']}", demo["runner_key"])[1])
            if run["status"] == "succeeded":
                break
            assert time.monotonic() < deadline, run
            time.sleep(0.5)
        assert run["result"] == {"outcome": "succeeded", "output": "done"}
        # The embedded OpenBao keeps its unseal key and root token owner-only.
        init = tmp_path / "openbao" / "init.json"
        assert stat.S_IMODE(init.stat().st_mode) == 0o600
        assert (tmp_path / "ram.sqlite3").exists()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    # Nothing is left listening once the embedded default stops.
    time.sleep(0.5)
    for p in (port, bao_port):
        try:
            _get(f"http://127.0.0.1:{p}/")
            raise AssertionError(f"port {p} still answers")
        except OSError:
            pass
