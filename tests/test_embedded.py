"""Smoke test of the embedded default: SQLite, in-memory layer, embedded OpenBao,
uvicorn — the same commands `make run` uses, with no environment at all."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import socket
import stat
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.docs.readme import run_the_five_minutes
from tests.support.live import free_port
from tests.support.waits import eventually

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


def _loose(var_dir: Path) -> list[str]:
    """Every path under ``var_dir`` that its group or others may read, write or enter, except the
    way to the browser's profiles: ``var/`` and the directories above each profile are traversable
    by the browser's own user (``x`` only, never listable), as executor/profile.py makes them."""
    profiles = var_dir / "profiles"
    way = {var_dir, profiles} | {p for p in profiles.glob("*")} | {p for p in profiles.glob("*/*")}
    loose = []
    for path in sorted([var_dir, *var_dir.rglob("*")]):
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # a transport file consumed meanwhile
            continue
        opened = mode & (0o066 if path in way and stat.S_ISDIR(mode) else 0o077)
        if not stat.S_ISLNK(mode) and opened:
            loose.append(f"{stat.filemode(mode)} {path.relative_to(var_dir)}")
    return loose


class Terminal:
    """A pseudo-terminal that becomes the controlling terminal of a child process."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()

    def popen_options(self) -> dict[str, Any]:
        slave = self.slave

        def attach() -> None:
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        return {"start_new_session": True, "preexec_fn": attach, "pass_fds": (slave,)}

    def read(self) -> str:
        """Everything written to the terminal so far (the terminal stays open: closing it hangs up its session)."""
        chunks = []
        while select.select([self.master], [], [], 0.5)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: no writer left
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def close(self) -> None:
        os.close(self.slave)
        os.close(self.master)


def _child_pid(parent: int, name: str) -> int:
    """The pid of ``parent``'s child whose command line mentions ``name`` (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and any(name.encode() in arg for arg in argv[:4]):
            return int(entry.name)
    raise StopIteration(f"no child of {parent} runs {name}")


BANNER = "RAM is at http://127.0.0.1:"
NOISE = [
    "No hostname was supplied",
    "SecurityWarning",
    "superuser privileges",
    "-------------- [queues]",  # a Celery banner
    "ASGI 'lifespan' protocol appears unsupported",
    "Not Found: /favicon.ico",
    "could not report the stop",
    "signal 15",
    "Traceback",
    "JSONDecodeError",
]


def _embedded_env(tmp_path: Path, **ports: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "REDIS_", "VAULT_", "RAM_", "DJANGO_", "PROMETHEUS_"))
    }
    env.update(
        RAM_VAR_DIR=str(tmp_path),
        RAM_PORT=str(ports["port"]),
        RAM_OPENBAO_PORT=str(ports["bao_port"]),
        RAM_METRICS_ADDRESS=f"127.0.0.1:{ports['metrics_port']}",
    )
    return env


