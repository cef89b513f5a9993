"""browser_login end to end: a run's scripted steps navigate to a real local
portal and log in through the run loop, the executor (Chromium) and OpenBao.
Covers the three outcomes, the budget, the origin
rule, the selector heuristic, the masked diagnostic and secret hygiene."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from PIL import Image, ImageFilter, ImageStat

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer, DiagnosticArtifact
from executor import login
from executor.contracts import BrowserLoginArgs, BrowserSettings
from executor.login import Budget, NoSolver, SolverNotConfigured, capture_diagnostic
from executor.runtime import Executor
from executor.wire import BROWSER_LOGIN_MARGIN_SECONDS
from runs import loop
from runs.browser import execute_browser_tool
from runs.contracts import ToolResult
from runs.models import Run, RunEvent
from runs.services import run_create
from runs.tool_calls import ToolCall
from tests.conftest import Api
from tests.support.live import free_port
from tests.support.portals import PASSWORD, USERNAME, Portal, serve_portal
from tests.support.screen import LOCAL_AND_CDP, executor_on, on_executor
from tests.support.tiers import live
from tests.support.vault import VaultServer
from tests.support.vendors import serve_browserbase, serve_steel
from vault_bridge.credentials import PortalCredential, portal_credential_write


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
@live
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """The login suite runs on the local backend and on a cdp one: the origin checks hold
    whichever browser the executor drives. Captcha waits of the managed backends are in
    test_backends.py."""
    yield from executor_on(request.param)


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


@pytest.fixture
def login_setup(screen: Executor, vault: VaultServer, account: Account, portal: Portal, settings: Any) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 20
    # The executor holds no Vault token (there is no such role): each browser_login brings a
    # one-use grant for the run's account.
    portal_credential_write(
        token=vault.root_token,
        account_id=account.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,)),
    )
    portal_credential_write(
        token=vault.root_token,
        account_id=account.id,
        credential_id="elsewhere",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=("https://other.example",)),
    )
    return account


def run_login(
    account: Account, portal: Portal, path: str, *, browser: dict[str, Any] | None = None, **login: Any
) -> Run:
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + path}},
        {"tool": "browser_login", "arguments": {"credentialId": "portal", **login}},
        {"tool": "extract_text", "arguments": {}},
    ]
    run = run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "log in", "steps": steps},
        agent_config={"type": "scripted", "browser": browser or {"provider": "self_hosted", "solveCaptcha": False}},
        max_model_calls=10,
    )
    for _ in range(10):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def result_of(run: Run, index: int = 1) -> dict[str, Any]:
    """The tool result the agent saw at step ``index``."""
    return dict(run.steps.get(index=index).result)



@pytest.mark.parametrize("layout", ["standard", "ids", "enter"])
def test_login_succeeds_with_the_heuristic(login_setup: Account, portal: Portal, layout: str) -> None:
    run = run_login(login_setup, portal, f"/login/{layout}")
    result = result_of(run)
    assert result == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert run.status == "succeeded"
    assert "Welcome back" in str(run.result)
    assert len(portal.posts) == 1


@pytest.mark.parametrize("solve_captcha", [True, None], ids=["solveCaptcha-true", "solveCaptcha-absent"])
def test_local_and_cdp_wait_for_no_solver_and_ask_no_vendor(
    login_setup: Account, portal: Portal, screen: Executor, solve_captcha: bool | None
) -> None:
    """Nothing solves captchas on a browser RAM launches or reaches over CDP: a page that speaks a
    solver's console protocol (Browserbase's, a challenge that never finishes) is logged in at once,
    whatever the run's solveCaptcha, and no vendor is asked anything (the vendors' stand-ins listen
    the whole time; a wait would have ended in browser.captcha_pending at the end of the budget)."""
    assert screen.backend is not None and screen.backend.name in ("local", "cdp")
    solver = on_executor(screen, lambda: _solver(screen, solve_captcha))
    assert isinstance(solver, NoSolver) and not isinstance(solver, SolverNotConfigured)
    browser: dict[str, Any] = {"provider": "self_hosted"}
    if solve_captcha is not None:
        browser["solveCaptcha"] = solve_captcha
    with serve_steel() as steel, serve_browserbase() as browserbase:
        run = run_login(login_setup, portal, "/bb-before", browser=browser)
        assert steel.requests == [] and browserbase.requests == []
    assert result_of(run) == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert len(portal.posts) == 1


async def _solver(screen: Executor, solve_captcha: bool | None) -> object:
    assert screen.backend is not None
    return screen.backend.solver(screen.page, BrowserSettings(solveCaptcha=solve_captcha))


def test_login_with_explicit_selectors(login_setup: Account, portal: Portal) -> None:
    run = run_login(
        login_setup,
        portal,
        "/login/custom",
        usernameSelector="[data-q=who]",
        passwordSelector="[data-q=key]",
        submitSelector="[data-q=go]",
    )
    assert result_of(run)["isError"] is False
    assert "Welcome back" in str(run.result)


def test_portal_refusal_is_a_normal_result_with_a_masked_capture(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/refuse")
    result = result_of(run)
    assert result["isError"] is False
    assert "refused" in result["content"]
    artifact = DiagnosticArtifact.objects.get(pk=result["artifact_id"])
    event = RunEvent.objects.get(run=run, kind="step_completed", data__index=1)
    assert event.data["artifact_id"] == result["artifact_id"]
    # Pixel check: the password field's region is blurred in the stored image.
    box = on_executor(screen, lambda: screen.page.locator("input[type=password]").bounding_box())
    stored = Image.open(io.BytesIO(bytes(artifact.data))).convert("L")
    sharp = Image.open(io.BytesIO(on_executor(screen, _screenshot_with_bullets(screen)))).convert("L")
    region = (int(box["x"]) + 2, int(box["y"]) + 2, int(box["x"] + box["width"]) - 2, int(box["y"] + box["height"]) - 2)
    sharp_detail = _edge_energy(sharp, region)
    stored_detail = _edge_energy(stored, region)
    assert sharp_detail > 5 * max(stored_detail, 0.1), (sharp_detail, stored_detail)
    # Outside the field the capture is not blurred.
    heading = (0, 0, 400, max(1, int(box["y"]) - 20))
    assert _edge_energy(stored, heading) > 0.5 * _edge_energy(sharp, heading)


def _screenshot_with_bullets(screen: Executor) -> Callable[[], Any]:
    async def shot() -> bytes:
        await screen.page.fill("input[type=password]", "x" * 16)
        return await screen.page.screenshot(type="png")

    return shot


def _edge_energy(image: Image.Image, box: tuple[int, int, int, int]) -> float:
    """Mean edge strength inside ``box`` (edges found on the whole image, so crops add none)."""
    return float(ImageStat.Stat(image.filter(ImageFilter.FIND_EDGES).crop(box)).mean[0])


def test_slow_portal_is_a_login_timeout_not_a_refusal(
    login_setup: Account, portal: Portal, settings: Any, screen: Executor
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 6
    portal.slow_seconds = 10
    run = run_login(login_setup, portal, "/slow")
    result = result_of(run)
    assert result["isError"] is True
    assert result["code"] == "browser.login_timeout", result["content"]
    assert result["category"] == "unprocessable"
    assert "snapshot" in result["content"] and "browser_login again" in result["content"]
    assert len(portal.posts) == 1, "nothing is retried automatically"
    # A login that did not complete fails the scripted run with its code; the next step never runs.
    assert run.status == "failed" and run.result["code"] == "browser.login_timeout"
    assert not run.steps.filter(index=2).exists()
    # The portal answers late: let its navigation land before the next test uses the browser.
    on_executor(screen, lambda: screen.page.wait_for_url("**/welcome", timeout=20_000), timeout=25)


def test_a_login_that_timed_out_on_the_page_gets_a_masked_capture(
    login_setup: Account, portal: Portal, settings: Any
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 6
    portal.slow_seconds = 10
    run = run_login(login_setup, portal, "/js-slow")
    result = result_of(run)
    assert result["code"] == "browser.login_timeout"
    # The budget kept room for the capture.
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()
    event = RunEvent.objects.get(run=run, kind="step_completed", data__index=1)
    assert event.data["artifact_id"] == result["artifact_id"] and event.data["code"] == "browser.login_timeout"


def test_credential_is_never_typed_into_another_origin(login_setup: Account, portal: Portal, screen: Executor) -> None:
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
        {"tool": "browser_login", "arguments": {"credentialId": "elsewhere"}},
    ]
    run = run_create(
        account=login_setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=5
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    result = result_of(run)
    assert result["isError"] is True and "origin" in result["content"]
    values = on_executor(screen, lambda: screen.page.eval_on_selector_all("input", "els => els.map(e => e.value)"))
    assert values == ["", ""]
    assert portal.posts == []


def test_unknown_credential_is_its_own_code_and_fails_the_run(
    login_setup: Account, portal: Portal, api: Api, runner_key: str
) -> None:
    run = run_login(login_setup, portal, "/login/standard", credentialId="missing")
    result = result_of(run)
    assert result["isError"] is True and result["category"] == "unprocessable"
    assert result["code"] == "browser.credential_not_found"
    assert "request_credential" in result["content"], "the message says what to do"
    # Nothing was typed, and the page the agent asked to sign in on is still captured (masked).
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()
    assert portal.posts == []
    assert run.status == "failed"
    assert run.result is not None
    assert (run.result["step"], run.result["tool"], run.result["code"], run.result["category"]) == (
        1, "browser_login", "browser.credential_not_found", "unprocessable"
    )
    assert run.result["error"].startswith("Step 2 (browser_login) failed [browser.credential_not_found, unprocessable]: ")
    assert not run.steps.filter(index=2).exists(), "the step after the failed login never ran"
    # A harness reads the same code and category through the steps API.
    listed = api.get(f"/api/runs/{run.id}/steps", runner_key).json()["steps"]
    assert [(s["index"], s["tool"], s["state"]) for s in listed] == [(0, "navigate", "succeeded"), (1, "browser_login", "failed")]
    assert (listed[1]["result"]["code"], listed[1]["result"]["category"]) == ("browser.credential_not_found", "unprocessable")


def test_on_error_continue_goes_on_after_a_login_that_did_not_complete(login_setup: Account, portal: Portal) -> None:
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
        {"tool": "browser_login", "arguments": {"credentialId": "missing"}, "on_error": "continue"},
        {"tool": "extract_text", "arguments": {}},
    ]
    run = run_create(
        account=login_setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=5
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    assert result_of(run)["code"] == "browser.credential_not_found"
    assert run.status == "succeeded" and run.steps.count() == 4


def test_a_portal_refusal_does_not_fail_the_run(login_setup: Account, portal: Portal) -> None:
    run = run_login(login_setup, portal, "/refuse")
    assert result_of(run)["isError"] is False
    assert run.status == "succeeded", "a refusal is a normal result: the run goes on"
    assert run.steps.filter(index=2, tool="extract_text").exists()


def test_a_page_without_a_login_form_is_its_own_code_with_a_capture(login_setup: Account, portal: Portal) -> None:
    run = run_login(login_setup, portal, "/welcome")
    result = result_of(run)
    assert result["code"] == "browser.login_form_not_found" and result["category"] == "unprocessable"
    assert "passwordSelector" in result["content"]
    assert DiagnosticArtifact.objects.filter(pk=result["artifact_id"]).exists()
    assert portal.posts == []


def test_a_vault_that_is_down_is_vault_unavailable_never_a_slow_portal(
    login_setup: Account, portal: Portal, settings: Any
) -> None:
    settings.VAULT_ADDR = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run = run_login(login_setup, portal, "/login/standard")
    result = result_of(run)
    assert result["code"] == "browser.vault_unavailable" and result["category"] == "unprocessable"
    assert "login_timeout" not in str(result)
    assert portal.posts == []
    assert run.status == "failed" and run.result["code"] == "browser.vault_unavailable"


def test_a_vault_that_refuses_the_read_is_vault_unavailable(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    async def attempt() -> dict[str, Any]:
        await screen.page.goto(portal.origin + "/login/standard")
        return await login.browser_login(
            screen.page,
            BrowserLoginArgs(credentialId="portal"),
            solver=login.NoSolver(),
            account_id=str(login_setup.id),
            computer_id="pc-1",
            grant="hvs.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  # a token the vault does not know
            budget=login.Budget(10),
        )

    result = on_executor(screen, attempt)["tool_result"]
    assert result["code"] == "browser.vault_unavailable" and result["category"] == "unprocessable"
    assert portal.posts == []


def test_no_secret_reaches_logs_events_results_or_steps(
    login_setup: Account, portal: Portal, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    runs = [run_login(login_setup, portal, path) for path in ("/login/standard", "/refuse")]
    dump = caplog.text
    for run in runs:
        dump += str(list(RunEvent.objects.filter(run=run).values()))
        dump += str(list(run.steps.values())) + str(run.result) + str(run.agent_state)
    assert PASSWORD not in dump
    assert USERNAME not in dump
    # Nor the one-use Vault grant each login carried to the executor.
    assert not re.search(r"\b(?:hv[sbr]|[sbr])\.[A-Za-z0-9_-]{20,}", dump)


def test_human_takeover_makes_the_next_action_fail_and_the_run_pause(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    on_executor(screen, screen.control.takeover)
    run = run_login(login_setup, portal, "/login/standard")
    assert run.status == "waiting_for_input"
    assert run.pause_kind == "takeover"
    assert portal.posts == []
    assert screen.control.state == "human", "the agent never takes control back by itself"


def test_script_driven_form_success_and_refusal(login_setup: Account, portal: Portal, vault: VaultServer) -> None:
    ok = run_login(login_setup, portal, "/js")
    assert result_of(ok) == {"content": "Logged in as p***r@example.com.", "isError": False}
    portal_credential_write(
        token=vault.root_token,
        account_id=login_setup.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password="wrong-password", origins=(portal.origin,)),
    )
    refused = run_login(login_setup, portal, "/js")
    assert result_of(refused)["isError"] is False
    assert "refused" in result_of(refused)["content"]


def test_password_selector_must_select_a_password_input(login_setup: Account, portal: Portal, screen: Executor) -> None:
    run = run_login(login_setup, portal, "/login/standard", passwordSelector="input[name=username]")
    result = result_of(run)
    assert result["isError"] is True and "password input" in result["content"]
    values = on_executor(screen, lambda: screen.page.eval_on_selector_all("input", "els => els.map(e => e.value)"))
    assert PASSWORD not in values
    assert portal.posts == []


def test_a_capture_that_does_not_fit_the_budget_is_left_out(login_setup: Account, screen: Executor) -> None:
    async def capture(seconds: float) -> str | None:
        await screen.page.set_content("<form><input type=password value=x></form>")
        return await capture_diagnostic(screen.page, server=screen.server, budget=Budget(seconds))

    assert on_executor(screen, lambda: capture(0.5)) is None
    assert not DiagnosticArtifact.objects.exists()
    # With time left the same capture is stored, so the check above is about the budget.
    assert on_executor(screen, lambda: capture(20)) is not None
    assert DiagnosticArtifact.objects.count() == 1


# --- Frame-exact typing: the credential reaches only its own origins ---------------------


@pytest.fixture
def away(portal: Portal, allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    """A second portal on another origin (another port), the one the attack pages lead to."""
    with serve_portal() as other:
        allow_egress(other.origin)
        portal.away = other.origin
        other.away = portal.origin
        yield other


def _typed_values(screen: Executor) -> list[str]:
    """Every input value in every frame of the computer's page."""

    async def values() -> list[str]:
        found: list[str] = []
        for frame in screen.page.frames:
            found += await frame.eval_on_selector_all("input", "els => els.map(e => e.value)")
        return found

    return list(on_executor(screen, values))


