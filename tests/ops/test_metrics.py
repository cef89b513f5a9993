"""/metrics through prometheus-client, scraped during a real run: uvicorn on
loopback, a real executor (Chromium), a local portal, OpenBao, the run loop
and a real screen socket; and the multiprocess scrape across processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families

from accounts.models import Account
from accounts.services import account_top_up
from runs import loop
from runs.models import Run
from tests.support.live import free_port
from tests.support.portals import PASSWORD as PORTAL_PASSWORD
from tests.support.portals import USERNAME as PORTAL_USERNAME
from tests.support.portals import Portal, serve_portal
from tests.support.screen import db, frame_pair, open_socket
from tests.support.tiers import live
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, VaultRefused, portal_credential_read, portal_credential_write

OPS_TOKEN = "metrics-" + "z" * 40
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(origin: str) -> Samples:
    async with httpx.AsyncClient(base_url=origin, timeout=30) as client:
        response = await client.get("/metrics", headers={"Authorization": f"Bearer {OPS_TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


@pytest.fixture
def ops_token(settings: Any) -> str:
    settings.RAM_OPS_TOKEN = OPS_TOKEN
    return OPS_TOKEN


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


def test_metrics_are_off_the_public_origin_without_the_token(client: Any, settings: Any) -> None:
    settings.RAM_OPS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404
    settings.RAM_OPS_TOKEN = OPS_TOKEN
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": f"Bearer {OPS_TOKEN}x"}).status_code == 404


def drive(run_id: Any) -> Run:
    for _ in range(20):
        if not loop.run_step_advance(run_id=run_id):
            break
    return Run.objects.get(pk=run_id)


async def test_a_scrape_during_a_real_run_sees_every_counter_move(
    screen: Any,
    live_origin: str,
    ops_token: str,
    vault: VaultServer,
    account: Account,
    runner_key: str,
    portal: Portal,
    settings: Any,
) -> None:
    await db(lambda: account_top_up(account=account, microcredits=1_000_000, actor="test"))
    before = await scrape(live_origin)
    assert value(before, "ram_database_scrape_ok") == 1
    assert value(before, "ram_executor_up", computer="pc-1") == 1
    generation = str(screen.generation)
    assert value(before, "ram_executor_generation_info", computer="pc-1", generation=generation) == 1

    steps = [
        {"tool": "navigate", "arguments": {"url": f"{portal.origin}/login/standard"}},
        {"tool": "request_credential", "arguments": {"portal_origin": portal.origin, "label": "Acme", "credential_id": "acme"}},
        {"tool": "browser_login", "arguments": {"credentialId": "acme"}},
        {"tool": "finish", "arguments": {"output": "done"}},
    ]
    async with httpx.AsyncClient(base_url=live_origin, timeout=30) as client:
        auth = {"Authorization": f"Bearer {runner_key}"}
        created = await client.post(
            "/api/runs",
            json={"task": {"goal": "Sign in", "steps": steps}, "computer_id": "pc-1", "max_model_calls": 10},
            headers=auth,
        )
        assert created.status_code == 201, created.text
        run_id = created.json()["id"]

        # Its computer was free: it started at once. A second run for that computer waits in the queue.
        waiting = await client.post(
            "/api/runs",
            json={"task": {"goal": "Wait", "steps": [{"tool": "finish", "arguments": {}}]}, "computer_id": "pc-1", "max_model_calls": 1},
            headers=auth,
        )
        assert waiting.json()["status"] == "queued", waiting.text
        queued = await scrape(live_origin)
        assert value(queued, "ram_queue_depth", account=str(account.id)) == 1
        assert value(queued, "ram_queue_oldest_age_seconds", account=str(account.id)) >= 0
        assert value(queued, "ram_runs", status="queued") == 1
        assert value(queued, "ram_runs", status="running") == 1
        cancelled = await client.post(f"/api/runs/{waiting.json()['id']}/cancel", headers=auth)
        assert cancelled.status_code == 200, cancelled.text
        route = {"route": "/api/runs", "method": "POST", "status": "201"}
        assert value(queued, "ram_http_requests_total", **route) == value(before, "ram_http_requests_total", **route) + 2
        assert value(queued, "ram_http_request_duration_seconds_count", route="/api/runs", method="POST") >= 1

        paused = await db(lambda: drive(run_id))
        assert paused.pause_kind == "credential"
        during = await scrape(live_origin)
        assert value(during, "ram_queue_depth", account=str(account.id)) == 0
        assert value(during, "ram_runs", status="waiting_for_input") == 1
        assert value(during, "ram_runs_waiting", kind="credential") == 1
        assert value(during, "ram_run_pauses_total", kind="credential") == value(before, "ram_run_pauses_total", kind="credential") + 1
        nav = "ram_step_duration_seconds_count"
        assert value(during, nav, tool="navigate") == value(before, nav, tool="navigate") + 1
        assert value(during, "ram_step_duration_seconds_sum", tool="navigate") > value(before, "ram_step_duration_seconds_sum", tool="navigate")

        # The credential is stored, the harness continues, browser_login signs in.
        await db(
            lambda: portal_credential_write(
                token=vault.root_token,
                account_id=account.id,
                credential_id="acme",
                credential=PortalCredential(username=PORTAL_USERNAME, password=PORTAL_PASSWORD, origins=(portal.origin,)),
            )
        )
        continued = await client.post(f"/api/runs/{run_id}/continue", json={"idempotency_key": "after-credential"}, headers=auth)
        assert continued.status_code == 201, continued.text
        finished = await db(lambda: drive(continued.json()["run"]["id"]))
        assert finished.status == "succeeded", finished.result

    after = await scrape(live_origin)
    outcome = "ram_browser_login_outcomes_total"
    assert value(after, outcome, code="logged_in") == value(before, outcome, code="logged_in") + 1
    assert value(after, "ram_runs_finished_total", status="succeeded") == value(before, "ram_runs_finished_total", status="succeeded") + 1
    assert value(after, nav, tool="browser_login") == value(before, nav, tool="browser_login") + 1
    continue_route = {"route": "/api/runs/<str:run_id>/continue", "method": "POST", "status": "201"}
    assert value(after, "ram_http_requests_total", **continue_route) == value(before, "ram_http_requests_total", **continue_route) + 1

    # A refused Vault call is counted (by kind of error, never with the token).
    with pytest.raises(VaultRefused):
        await db(lambda: portal_credential_read(account_id=account.id, credential_id="acme", grant="not-a-grant"))
    refused = await scrape(live_origin)
    assert value(refused, "ram_vault_errors_total", error="refused") == value(after, "ram_vault_errors_total", error="refused") + 1

    # A screen socket: sessions open and frames sent move.
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await frame_pair(ws)
    watching = await scrape(live_origin)
    await ws.close()
    assert value(watching, "ram_visual_sessions_open", mode="observe") == 1
    opened = "ram_visual_sessions_opened_total"
    assert value(watching, opened, mode="observe") == value(refused, opened, mode="observe") + 1
    assert value(watching, "ram_visual_frames_sent_total") >= value(refused, "ram_visual_frames_sent_total") + 1
    text = str(watching)
    for secret in (runner_key, PORTAL_PASSWORD, vault.root_token, OPS_TOKEN):
        assert secret not in text


@pytest.mark.live
def test_serve_metrics_sums_every_process_on_a_private_address(transactional_db: None, account: Account) -> None:
    """A second process records into the shared folder; serve_metrics (a third) reports it."""
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "PROMETHEUS_MULTIPROC_DIR": os.environ["PROMETHEUS_MULTIPROC_DIR"],
    }
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve_metrics", "--address", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 60
        while True:
            try:
                first = httpx.get(url, timeout=10)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
        assert first.status_code == 200
        baseline = parse(first.text)
        assert value(baseline, "ram_database_scrape_ok") == 1
        before = value(baseline, "ram_vault_errors_total", error="unavailable")
        code = (
            "import django; django.setup(); from core.metrics import VAULT_ERRORS; "
            "VAULT_ERRORS.labels(error='unavailable').inc(3)"
        )
        subprocess.run([sys.executable, "-c", code], env={**env, "DJANGO_SETTINGS_MODULE": "ramsite.settings"}, check=True)
        after = parse(httpx.get(url, timeout=10).text)
        assert value(after, "ram_vault_errors_total", error="unavailable") == before + 3
        assert httpx.get(f"http://127.0.0.1:{port}/other", timeout=10).status_code == 404
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_metrics_folder_is_set_before_any_metric_exists() -> None:
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    assert values.ValueClass is not values.MutexValue  # the multiprocess (mmap) value class
