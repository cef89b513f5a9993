"""The ``browser_login`` table: a sign-in on a local portal with real Chromium and a real OpenBao.

Each repeat is a child process (``python -m bench.login child``) that starts ``bao server -dev``
on a free loopback port (configured as RAM configures its Vault: the KV mount, the server's and
the executor's policies), a local login portal (``tests/support/portals.py``: a real form that
sets a session cookie), and the processes of the embedded default (the web server, one Celery
worker, one executor with Chromium; SQLite, the filesystem transport). The account's credential
is written to Vault; scripted runs navigate to the portal's form and call ``browser_login``.

Per repeat: one warm-up sign-in, then ``LOGINS`` measured ones; the figure is their median
``browser_login`` step (recorded → settled: the lease, the account's one-use Vault grant, the
executor's Vault read, filling, submit, the signed-in page) and the median ``POST → finished``
of the two-step run. Success: every measured step answered ``Logged in as …``.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOGINS = 3
GOAL_SECONDS = 3.0
MARK = "LOGINJSON "
KV_MOUNT = "ram-bench"


@contextmanager
def openbao() -> Iterator[dict[str, str]]:
    """``bao server -dev`` on a free port, configured; its address and the role tokens."""
    import httpx
    import hvac

    from bench.run import free_port
    from vault_bridge.embedded import bao_binary
    from vault_bridge.policies import vault_configure

    port = free_port()
    root = secrets.token_urlsafe(24)
    addr = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(  # noqa: S603
        [bao_binary(), "server", "-dev", f"-dev-root-token-id={root}", f"-dev-listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{addr}/v1/sys/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("bao server -dev did not start")
            time.sleep(0.1)
        tokens = vault_configure(client=hvac.Client(url=addr, token=root), kv_mount=KV_MOUNT)
        yield {"addr": addr, "root": root, "server": tokens.server}
    finally:
        server.terminate()
        server.wait(timeout=10)


def measure_here() -> dict[str, Any]:
    """One repeat, in this process."""
    from tests.support.portals import PASSWORD, USERNAME, serve_portal

    with openbao() as vault, serve_portal() as portal:
        os.environ.update(
            {
                "VAULT_ADDR": vault["addr"],
                "VAULT_TOKEN": vault["server"],
                "VAULT_KV_MOUNT": KV_MOUNT,
                # The executor holds no Vault token: each browser_login brings a one-use grant.
                "VAULT_EXECUTOR_TOKEN": "",
                "RAM_BROWSER_EGRESS_ALLOW": portal.origin.removeprefix("http://"),
            }
        )
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from accounts.models import Account
        from accounts.services import account_top_up, api_key_create
        from bench.queue import embedded
        from computers.models import Computer
        from runs.models import RunStep
        from vault_bridge.credentials import PortalCredential, portal_credential_write

        account = Account.objects.create(name="Login bench")
        account_top_up(account=account, microcredits=10**12, actor="bench")
        computer = Computer.objects.create(id=f"login-{uuid.uuid4().hex[:8]}", account=account, name="login").pk
        key = api_key_create(account=account, kind="runner")[1]
        portal_credential_write(
            token=vault["root"],
            account_id=account.id,
            credential_id="portal",
            credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,)),
        )
        steps = [
            {"tool": "navigate", "arguments": {"url": f"{portal.origin}/login/standard"}},
            {"tool": "browser_login", "arguments": {"credentialId": "portal"}},
        ]
        headers = {"Authorization": f"Bearer {key}"}
        logins: list[float] = []
        totals: list[float] = []
        outcomes: list[str] = []
        with embedded([computer]) as client:
            for attempt in range(1 + LOGINS):
                sent = time.perf_counter()
                response = client.post(
                    "/api/runs", json={"computer_id": computer, "task": {"goal": "sign in", "steps": steps}, "max_model_calls": 5}, headers=headers
                )
                run_id = response.json()["id"]
                deadline = time.monotonic() + 300
                while client.get(f"/api/runs/{run_id}", headers=headers).json()["status"] not in ("succeeded", "failed", "cancelled"):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the sign-in run did not finish")
                    time.sleep(0.02)
                total = time.perf_counter() - sent
                step = RunStep.objects.get(run_id=run_id, tool="browser_login")
                if attempt == 0:
                    continue  # warm: the portal's first page, the worker's imports and connections
                logins.append((step.finished_at - step.started_at).total_seconds())
                totals.append(total)
                outcomes.append(str((step.result or {}).get("content", "")))
    succeeded = sum(1 for o in outcomes if o.startswith("Logged in as "))
    return {
        "login": statistics.median(logins),
        "login_max": max(logins),
        "total": statistics.median(totals),
        "succeeded": succeeded,
        "attempts": len(outcomes),
    }


def measure() -> dict[str, Any]:
    """One repeat in a child process with a var dir and a database of its own."""
    work = tempfile.mkdtemp(prefix="ram-bench-login-")
    env = {**os.environ, "RAM_VAR_DIR": work, "DATABASE_URL": f"sqlite:///{work}/login.sqlite3", "REDIS_URL": ""}
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "bench.login", "child"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(f"the browser_login child failed: {out.stderr[-2000:]}")
    return json.loads(line.removeprefix(MARK))


async def phase(args: Any) -> dict[str, Any]:
    import asyncio

    print(f"browser_login: {LOGINS} sign-ins on a local portal, real Chromium and OpenBao…", flush=True)
    return await asyncio.to_thread(measure)


def report(samples: list[dict[str, Any]], load: tuple[float, float, float], repeats: int) -> None:
    from bench.run import spread, table, verdict

    seconds = lambda v: f"{v:.2f} s"  # noqa: E731
    succeeded = sum(s["succeeded"] for s in samples)
    attempts = sum(s["attempts"] for s in samples)
    p50 = statistics.median(s["login"] for s in samples)
    met = succeeded == attempts and p50 <= GOAL_SECONDS
    table(
        f"browser_login on a local portal (real Chromium, real OpenBao, embedded default): {LOGINS} sign-ins per repeat "
        f"after a warm-up, median [min–max] of {repeats} repeats",
        ["figure", "value", "goal", "verdict"],
        [
            ["signed in", f"{succeeded} of {attempts}", "all", ""],
            ["browser_login step, recorded → settled (p50)", spread([s["login"] for s in samples], seconds), "≤ 3 s", verdict(met, load)],
            ["  slowest sign-in of a repeat", spread([s["login_max"] for s in samples], seconds), "", ""],
            ["navigate + browser_login run, POST → finished (p50)", spread([s["total"] for s in samples], seconds), "", ""],
        ],
        load,
    )


if __name__ == "__main__":
    if sys.argv[1:2] != ["child"]:
        raise SystemExit("usage: python -m bench.login child")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")
    sys.path.insert(0, str(ROOT))
    print(MARK + json.dumps(measure_here()), flush=True)