def assert_origin_refused(result: dict[str, Any]) -> None:
    assert result["isError"] is True
    assert result["code"] == "browser.origin_refused"
    assert result["category"] == "unprocessable"


def test_a_frame_piercing_selector_is_refused_and_types_nothing(
    login_setup: Account, portal: Portal, away: Portal, screen: Executor
) -> None:
    enter = "iframe >> internal:control=enter-frame >> "
    run = run_login(
        login_setup,
        portal,
        "/framed",
        usernameSelector=enter + "input[name=username]",
        passwordSelector=enter + "input[type=password]",
        submitSelector=enter + "button",
    )
    assert_origin_refused(result_of(run))
    assert away.posts == [] and portal.posts == []
    assert PASSWORD not in _typed_values(screen) and USERNAME not in _typed_values(screen)


def test_a_post_submit_redirect_to_another_origin_never_receives_the_one_time_code(
    login_setup: Account, portal: Portal, away: Portal, vault: VaultServer
) -> None:
    portal_credential_write(
        token=vault.root_token,
        account_id=login_setup.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,), totp_secret="JBSWY3DPEHPK3PXP"),
    )
    run = run_login(login_setup, portal, "/otp-away")
    assert_origin_refused(result_of(run))
    assert "one-time code" in result_of(run)["content"]
    assert [post["path"] for post in portal.posts] == ["/otp-away"]
    assert away.posts == [], "the other origin received the live one-time code"
    # The same flow on the credential's own origin types the code.
    same = run_login(login_setup, portal, "/otp-same")
    assert result_of(same) == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert [post["path"] for post in portal.posts][-2:] == ["/otp-same", "/otp"]
    assert len(portal.posts[-1]["otp"]) == 6


