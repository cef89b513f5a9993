"""Browser backends: ``cdp`` against a real Chromium with remote debugging on loopback,
``steel`` and ``browserbase`` against loopback fakes of their REST APIs (tests/support/vendors.py,
the vendors' request and response shapes cited there), each handing out a real Chromium.
The whole path is real except the vendor: Vault (OpenBao), the executor, Playwright over CDP,
the run loop and browser_login."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.services import account_top_up, api_key_create
from computers.models import Computer, DiagnosticArtifact
from computers.selectors import computer_is_ready
from computers.services import computer_browser_set, computer_reassign
from executor import actions
from executor.backends import CdpBackend, scrub
from executor.contracts import BROWSER_BACKENDS, BrowserSettings, CdpOptions, browser_options
from executor.runtime import HEARTBEAT_SECONDS, Executor, ExecutorThread
from runs import loop
from runs.models import Run
from runs.services import run_continue, run_create
from tests.support.executors import start_executor_process
from tests.support.portals import PASSWORD, USERNAME, Portal, serve_portal
from tests.support.screen import db, on_executor, open_socket, recv_type, recv_until_closed
from tests.support.tiers import live
from tests.support.vault import VaultServer, vendor_secret_read_back
from tests.support.vendors import (
    FakeBrowserbase,
    FakeSteel,
    RemoteChromium,
    remote_chromium,
    serve_browserbase,
    serve_steel,
)
from tests.support.waits import eventually
from vault_bridge.credentials import PortalCredential, browser_vendor_secret_write, portal_credential_write

ROOT = Path(__file__).resolve().parents[2]

# --- Contracts (unit) ----------------------------------------------------------------


def test_scrub_cuts_url_queries_userinfo_and_secrets() -> None:
    text = "WebSocket error: wss://user:pw@connect.example/devtools?apiKey=k1&sessionId=s 403 for key sk-secret"
    cleaned = scrub(text, ("sk-secret",))
    assert cleaned == "WebSocket error: wss://connect.example/devtools 403 for key [redacted]"


@pytest.mark.parametrize("value", ["yes", "true", 1, 0, "false"])
def test_solve_captcha_is_a_strict_boolean(value: Any) -> None:
    with pytest.raises(pydantic.ValidationError):
        BrowserSettings.model_validate({"provider": "browserbase", "solveCaptcha": value})
    assert BrowserSettings.model_validate({"solveCaptcha": False}).solveCaptcha is False
    assert BrowserSettings.model_validate({}).solveCaptcha is None


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        ("cdp", {"endpoint": "ws://127.0.0.1:9222/devtools/browser/x?token=secret"}),
        ("cdp", {"endpoint": "wss://user:pass@browserless.example"}),
        ("cdp", {"endpoint": "ftp://example.com"}),
        ("cdp", {}),
        ("steel", {"api_url": "https://api.steel.dev", "solve_captcha": "yes"}),
        ("steel", {"api_key": "sk-in-the-database"}),
        ("browserbase", {"project_id": 7}),
        ("local", {"endpoint": "ws://x"}),
        ("firefox", {}),
    ],
)
def test_backend_options_are_closed_and_carry_no_secret(backend: str, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - pydantic's ValidationError is a ValueError
        browser_options(backend, options)


# --- The API and the admin (Vault holds the secret) ----------------------------------------


def _put_browser(api: Any, key: str, computer_id: str, body: Any) -> Any:
    return api.client.put(
        f"/api/computers/{computer_id}/browser",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )


def test_the_api_chooses_a_backend_and_the_secret_goes_to_vault_only(
    api: Any, vault: VaultServer, account: Account, computer: Computer, runner_key: str
) -> None:
    body = {"backend": "steel", "options": {"api_url": "https://steel.internal.example", "solve_captcha": True}, "secret": "sk-steel-123"}
    response = _put_browser(api, runner_key, computer.id, body)
    assert response.status_code == 200, response.content
    out = response.json()
    assert out["browser"] == {
        "backend": "steel",
        "provider": "steel_cloud",
        "options": {"api_url": "https://steel.internal.example", "solve_captcha": True, "session_timeout_ms": 3_600_000},
        "ready_ms": None,
    }
    assert "sk-steel-123" not in response.content.decode()
    computer.refresh_from_db()
    assert computer.browser_backend == "steel"
    assert "sk-steel-123" not in json.dumps(computer.browser_options)
    assert vendor_secret_read_back(account_id=account.id, vendor="steel") == "sk-steel-123"
    listed = api.client.get("/api/computers", headers={"Authorization": f"Bearer {runner_key}"}).json()
    assert listed["computers"][0]["browser"]["backend"] == "steel"


@pytest.mark.parametrize(
    "body",
    [
        {"backend": "firefox"},
        {"backend": "steel", "options": {"solve_captcha": "yes"}},
        {"backend": "cdp", "options": {"endpoint": "ws://127.0.0.1:9222/?token=t"}},
        {"backend": "local", "secret": "x"},
        {"backend": "steel", "extra": 1},
        {"backend": "steel", "secret": 12345},
    ],
)
def test_a_bad_browser_body_is_a_400_and_changes_nothing(
    api: Any, vault: VaultServer, computer: Computer, runner_key: str, body: dict[str, Any]
) -> None:
    response = _put_browser(api, runner_key, computer.id, body)
    assert response.status_code == 400, response.content
    assert "error" in response.json()
    computer.refresh_from_db()
    assert computer.browser_backend == "local" and computer.browser_options == {}


def test_a_change_ends_the_generation_and_the_same_choice_again_ends_nothing(
    api: Any, vault: VaultServer, computer: Computer, runner_key: str
) -> None:
    def running() -> uuid.UUID:
        generation = uuid.uuid4()
        Computer.objects.filter(pk=computer.pk).update(
            generation=generation, status="ready", executor_address="127.0.0.1:9", last_heartbeat_at=timezone.now(),
            browser_ready_ms=1234,
        )  # fmt: skip
        return generation

    running()
    before = Computer.objects.get(pk=computer.pk)
    body: dict[str, Any] = {"backend": "cdp", "options": {"endpoint": "ws://127.0.0.1:9222/devtools/browser/x"}}
    changed = _put_browser(api, runner_key, computer.id, body)
    assert changed.status_code == 200 and changed.json()["available"] is False
    after = Computer.objects.get(pk=computer.pk)
    assert (after.generation, after.status, after.executor_address, after.browser_ready_ms) == (None, "offline", "", None)
    assert after.profile_generation != before.profile_generation, "the new browser starts signed out"
    assert after.binding == before.binding, "runs keep their computer"
    # The same choice again: nothing changes, nothing ends.
    generation = running()
    assert _put_browser(api, runner_key, computer.id, body).status_code == 200
    again = Computer.objects.get(pk=computer.pk)
    assert (again.generation, again.status, again.profile_generation) == (generation, "ready", after.profile_generation)
    # A new secret (a token for the same endpoint) is a change: the executor must read it.
    assert _put_browser(api, runner_key, computer.id, {**body, "secret": "tok-new"}).status_code == 200
    assert Computer.objects.get(pk=computer.pk).generation is None


def test_another_accounts_computer_is_not_found(
    api: Any, vault: VaultServer, make_account: Callable[..., Account], make_computer: Callable[..., Computer], runner_key: str
) -> None:
    other = make_computer(make_account("Other"), "pc-other")
    assert _put_browser(api, runner_key, other.id, {"backend": "cdp", "options": {"endpoint": "ws://x:1/"}}).status_code == 404
    other.refresh_from_db()
    assert other.browser_backend == "local"


def test_a_runs_provider_must_match_its_computers_backend(
    api: Any, vault: VaultServer, account: Account, computer: Computer, runner_key: str
) -> None:
    computer_browser_set(computer=computer, backend="browserbase", options={}, secret="bb-key")

    def create(browser: dict[str, Any] | None) -> Any:
        body: dict[str, Any] = {"computer_id": computer.id, "task": {"goal": "x", "steps": [{"tool": "finish", "arguments": {"output": "x"}}]}}
        if browser is not None:
            body["agent"] = {"browser": browser}
        return api.post("/api/runs", body, key=runner_key)

    refused = create({"provider": "steel_cloud", "solveCaptcha": True})
    assert refused.status_code == 400
    assert "browserbase" in refused.json()["error"] and "steel_cloud" in refused.json()["error"]
    assert not Run.objects.exists()
    assert create({"provider": "browserbase", "solveCaptcha": "yes"}).status_code == 400
    assert not Run.objects.exists()
    created = create(None)
    assert created.status_code == 201, created.content
    assert Run.objects.get().agent_config["browser"] == {"provider": "browserbase", "solveCaptcha": None}


# --- Live: the executor on each backend ----------------------------------------------------


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


@pytest.fixture
def remote_ok(settings: Any) -> None:
    settings.RAM_BROWSER_EGRESS_REMOTE_ACCEPT = True


@pytest.fixture
def setup(live_origin: str, vault: VaultServer, account: Account, computer: Computer, portal: Portal, settings: Any) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 20
    portal_credential_write(
        token=vault.root_token,
        account_id=account.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,)),
    )
    return account


@pytest.fixture
def start() -> Iterator[Callable[..., Executor]]:
    """Start the executor of ``pc-1`` as run_executor would (its backend read from the row and Vault)."""
    threads: list[ExecutorThread] = []

    def go(**kwargs: Any) -> Executor:
        thread = ExecutorThread(Executor(computer_id="pc-1", register=True, sandbox=False, **kwargs)).start()
        threads.append(thread)
        return thread.executor

    yield go
    for thread in threads:
        thread.stop()


def advance(run: Run, limit: int = 12) -> Run:
    for _ in range(limit):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def login_run(account: Account, portal: Portal, path: str, browser: dict[str, Any] | None = None) -> Run:
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + path}},
        {"tool": "browser_login", "arguments": {"credentialId": "portal"}},
        {"tool": "extract_text", "arguments": {}},
    ]
    agent: dict[str, Any] = {"type": "scripted"}
    if browser is not None:
        agent["browser"] = browser
    run = run_create(
        account=account, computer=Computer.objects.get(pk="pc-1"), task={"goal": "log in", "steps": steps},
        agent_config=agent, max_model_calls=10,
    )  # fmt: skip
    return advance(run)


def login_result(run: Run) -> dict[str, Any]:
    step = run.steps.filter(tool="browser_login").get()
    return dict(step.result)


def test_a_remote_backend_does_not_start_unless_the_operator_accepts_the_partial_egress_policy(
    setup: Account, start: Callable[..., Executor]
) -> None:
    with remote_chromium() as chromium:
        computer_browser_set(computer=Computer.objects.get(pk="pc-1"), backend="cdp", options={"endpoint": chromium.ws_url})
        with pytest.raises(RuntimeError) as refused:
            start()
    assert "RAM_BROWSER_EGRESS_REMOTE_ACCEPT" in str(refused.value)
    assert "WebSockets" in str(refused.value)
    assert Computer.objects.get(pk="pc-1").status == "offline"


def test_cdp_backend_checks_each_request_against_the_egress_policy(
    setup: Account, portal: Portal, remote_ok: None, start: Callable[..., Executor]
) -> None:
    with remote_chromium() as chromium, serve_portal() as elsewhere:
        computer_browser_set(computer=Computer.objects.get(pk="pc-1"), backend="cdp", options={"endpoint": chromium.ws_url})
        executor = start()
        assert executor.backend is not None and executor.backend.name == "cdp"
        on_executor(executor, lambda: actions.navigate(executor.page, portal.origin + "/welcome"))
        assert "Welcome back" in on_executor(executor, lambda: executor.page.inner_text("body"))
        # Not in RAM_BROWSER_EGRESS_ALLOW: a loopback address is refused before the request leaves.
        with pytest.raises(Exception) as refused:
            on_executor(executor, lambda: actions.navigate(executor.page, elsewhere.origin + "/welcome"))
        assert "egress" in str(refused.value).lower()
        assert executor.egress.refused_since(0) == elsewhere.origin.removeprefix("http://")
        # A subresource too: a request from an allowed page never reaches the other server.
        on_executor(executor, lambda: actions.navigate(executor.page, portal.origin + "/welcome"))
        script = f"() => fetch({json.dumps(elsewhere.origin + '/leak')}, {{method: 'POST', body: 'x', mode: 'no-cors'}}).then(() => 'sent', () => 'refused')"
        assert on_executor(executor, lambda: executor.page.evaluate(script)) == "refused"
        assert elsewhere.leaks == []
        # The same request to an allowed server goes through: the check above is the policy's.
        allowed = f"() => fetch({json.dumps(portal.origin + '/leak')}, {{method: 'POST', body: 'x'}}).then(() => 'sent', () => 'refused')"
        assert on_executor(executor, lambda: executor.page.evaluate(allowed)) == "sent"
        assert portal.leaks == ["x"]


def test_cdp_endpoints_that_fail_are_clear_errors_without_their_token(
    setup: Account, portal: Portal, remote_ok: None
) -> None:
    def start_with(endpoint: str, token: str | None) -> str:
        backend = CdpBackend(CdpOptions(endpoint=endpoint), token=token)
        began = time.monotonic()
        with pytest.raises(RuntimeError) as failed:
            ExecutorThread(Executor(computer_id="pc-1", register=False, sandbox=False, backend=backend)).start(timeout=40)
        assert time.monotonic() - began < 35, "never a hang"
        return str(failed.value)

    with remote_chromium() as chromium:
        closed_port = chromium.port
    unreachable = start_with(f"ws://127.0.0.1:{closed_port}/devtools/browser/x", "tok-unreachable-123")
    assert "could not be reached over CDP" in unreachable
    assert "tok-unreachable-123" not in unreachable
    not_a_browser = start_with(portal.origin, "tok-portal-456")
    assert "could not be reached over CDP" in not_a_browser
    assert "tok-portal-456" not in not_a_browser


@pytest.fixture
def steel(portal: Portal) -> Iterator[FakeSteel]:
    with serve_steel() as fake:
        # The challenge is "being solved" on the session while the portal's /steel page says so.
        fake.solving = lambda _session_id: time.monotonic() < portal.steel_solving_until
        yield fake


@pytest.fixture
def browserbase() -> Iterator[FakeBrowserbase]:
    with serve_browserbase() as fake:
        yield fake


def use_steel(fake: FakeSteel, *, key: str = "steel-test-key", solve: bool = True) -> None:
    computer_browser_set(
        computer=Computer.objects.get(pk="pc-1"), backend="steel",
        options={"api_url": fake.origin, "solve_captcha": solve}, secret=key,
    )  # fmt: skip


def use_browserbase(fake: FakeBrowserbase, *, key: str = "bb-test-key", solve: bool = True) -> None:
    computer_browser_set(
        computer=Computer.objects.get(pk="pc-1"), backend="browserbase",
        options={"api_url": fake.origin, "project_id": fake.project_id, "solve_captchas": solve}, secret=key,
    )  # fmt: skip


def test_steel_session_belongs_to_the_generation_and_its_captcha_status_is_polled_for_that_session(
    setup: Account, portal: Portal, steel: FakeSteel, remote_ok: None, start: Callable[..., Executor]
) -> None:
    use_steel(steel)
    executor = start()
    (created,) = [r for r in steel.requests if r[0] == "POST" and r[1] == "/v1/sessions"]
    assert created[2]["steel-api-key"] == "steel-test-key"
    assert created[3] == {"solveCaptcha": True, "timeout": 3_600_000, "dimensions": {"width": 1280, "height": 720}}
    (session,) = steel.live
    row = Computer.objects.get(pk="pc-1")
    assert row.browser_session_id == session.id and row.browser_ready_ms is not None
    assert executor.backend is not None and executor.backend.session_id == session.id
    # Another session at the vendor: never asked about.
    other = steel.start_session({})
    run = login_run(setup, portal, "/steel", {"provider": "steel_cloud", "solveCaptcha": True})
    assert login_result(run) == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert steel.status_queries.get(session.id, 0) > 0
    assert other.id not in steel.status_queries
    # Without solveCaptcha on the run: no query, no wait.
    before = dict(steel.status_queries)
    run = login_run(setup, portal, "/login/standard", {"provider": "steel_cloud", "solveCaptcha": False})
    assert login_result(run)["isError"] is False
    assert steel.status_queries == before
    steel.release(other.id)


def test_steel_challenge_before_the_submit_is_captcha_pending_and_submits_nothing(
    setup: Account, portal: Portal, steel: FakeSteel, remote_ok: None, start: Callable[..., Executor], settings: Any
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 5
    steel.solving = lambda _session_id: True
    use_steel(steel)
    start()
    run = login_run(setup, portal, "/login/standard", {"solveCaptcha": True})
    result = login_result(run)
    assert result["code"] == "browser.captcha_pending" and result["category"] == "unprocessable"
    assert "request_takeover" in result["content"]
    assert portal.posts == []
    # An unfinished captcha gets its masked capture too.
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()


def test_solving_asked_of_a_session_created_without_the_solver_is_its_own_code_and_reads_nothing(
    setup: Account, portal: Portal, steel: FakeSteel, remote_ok: None, start: Callable[..., Executor]
) -> None:
    use_steel(steel, solve=False)
    start()
    run = login_run(setup, portal, "/login/standard", {"solveCaptcha": True})
    result = login_result(run)
    assert result["code"] == "browser.provider_not_configured" and result["category"] == "unprocessable"
    assert portal.posts == [] and steel.status_queries == {}
    # Without solveCaptcha the same computer logs in and asks Steel nothing.
    assert login_result(login_run(setup, portal, "/login/standard"))["isError"] is False
    assert steel.status_queries == {}


def test_an_unavailable_steel_status_is_waited_on_and_submits_nothing(
    setup: Account, portal: Portal, steel: FakeSteel, remote_ok: None, start: Callable[..., Executor], settings: Any
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 5
    steel.status_fails = True
    use_steel(steel)
    start()
    run = login_run(setup, portal, "/login/standard", {"solveCaptcha": True})
    assert login_result(run)["code"] == "browser.captcha_pending"
    assert sum(steel.status_queries.values()) > 0
    assert portal.posts == []


def test_self_hosted_steel_browser_gets_no_waits(
    setup: Account, portal: Portal, remote_ok: None, start: Callable[..., Executor]
) -> None:
    with serve_steel(cloud=False) as fake:
        fake.solving = lambda _session_id: True
        use_steel(fake)
        start()
        run = login_run(setup, portal, "/login/standard", {"solveCaptcha": True})
        assert login_result(run)["isError"] is False
        assert fake.status_queries == {}


def test_a_refused_steel_key_is_a_clear_error_without_the_key(
    setup: Account, steel: FakeSteel, remote_ok: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    use_steel(steel, key="sk-wrong-key-789")
    with pytest.raises(RuntimeError) as failed:
        ExecutorThread(Executor(computer_id="pc-1", register=True, sandbox=False)).start()
    assert "refused the API key" in str(failed.value)
    assert "sk-wrong-key-789" not in str(failed.value) + caplog.text
    assert steel.live == []


def test_browserbase_waits_on_its_sessions_console_unless_solve_captcha_is_false(
    setup: Account, portal: Portal, browserbase: FakeBrowserbase, remote_ok: None, start: Callable[..., Executor],
    settings: Any, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    use_browserbase(browserbase)
    executor = start()
    (created,) = [r for r in browserbase.requests if r[0] == "POST" and r[1] == "/v1/sessions"]
    assert created[2]["X-BB-API-Key"] == "bb-test-key"
    assert created[3] == {
        "projectId": "proj-test",
        "browserSettings": {"solveCaptchas": True, "viewport": {"width": 1280, "height": 720}},
        "timeout": 3600,
    }
    (session,) = browserbase.live
    assert executor.backend is not None and executor.backend.session_id == session.id
    # The solver is on by default: the post-submit challenge is waited for.
    run = login_run(setup, portal, "/bb-after")
    assert login_result(run) == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert "Welcome back" in str(run.result)
    # A challenge before the submit that never clears: nothing is submitted.
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 5
    run = login_run(setup, portal, "/bb-before", {"provider": "browserbase"})
    assert login_result(run)["code"] == "browser.captcha_pending"
    submitted = len(portal.posts)
    assert submitted == 1, "only the first login's form was ever submitted"
    # solveCaptcha false, explicitly: no wait at all, the form is submitted.
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 20
    run = login_run(setup, portal, "/bb-before", {"provider": "browserbase", "solveCaptcha": False})
    assert login_result(run)["isError"] is False
    assert len(portal.posts) == submitted + 1
    # The connect URL's signing key never reaches a log.
    assert browserbase.signing_keys[session.id] not in caplog.text


# Every backend of the registry: a new one fails here until its setup branch below is written.
@pytest.mark.parametrize("backend", list(BROWSER_BACKENDS))
def test_the_persons_login_survives_a_pause_and_its_continuation(
    backend: str, setup: Account, portal: Portal, steel: FakeSteel, browserbase: FakeBrowserbase, remote_ok: None,
    start: Callable[..., Executor],
) -> None:  # fmt: skip
    chromium: RemoteChromium | None = None
    if backend == "cdp":
        chromium = RemoteChromium()
        computer_browser_set(computer=Computer.objects.get(pk="pc-1"), backend="cdp", options={"endpoint": chromium.ws_url})
    elif backend == "steel":
        use_steel(steel, solve=False)
    elif backend == "browserbase":
        use_browserbase(browserbase, solve=False)
    else:
        assert backend == "local", f"no setup here for the {backend} backend"
    try:
        start()
        steps = [
            {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
            {"tool": "browser_login", "arguments": {"credentialId": "portal"}},
            {"tool": "request_takeover", "arguments": {"reason": "other"}},
            {"tool": "navigate", "arguments": {"url": portal.origin + "/account"}},
            {"tool": "extract_text", "arguments": {}},
        ]
        run = advance(run_create(account=setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=10))
        assert run.status == "waiting_for_input", run.result
        key = api_key_create(account=setup, kind=ApiKey.Kind.RUNNER)[0]
        continued = run_continue(key=key, run_id=run.id, idempotency_key=f"continue-{uuid.uuid4()}")
        assert not continued.replayed
        continuation = advance(Run.objects.get(pk=continued.answer["run"]["id"]))
        assert continuation.status == "succeeded", continuation.result
        text = str(continuation.steps.filter(tool="extract_text").get().result)
        assert "Still signed in" in text, "the portal's session cookie survived the pause and the continuation"
        assert len(portal.posts) == 1, "the password was typed once"
    finally:
        if chromium is not None:
            chromium.close()


async def test_a_vendor_session_that_dies_mid_run_makes_the_computer_unavailable(
    setup: Account, portal: Portal, steel: FakeSteel, remote_ok: None, start: Callable[..., Executor],
    live_origin: str, runner_key: str,
) -> None:  # fmt: skip
    await db(lambda: use_steel(steel, solve=False))
    executor = await asyncio.to_thread(start)
    assert await db(lambda: computer_is_ready(Computer.objects.get(pk="pc-1")))
    (session,) = steel.live
    watcher = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(watcher, "frame")
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + "/welcome"}},
        # Up to 20 s for an element that never comes: the run is inside this step when the session ends.
        {"tool": "wait_for", "arguments": {"selector": "#never-there", "timeout_ms": 20_000}},
    ]
    run = await db(
        lambda: run_create(
            account=setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=5
        )
    )
    running = asyncio.create_task(db(lambda: advance(run)))

    def waiting_in_the_step() -> bool:
        return run.steps.filter(index=1, tool="wait_for", state="started").exists()

    for _ in range(600):  # at most 30 s
        if executor.control.agent_tasks and await db(waiting_in_the_step):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the run never reached its wait_for step")
    await asyncio.to_thread(steel.release, session.id)  # the vendor ends it (a timeout, a crash)

    # The step fails at once with a plain reason (not the wait's own 20 s timeout), the run with it.
    finished = await asyncio.wait_for(running, 15)
    assert finished.status == "failed", finished.result
    failed = await db(lambda: run.steps.get(index=1).result)
    assert failed["isError"] is True
    assert "browser was lost" in failed["content"] and "did not finish in time" not in failed["content"]
    # The person watching sees the computer unavailable, then the session ends.
    messages = await recv_until_closed(watcher)
    states = [m for m in messages if isinstance(m, dict) and m.get("type") == "state"]
    assert {"type": "state", "control": "unavailable", "controlling": False} in states
    for _ in range(75):  # at most 15 s
        row = await db(lambda: Computer.objects.get(pk="pc-1"))
        if row.status != "ready":
            break
        await asyncio.sleep(0.2)
    assert row.status == "failed" and not computer_is_ready(row)


def test_a_new_generation_gets_a_new_session_and_the_old_one_is_released(
    setup: Account, make_account: Callable[..., Account], browserbase: FakeBrowserbase, remote_ok: None,
    start: Callable[..., Executor],
) -> None:  # fmt: skip
    use_browserbase(browserbase)
    executor = start()
    (first,) = browserbase.live
    old_generation = executor.generation
    # The computer moves to another account: its generation ends and the old owner's profile goes.
    # The new session is created with the new owner's own key.
    newcomer = make_account("Newcomer")
    browser_vendor_secret_write(account_id=newcomer.id, vendor="browserbase", secret="bb-newcomer-key")
    browserbase.other_keys.add("bb-newcomer-key")
    computer_reassign(computer_id="pc-1", account=newcomer)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and executor.generation == old_generation:
        time.sleep(0.2)
    assert executor.generation != old_generation
    assert browserbase.sessions[first.id].released
    (second,) = browserbase.live
    assert second.id != first.id
    assert Computer.objects.get(pk="pc-1").browser_session_id == second.id
    creates = [r for r in browserbase.requests if r[0] == "POST" and r[1] == "/v1/sessions"]
    assert [r[2]["X-BB-API-Key"] for r in creates] == ["bb-test-key", "bb-newcomer-key"]
    (release,) = [r for r in browserbase.requests if r[1] == f"/v1/sessions/{first.id}"]
    assert release[2]["X-BB-API-Key"] == "bb-test-key" and release[3]["status"] == "REQUEST_RELEASE"


def test_sessions_are_released_at_stop_and_after_a_crash_at_the_next_start(
    setup: Account, portal: Portal, steel: FakeSteel, vault: VaultServer, settings: Any, live_origin: str
) -> None:
    use_steel(steel)
    # The executor process has no database and no Vault token: its backend, its sessions and a
    # one-use grant for its own account's Steel key come from the internal endpoint.
    env = {
        "VAULT_ADDR": vault.addr,
        "VAULT_TOKEN": "",
        "VAULT_KV_MOUNT": vault.kv_mount,
        "RAM_BROWSER_EGRESS_REMOTE_ACCEPT": "true",
        "RAM_BROWSER_EGRESS_ALLOW": ",".join(settings.RAM_BROWSER_EGRESS_ALLOW),
    }

    def launch() -> subprocess.Popen[bytes]:
        return start_executor_process("pc-1", live_origin, stderr=subprocess.DEVNULL, **env)

    first = launch()
    try:
        eventually(lambda: Computer.objects.get(pk="pc-1").status == "ready", 60, interval=0.2)
        crashed = Computer.objects.get(pk="pc-1").browser_session_id
        assert crashed and [s.id for s in steel.live] == [crashed]
        # Mid-run: the run has driven the remote browser and waits for a person when the executor dies.
        steps = [
            {"tool": "navigate", "arguments": {"url": portal.origin + "/welcome"}},
            {"tool": "request_takeover", "arguments": {"reason": "other"}},
        ]
        run = advance(run_create(account=setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=5))
        assert run.status == "waiting_for_input", run.result
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: nothing is released on the way out
        first.wait(timeout=20)
    assert not steel.sessions[crashed].released
    second = launch()
    try:
        eventually(lambda: steel.sessions[crashed].released, 60, interval=0.2)
        eventually(lambda: Computer.objects.get(pk="pc-1").browser_session_id not in ("", crashed), 60, interval=0.2)
        current = Computer.objects.get(pk="pc-1").browser_session_id
        assert [s.id for s in steel.live] == [current]
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    assert steel.live == [], "a clean stop releases the session"
    assert Computer.objects.get(pk="pc-1").browser_session_id == ""


def test_a_refused_browserbase_key_is_a_clear_error_without_the_key(
    setup: Account, browserbase: FakeBrowserbase, remote_ok: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    use_browserbase(browserbase, key="bb-wrong-key-789")
    with pytest.raises(RuntimeError) as failed:
        ExecutorThread(Executor(computer_id="pc-1", register=True, sandbox=False)).start()
    assert "Browserbase refused the API key (401) when asked to create a session" in str(failed.value)
    assert "bb-wrong-key-789" not in str(failed.value) + caplog.text
    # The key was sent to the vendor (and only there), and refused: no session exists.
    (create,) = [r for r in browserbase.requests if r[0] == "POST" and r[1] == "/v1/sessions"]
    assert create[2]["X-BB-API-Key"] == "bb-wrong-key-789"
    assert browserbase.sessions == {}
    row = Computer.objects.get(pk="pc-1")
    assert not computer_is_ready(row) and "bb-wrong-key-789" not in json.dumps(row.browser_options)


@pytest.mark.parametrize("backend", ["cdp", "steel", "browserbase"])
def test_a_computer_reports_its_browsers_cold_start(
    backend: str, api: Any, runner_key: str, setup: Account, steel: FakeSteel, browserbase: FakeBrowserbase,
    remote_ok: None, start: Callable[..., Executor],
) -> None:  # fmt: skip
    chromium = RemoteChromium() if backend == "cdp" else None
    try:
        if chromium is not None:
            computer_browser_set(computer=Computer.objects.get(pk="pc-1"), backend="cdp", options={"endpoint": chromium.ws_url})
        elif backend == "steel":
            use_steel(steel, solve=False)
        else:
            use_browserbase(browserbase, solve=False)
        (before,) = api.get("/api/computers", key=runner_key).json()["computers"]
        assert before["browser"]["backend"] == backend and before["browser"]["ready_ms"] is None
        start()
        (listed,) = api.get("/api/computers", key=runner_key).json()["computers"]
    finally:
        if chromium is not None:
            chromium.close()
    assert listed["available"] is True and listed["browser"]["backend"] == backend
    ready_ms = listed["browser"]["ready_ms"]
    assert isinstance(ready_ms, int) and ready_ms >= 0


def test_a_backend_change_reaches_a_running_executor_within_its_heartbeat(
    setup: Account, portal: Portal, remote_ok: None, start: Callable[..., Executor], api: Any, runner_key: str
) -> None:
    executor = start()
    assert executor.backend is not None and executor.backend.name == "local"
    old_generation = executor.generation
    with remote_chromium() as chromium:
        changed = _put_browser(api, runner_key, "pc-1", {"backend": "cdp", "options": {"endpoint": chromium.ws_url}})
        assert changed.status_code == 200, changed.content
        # The generation ends with the change: nothing runs on the old browser meanwhile.
        assert changed.json()["available"] is False
        deadline = time.monotonic() + 2 * HEARTBEAT_SECONDS + 10
        while executor.generation == old_generation or Computer.objects.get(pk="pc-1").status != "ready":
            assert time.monotonic() < deadline, "the running executor did not change its backend"
            time.sleep(0.2)
        assert executor.backend is not None and executor.backend.name == "cdp"
        (listed,) = api.get("/api/computers", key=runner_key).json()["computers"]
        assert listed["available"] is True
        assert (listed["browser"]["backend"], listed["browser"]["provider"]) == ("cdp", "self_hosted")
        # The remote Chromium serves the run: the run's page is open there.
        run = login_run(setup, portal, "/login/standard")
        assert run.status == "succeeded", run.result
        assert "Welcome back" in str(run.steps.filter(tool="extract_text").get().result)
        pages = httpx.get(chromium.http_url + "/json/list", timeout=10).json()
        assert portal.origin + "/welcome" in [p.get("url") for p in pages]


def test_a_vendor_backend_never_starts_without_its_secret(setup: Account, browserbase: FakeBrowserbase, remote_ok: None) -> None:
    computer_browser_set(computer=Computer.objects.get(pk="pc-1"), backend="browserbase", options={"api_url": browserbase.origin})
    with pytest.raises(RuntimeError) as failed:
        ExecutorThread(Executor(computer_id="pc-1", register=True, sandbox=False)).start()
    assert "No Browserbase API key" in str(failed.value)
    assert browserbase.requests == []


# --- Optional, not in CI: a self-hosted steel-browser built from its source ------------------
# `make test-steel-browser RAM_TEST_STEEL_URL=http://127.0.0.1:3000` (docs/browsers.md).


@pytest.mark.skipif(not os.environ.get("RAM_TEST_STEEL_URL"), reason="set RAM_TEST_STEEL_URL to a self-hosted steel-browser API")
def test_steel_backend_against_a_self_hosted_steel_browser(
    setup: Account, portal: Portal, remote_ok: None, start: Callable[..., Executor]
) -> None:
    computer_browser_set(
        computer=Computer.objects.get(pk="pc-1"), backend="steel",
        options={"api_url": os.environ["RAM_TEST_STEEL_URL"], "solve_captcha": True},
    )  # fmt: skip
    executor = start()
    assert executor.backend is not None and executor.backend.session_id
    run = login_run(setup, portal, "/login/standard", {"solveCaptcha": True})
    assert login_result(run) == {"content": "Logged in as p***r@example.com.", "isError": False}