@pytest.mark.parametrize("taken", ["port", "bao_port", "bao_cluster_port", "metrics_port"])
def test_a_port_in_use_is_one_clear_line_and_a_clean_stop(tmp_path: Path, taken: str) -> None:
    ports = {"port": free_port(), "bao_port": free_port(), "metrics_port": free_port()}
    while True:  # the cluster port is the OpenBao port + 1: both free
        ports["bao_port"] = free_port()
        probe = socket.socket()
        try:
            probe.bind(("127.0.0.1", ports["bao_port"] + 1))
            break
        except OSError:
            continue
        finally:
            probe.close()
    env = _embedded_env(tmp_path, **ports)
    number = ports["bao_port"] + 1 if taken == "bao_cluster_port" else ports[taken]
    holder = socket.socket()
    holder.bind(("127.0.0.1", number))
    holder.listen()
    try:
        started = subprocess.run(
            [sys.executable, "manage.py", "run_embedded"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        holder.close()
    output = (started.stdout + started.stderr).strip()
    assert started.returncode != 0
    assert len(output.splitlines()) == 1, output
    assert f"127.0.0.1:{number} is in use" in output and "Traceback" not in output
    # Nothing was started: no OpenBao data, no worker, no server.
    assert not (tmp_path / "openbao").exists()
    for other in (ports["port"], ports["bao_port"], ports["metrics_port"]):
        if other != number:
            with pytest.raises(OSError):
                _get(f"http://127.0.0.1:{other}/")


def readme_path(origin: str, env: dict[str, str], demo: dict[str, Any]) -> None:
    def check(output: str, credential_run: str) -> None:
        descriptor = json.loads(output.splitlines()[0])["intervention"]
        assert descriptor["kind"] == "credential" and descriptor["run_id"] == credential_run
        assert f"{credential_run} credential" in output  # the SDK's list of runs waiting for a person
        assert f"Open: {origin}/tasks/{credential_run}/intervention" in output
        assert demo["runner_key"] not in output

    def cancel(run_id: str) -> None:
        request = urllib.request.Request(
            f"{origin}/api/runs/{run_id}/cancel", data=b"{}", method="POST",
            headers={"Authorization": f"Bearer {demo['runner_key']}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    check(run_the_five_minutes(env), demo["runs"]["credential"])
    # A person answered the takeover and the harness continued it (its continuation then cancelled,
    # so that the demo computer is free again); the credential run was cancelled.
    answer = _post(
        f"{origin}/api/runs/{demo['runs']['takeover']}/continue", demo["runner_key"], {"idempotency_key": "readme-continue"}
    )
    cancel(str(answer["run"]["id"]))  # type: ignore[index]
    cancel(demo["runs"]["credential"])
    reseeded = json.loads(
        subprocess.run(
            [sys.executable, "manage.py", "seed_demo", "--json"], cwd=ROOT, env=env, check=True, capture_output=True,
            text=True, timeout=120,
        ).stdout
    )
    assert reseeded["runs"]["credential"] != demo["runs"]["credential"]
    check(run_the_five_minutes(env), reseeded["runs"]["credential"])
    demo["runs"] = reseeded["runs"]


def test_embedded_default_serves_a_valid_descriptor(tmp_path: Path) -> None:
    port, bao_port, metrics_port = free_port(), free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "REDIS_", "VAULT_", "RAM_", "DJANGO_", "PROMETHEUS_"))
    }
    env.update(
        RAM_VAR_DIR=str(tmp_path),
        RAM_PORT=str(port),
        RAM_OPENBAO_PORT=str(bao_port),
        RAM_METRICS_ADDRESS=f"127.0.0.1:{metrics_port}",
    )
    manage = [sys.executable, "manage.py"]
    # A folder an earlier version left readable by others is made private on start.
    (tmp_path / "celery").mkdir(mode=0o755)
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    log = open(tmp_path.parent / f"{tmp_path.name}-server.log", "wb")  # noqa: SIM115 - outside var/
    terminal = Terminal()
    server = subprocess.Popen(
        [*manage, "run_embedded"], cwd=ROOT, env=env, stdout=log, stderr=log, **terminal.popen_options()
    )
    try:
        origin = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        # The one banner comes once everything is up: the executor ready and the demo seeded.
        while BANNER not in Path(log.name).read_text():
            assert server.poll() is None, Path(log.name).read_text()
            assert time.monotonic() < deadline, "the embedded server did not come up"
            time.sleep(0.5)
        assert _get(f"{origin}/api/openapi.json")[0] == 200
        up = Path(log.name).read_text()
        assert up.index("executor for demo-computer ready") < up.index(BANNER)
        # A browser asks for the favicon; what answers is no warning (a 404 is no news either).
        _get(f"{origin}/favicon.ico")
        # First start: the demo's passwords and a live runner key went to the terminal, once,
        # and into an owner-only file; the log has only that file's path.
        kept = tmp_path / "demo-credentials.json"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        credentials = json.loads(kept.read_text())
        assert set(credentials) == {"demo", "staff", "runner_key"}
        shown = terminal.read()
        assert all(secret in shown for secret in credentials.values()), shown
        assert _get(f"{origin}/api/runs", credentials["runner_key"])[0] == 200  # the kept key is live
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
        # The demo's pauses were written with the executor up: each carries its masked capture (the
        # budget and credits pauses too, taken before the transaction that writes them), whether the
        # seed or the worker reached the pause, and no capture failed on the way.
        for kind, run_id in demo["runs"].items():
            status, body = _get(f"{origin}/api/runs/{run_id}/events?limit=100", demo["runner_key"])
            assert status == 200, body
            kinds = [event["kind"] for event in json.loads(body)["events"]]
            assert "screenshot_captured" in kinds, (kind, kinds)
        seeded_log = Path(log.name).read_text() + seeded.stderr
        assert "The capture of pausing run" not in seeded_log, seeded_log
        assert "The capture of paused run" not in seeded_log, seeded_log
        # The README's five-minute path runs as pasted against this fresh server, and again once a
        # person's runs were continued and cancelled (the demo opens new ones).
        readme_path(origin, env, demo)
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
        # The embedded default serves the metrics of its processes on a loopback address.
        status, body = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }
        assert samples[("ram_runs", (("status", "succeeded"),))] == 1
        # Counted by the worker process and by the web server, summed by the scrape.
        assert samples[("ram_runs_finished_total", (("status", "succeeded"),))] >= 1
        assert samples[("ram_http_requests_total", (("method", "POST"), ("route", "/api/runs"), ("status", "201")))] >= 1
        assert (tmp_path / "prometheus").is_dir()
        # Supervision: a SIGKILLed executor reads unavailable at once and comes back ready, with a new
        # generation, by itself; so does a SIGKILLed OpenBao, unsealed again.
        def computer() -> dict[str, Any]:
            listed = json.loads(_get(f"{origin}/api/computers", demo["runner_key"])[1])
            return next(c for c in listed["computers"] if c["id"] == demo["computer_id"])

        assert computer()["available"] is True
        # The executor is a child of the embedded executor host (a child of the server).
        host_pid = _child_pid(server.pid, "run_executor_host")
        executor_pid = _child_pid(host_pid, "run_executor")
        os.kill(executor_pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while computer()["available"]:
            assert time.monotonic() < deadline, "a dead executor still read available"
            time.sleep(0.2)
        deadline = time.monotonic() + 120
        while not computer()["available"]:
            assert time.monotonic() < deadline, "the executor did not come back"
            time.sleep(0.5)
        assert _child_pid(host_pid, "run_executor") != executor_pid
        bao_pid = _child_pid(server.pid, "bao")
        os.kill(bao_pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            try:
                health = json.loads(_get(f"http://127.0.0.1:{bao_port}/v1/sys/health")[1])
                if not health["sealed"] and _child_pid(server.pid, "bao") != bao_pid:
                    break
            except (OSError, KeyError, ValueError, StopIteration):
                pass
            assert time.monotonic() < deadline, "OpenBao did not come back unsealed"
            time.sleep(0.5)
        # The embedded OpenBao keeps its unseal key and root token owner-only.
        init = tmp_path / "openbao" / "init.json"
        assert stat.S_IMODE(init.stat().st_mode) == 0o600
        assert (tmp_path / "ram.sqlite3").exists()
        # A later start shows only the path, even on a terminal, and keeps the same key.
        again_terminal = Terminal()
        later = subprocess.run(
            [*manage, "seed_demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
            **again_terminal.popen_options(),
        )
        assert str(kept) in later.stdout
        assert not any(secret in later.stdout + again_terminal.read() for secret in credentials.values())
        again_terminal.close()
        assert json.loads(kept.read_text()) == credentials
        # After the full flow, while everything runs, nothing under var/ is readable or writable by
        # group or others: the SQLite database and its -wal/-shm, the Celery transport, OpenBao's
        # data, keys and tokens (and again once stopped, below).
        names = {p.name for p in tmp_path.rglob("*")}
        assert {"ram.sqlite3", "ram.sqlite3-wal", "ram.sqlite3-shm", "secret_key"} <= names
        # The demo executor's token and the host's live only in their environments (new ones at each start).
        assert "executor.token" not in names
        assert _loose(tmp_path) == []
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        terminal.close()
    logged = Path(log.name).read_text()
    assert str(kept) in logged
    # A quiet terminal: one banner, and none of what used to bury it, up to and through the stop.
    assert logged.count(BANNER) == 1, logged
    for noise in NOISE:
        assert noise not in logged, f"{noise!r} in the output:\n{logged}"
    # No access log in make run: the heartbeats and the requests above left no line.
    assert '"GET /api/' not in logged and '"POST /internal/' not in logged, logged
    # The demo's pauses were taken with the executor up: each carries its capture.
    assert "could not hold the computer" not in logged
    assert "The capture of pausing run" not in logged, logged
    for secret in credentials.values():
        assert secret not in logged, "a demo password or the kept runner key reached the log"
    assert _loose(tmp_path) == []
    # Nothing is left listening once the embedded default stops: each port refuses.
    def answering() -> list[int]:
        still = []
        for p in (port, bao_port, metrics_port):
            try:
                _get(f"http://127.0.0.1:{p}/")
            except OSError:
                continue
            still.append(p)
        return still

    eventually(lambda: not answering(), 10, what="every port of the stopped embedded default to refuse")