def test_focus_handed_to_another_origins_frame_stops_the_login(
    login_setup: Account, portal: Portal, away: Portal, screen: Executor
) -> None:
    run = run_login(login_setup, portal, "/focus-steal")
    assert_origin_refused(result_of(run))
    assert "focus moved into a frame" in result_of(run)["content"]
    assert portal.posts == [], "nothing was submitted"
    assert not any(PASSWORD in leak for leak in away.leaks), "the password reached the other origin's frame"
    assert PASSWORD not in _typed_values(screen)


def test_the_top_page_origin_is_read_from_the_browser_not_from_its_url(
    login_setup: Account, portal: Portal, screen: Executor
) -> None:
    """A document on the portal's URL whose security origin is opaque (served with a CSP
    sandbox) is not the portal's origin: the check reads CDP's securityOrigin, not the URL."""
    run = run_login(login_setup, portal, "/sandboxed")
    assert_origin_refused(result_of(run))
    assert portal.posts == []
    assert PASSWORD not in _typed_values(screen)


# --- The budget starts in the worker, and the worker's wait is bounded ---------------------------


@contextlib.contextmanager
def browser_held(screen: Executor, seconds: float) -> Iterator[None]:
    """Another action holds the computer's browser (its input lock) for ``seconds``."""
    assert screen.loop is not None

    async def hold() -> None:
        async with screen.input_lock:
            await asyncio.sleep(seconds)

    future = asyncio.run_coroutine_threadsafe(hold(), screen.loop)
    deadline = time.monotonic() + 5
    while not screen.input_lock.locked():
        assert time.monotonic() < deadline, "the lock was never taken"
        time.sleep(0.01)
    try:
        yield
    finally:
        future.cancel()


def login_call(account: Account) -> tuple[ToolResult, float]:
    """One browser_login tool call as the worker makes it, and how long it took."""
    run = run_create(
        account=account, computer=Computer.objects.get(pk="pc-1"), task={"goal": "log in"}, max_model_calls=5
    )
    run = Run.objects.select_related("computer").get(pk=run.pk)
    started = time.monotonic()
    result = execute_browser_tool(
        run=run, call=ToolCall(tool="browser_login", arguments={"credentialId": "portal"}), has_leased=False
    )
    return result, time.monotonic() - started


def test_the_budget_includes_the_wait_for_the_browser(
    login_setup: Account, portal: Portal, screen: Executor, settings: Any
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 6
    portal.slow_seconds = 15
    on_executor(screen, lambda: screen.page.goto(portal.origin + "/slow"))
    with browser_held(screen, 3):
        result, elapsed = login_call(login_setup)
    assert result.code == "browser.login_timeout" and result.category == "unprocessable"
    assert len(portal.posts) == 1
    # The 3 s spent waiting for the browser came out of the 6 s budget (not 3 s + 6 s).
    assert 3 <= elapsed < 6 + 1.0, elapsed
    # The portal answers late: let its navigation land before the next test uses the browser.
    on_executor(screen, lambda: screen.page.wait_for_url("**/welcome", timeout=20_000), timeout=25)


def test_a_stuck_computer_ends_the_call_within_the_budget_and_its_margin(
    login_setup: Account, portal: Portal, screen: Executor, settings: Any
) -> None:
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 3
    on_executor(screen, lambda: screen.page.goto(portal.origin + "/login/standard"))
    with browser_held(screen, 30):
        result, elapsed = login_call(login_setup)
    # Past the budget the answer is the contract's login_timeout; its text says the computer did not
    # answer (not that the portal was slow); nothing was typed or submitted.
    assert result.code == "browser.login_timeout" and result.category == "unprocessable"
    assert result.isError is True and "snapshot" in result.content
    assert "the computer did not answer in time" in result.content
    assert portal.posts == []
    assert elapsed <= 3 + 1.0 < 3 + BROWSER_LOGIN_MARGIN_SECONDS, elapsed


def test_the_budget_counts_from_the_steps_start_and_the_answer_comes_within_it(
    login_setup: Account, portal: Portal, screen: Executor, settings: Any
) -> None:
    """Seed 001: a harness sees the step start when it is recorded; the answer (the fields emptied and
    the diagnostic taken) is due within the budget from then, not from when the worker got to it."""
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 8
    portal.slow_seconds = 15
    on_executor(screen, lambda: screen.page.goto(portal.origin + "/slow"))
    run = run_create(
        account=login_setup, computer=Computer.objects.get(pk="pc-1"), task={"goal": "log in"}, max_model_calls=5
    )
    run = Run.objects.select_related("computer").get(pk=run.pk)
    # The step was recorded 3 s before the worker reached the computer.
    step_started_at = timezone.now() - timedelta(seconds=3)
    started = time.monotonic()
    result = execute_browser_tool(
        run=run,
        call=ToolCall(tool="browser_login", arguments={"credentialId": "portal"}),
        has_leased=False,
        step_started_at=step_started_at,
    )
    elapsed = 3 + time.monotonic() - started
    assert result.code == "browser.login_timeout"
    assert elapsed <= 8, f"the answer came {elapsed:.2f} s after the step started, past the 8 s budget"
    on_executor(screen, lambda: screen.page.wait_for_url("**/welcome", timeout=20_000), timeout=25)
