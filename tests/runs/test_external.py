"""External agents: one action at a time through POST /api/runs/{id}/actions, with the loop's guarantees.

Browser tools run in a thread of their own, so these tests commit (transactional_db).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from accounts.models import Account
from accounts.services import account_top_up, api_key_create
from computers.models import Computer, DiagnosticArtifact
from executor import taint
from runs import external, tasks
from runs.models import Run, RunEvent, RunStep
from runs.tool_calls import ActionIn
from tests.conftest import Api
from tests.support.screen import on_executor, reset_executor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


@pytest.fixture
def make_external(
    api: Api, funded: Account, make_computer: Callable[..., Computer], runner_key: str
) -> Callable[..., str]:
    def make(max_model_calls: int = 10) -> str:
        if not Computer.objects.filter(pk="pc-1").exists():  # the screen fixture registers a live one
            make_computer(funded, "pc-1")
        body = {
            "task": {"goal": "test"},
            "computer_id": "pc-1",
            "agent": {"type": "external"},
            "max_model_calls": max_model_calls,
        }
        created = api.post("/api/runs", body, key=runner_key)
        assert created.status_code == 201, created.content
        return str(created.json()["id"])

    return make


def act(api: Api, key: str, run_id: str, tool: str, idempotency_key: str, **arguments: Any) -> Any:
    body = {"tool": tool, "arguments": arguments, "idempotency_key": idempotency_key}
    return api.post(f"/api/runs/{run_id}/actions", body, key=key)


def test_finish_through_an_action_succeeds_and_debits_one_model_call(
    api: Api, make_external: Callable[..., str], runner_key: str, funded: Account
) -> None:
    run_id = make_external()
    answer = act(api, runner_key, run_id, "finish", "finish-0001", output={"answer": 42})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["state"] == "succeeded" and body["run_status"] == "succeeded" and body["tool"] == "finish"
    run = Run.objects.get(pk=run_id)
    assert run.result == {"outcome": "succeeded", "output": {"answer": 42}}
    assert run.model_calls == 1
    funded.refresh_from_db()
    assert funded.microcredit_balance == 1_000_000 - run.microcredits_per_model_call
    kinds = list(RunEvent.objects.filter(run_id=run_id).values_list("kind", flat=True))
    assert kinds.index("step_started") < kinds.index("step_completed") < kinds.index("run_succeeded")


def test_bad_actions_are_refused_and_change_nothing(
    api: Api, make_external: Callable[..., str], runner_key: str
) -> None:
    run_id = make_external()
    for body in (
        {"tool": "teleport", "arguments": {}, "idempotency_key": "bad-00001"},
        {"tool": "navigate", "arguments": {"url": "file:///etc/passwd"}, "idempotency_key": "bad-00002"},
        {"tool": "navigate", "arguments": {"url": "https://example.com"}},
        {"tool": "navigate", "arguments": {"url": "https://example.com"}, "idempotency_key": "short"},
        {"tool": "finish", "arguments": {}, "idempotency_key": "bad-00003", "extra": 1},
    ):
        answer = api.post(f"/api/runs/{run_id}/actions", body, key=runner_key)
        assert answer.status_code == 400, (body, answer.content)
        assert "/etc/passwd" not in answer.content.decode()
    run = Run.objects.get(pk=run_id)
    assert run.model_calls == 0 and RunStep.objects.filter(run=run).count() == 0


def test_only_external_runs_and_runner_keys_take_actions(
    api: Api, funded: Account, computer: Computer, runner_key: str, observer_key: str, make_external: Callable[..., str]
) -> None:
    scripted = api.post("/api/runs", {"task": {"goal": "g", "steps": [{"tool": "finish", "arguments": {"output": "x"}}]}, "computer_id": computer.id}, key=runner_key).json()["id"]
    refused = act(api, runner_key, scripted, "finish", "finish-0001")
    assert refused.status_code == 409 and refused.json()["code"] == "run.not_external"
    run_id = make_external()
    assert act(api, observer_key, run_id, "finish", "finish-0001").status_code == 403
    assert api.get(f"/api/runs/{run_id}/observation", key=observer_key).status_code == 403
    other = Account.objects.create(name="Other")

    _, other_key = api_key_create(account=other, kind="runner")
    assert act(api, other_key, run_id, "finish", "finish-0001").status_code == 404
    assert Run.objects.get(pk=run_id).model_calls == 0


def test_the_same_key_answers_the_first_step_and_never_runs_twice(
    api: Api, make_external: Callable[..., str], runner_key: str
) -> None:
    run_id = make_external()
    first = act(api, runner_key, run_id, "navigate", "nav-00001", url="http://127.0.0.1:9/")
    again = act(api, runner_key, run_id, "navigate", "nav-00001", url="http://127.0.0.1:9/")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert Run.objects.get(pk=run_id).model_calls == 1
    # The same key for another action is refused, not run.
    other = act(api, runner_key, run_id, "navigate", "nav-00001", url="http://127.0.0.1:8/")
    assert other.status_code == 400 and other.json()["code"] == "run.invalid_action"
    assert RunStep.objects.filter(run_id=run_id).count() == 1


def test_two_identical_actions_at_once_have_one_effect(
    make_external: Callable[..., str], runner_key: str
) -> None:
    run_id = make_external()
    answers: list[Any] = []

    def send() -> None:
        answers.append(act(Api(Client()), runner_key, run_id, "request_takeover", "takeover-001", reason="captcha"))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # The second answers the first's result, or that the first is still in progress (202): never a second run.
    assert sorted(a.status_code for a in answers) in ([200, 200], [200, 202])
    assert answers[0].json()["step_id"] == answers[1].json()["step_id"]
    run = Run.objects.get(pk=run_id)
    assert run.model_calls == 1 and run.pause_kind == "takeover"
    assert RunEvent.objects.filter(run=run, kind="run_paused").count() == 1


def test_budget_and_credits_pause_exactly_as_for_the_built_in_loop(
    api: Api, make_external: Callable[..., str], runner_key: str, funded: Account
) -> None:
    run_id = make_external(max_model_calls=1)
    assert act(api, runner_key, run_id, "navigate", "nav-00001", url="http://127.0.0.1:9/").status_code == 200
    refused = act(api, runner_key, run_id, "navigate", "nav-00002", url="http://127.0.0.1:9/")
    assert refused.status_code == 409
    assert refused.json()["required_action"]["kind"] == "continue"
    assert refused.json()["required_action"]["reason"] == "max_model_calls_reached"
    assert refused.json()["required_action"]["budget"] == {"model_calls": 1, "max_model_calls": 1, "remaining_model_calls": 0}
    continued = api.post(f"/api/runs/{run_id}/continue", {"idempotency_key": "more-budget"}, key=runner_key)
    assert continued.status_code == 201
    second = continued.json()["run"]["id"]
    # Credits: the next model call costs more than the balance.
    Run.objects.filter(pk=second).update(microcredits_per_model_call=5_000_000)
    short = act(api, runner_key, second, "navigate", "nav-00003", url="http://127.0.0.1:9/")
    assert short.status_code == 409
    credits = short.json()["required_action"]
    assert credits["kind"] == "credits" and credits["credits"]["missing_microcredits"] == str(5_000_000 - 999_000)
    assert RunStep.objects.filter(run_id=second).count() == 0


def test_actions_on_a_cancelled_or_continued_run_are_409(
    api: Api, make_external: Callable[..., str], runner_key: str
) -> None:
    run_id = make_external()
    assert act(api, runner_key, run_id, "request_takeover", "takeover-001", reason="captcha").status_code == 200
    waiting = act(api, runner_key, run_id, "finish", "finish-0001")
    assert waiting.status_code == 409 and waiting.json()["required_action"]["kind"] == "takeover"
    continued = api.post(f"/api/runs/{run_id}/continue", {"idempotency_key": "after-takeover"}, key=runner_key)
    new_id = continued.json()["run"]["id"]
    stale = act(api, runner_key, run_id, "finish", "finish-0002")
    assert stale.status_code == 409 and stale.json()["continued_run_id"] == new_id
    assert api.post(f"/api/runs/{new_id}/cancel", {}, key=runner_key).status_code == 200
    cancelled = act(api, runner_key, new_id, "finish", "finish-0003")
    assert cancelled.status_code == 409 and cancelled.json()["code"] == "run.not_taking_actions"
    assert RunStep.objects.filter(run_id=new_id).count() == 0


def test_a_lost_answer_never_authorises_a_second_effect(
    api: Api, make_external: Callable[..., str], runner_key: str, settings: Any
) -> None:
    run_id = make_external()
    run = Run.objects.get(pk=run_id)
    external.run_ready(run.id)
    body = ActionIn(tool="navigate", arguments={"url": "http://127.0.0.1:9/"}, idempotency_key="nav-lost-01")
    call = external._tool_call(body)
    # Phase 1 only: the process died after recording the step, before the computer answered.
    step, claimed = external._record(run.id, call, body.idempotency_key, external._digest(call))
    assert claimed is not None
    settings.RAM_STEP_MAX_SECONDS = 3600
    retry = act(api, runner_key, run_id, "navigate", "nav-lost-01", url="http://127.0.0.1:9/")
    assert retry.status_code == 202 and retry.json()["step_id"] == step.pk and retry.json()["state"] == "started"
    busy = act(api, runner_key, run_id, "finish", "finish-0001")
    assert busy.status_code == 409 and busy.json()["step_id"] == step.pk
    polled = api.get(f"/api/runs/{run_id}/actions/{step.pk}", key=runner_key, wait="1")
    assert polled.status_code == 202
    settings.RAM_STEP_MAX_SECONDS = 0
    after = act(api, runner_key, run_id, "finish", "finish-0002")
    assert after.status_code == 409 and after.json()["required_action"]["kind"] == "takeover"
    again = act(api, runner_key, run_id, "navigate", "nav-lost-01", url="http://127.0.0.1:9/")
    assert again.status_code == 200 and again.json()["state"] == "uncertain" and again.json()["result"] is None
    assert RunStep.objects.filter(run_id=run_id).count() == 1
    assert Run.objects.get(pk=run_id).model_calls == 1


def test_an_idle_external_run_pauses_with_continue_idle_timeout(
    api: Api, make_external: Callable[..., str], runner_key: str, settings: Any
) -> None:
    run_id = make_external()
    settings.RAM_EXTERNAL_IDLE_SECONDS = 3600
    assert tasks.sweep()["idle_external_runs"] == 0
    settings.RAM_EXTERNAL_IDLE_SECONDS = 0
    assert tasks.sweep()["idle_external_runs"] == 1
    run = api.get(f"/api/runs/{run_id}", key=runner_key).json()
    assert run["status"] == "waiting_for_input"
    assert run["required_action"]["kind"] == "continue" and run["required_action"]["reason"] == "idle_timeout"
    assert run["required_action"]["budget"]["remaining_model_calls"] == 10
    refused = act(api, runner_key, run_id, "finish", "finish-0001")
    assert refused.status_code == 409
    continued = api.post(f"/api/runs/{run_id}/continue", {"idempotency_key": "wake-up-01"}, key=runner_key)
    assert continued.status_code == 201
    new_id = continued.json()["run"]["id"]
    settings.RAM_EXTERNAL_IDLE_SECONDS = 3600
    assert act(api, runner_key, new_id, "finish", "finish-0002").json()["run_status"] == "succeeded"


# --- With a real computer -------------------------------------------------------------


def test_an_action_while_a_person_holds_control_fails_cleanly_with_no_effect(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str]
) -> None:
    api = Api(Client())
    run_id = make_external()
    reset_executor(screen, "<title>Before</title><body><p>untouched</p></body>")
    on_executor(screen, screen.control.takeover)
    answer = act(api, runner_key, run_id, "navigate", "nav-00001", url=f"{live_origin}/accounts/login/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["result"]["isError"] is True and body["result"]["code"] == "computer.human_control"
    assert body["run_status"] == "waiting_for_input" and body["required_action"]["kind"] == "takeover"
    seen = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert seen["title"] == "Before" and seen["control"] == "human"


def test_observation_reads_the_page_without_secrets_or_a_screenshot(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str]
) -> None:
    api = Api(Client())
    secret = "Typed-Secret-9z"
    run_id = make_external()
    reset_executor(screen, "<title>Form</title><body><h1>Sign in</h1><input id=pw type=password></body>")
    typed = act(api, runner_key, run_id, "type", "type-pw-001", selector="#pw", text=secret)
    assert typed.status_code == 200 and typed.json()["result"]["isError"] is False
    stored = DiagnosticArtifact.objects.count()
    answer = api.get(f"/api/runs/{run_id}/observation", key=runner_key)
    assert answer.status_code == 200
    seen = answer.json()
    # The id of the masked capture the type step took; the GET itself took none.
    assert seen["title"] == "Form" and "Sign in" in seen["text"]
    assert seen["screenshot_artifact_id"] == typed.json()["result"]["artifact_id"] is not None
    assert DiagnosticArtifact.objects.count() == stored
    assert seen["run_status"] == "running" and seen["truncated"] is False
    for text in (answer.content.decode(), str(list(RunEvent.objects.filter(run_id=run_id).values("data")))):
        assert secret not in text
    assert secret not in str(list(RunStep.objects.filter(run_id=run_id).values("summary", "result")))
    # A GET changed nothing: no step, no model call.
    assert Run.objects.get(pk=run_id).model_calls == 1


def test_an_external_agent_sees_a_popup_in_its_observation_and_switches_back_with_tab_tools(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str]
) -> None:
    api = Api(Client())
    run_id = make_external()
    reset_executor(screen, "<title>Opener</title><body><h1>Opener</h1></body>")
    # The page opens a popup (an OAuth-style window): it becomes the active page.
    on_executor(screen, lambda: screen.page.evaluate("() => window.open('about:blank?token=secret-1', 'auth-' + Date.now())"))
    for _ in range(100):
        answer = api.get(f"/api/runs/{run_id}/observation", key=runner_key)
        seen = answer.json()
        if len(seen["tabs"]) == 2:
            break
        time.sleep(0.05)
    opener, popup = seen["tabs"]
    assert (opener["title"], opener["active"], popup["active"]) == ("Opener", False, True)
    assert set(opener) == {"id", "title", "url", "active"}
    # The active page's address loses its query like the tabs' do: the secret is nowhere in the answer.
    assert seen["url"] == popup["url"] == "about:blank"
    assert "secret-1" not in answer.content.decode()
    listed = act(api, runner_key, run_id, "tabs_list", "tabs-00001")
    assert listed.status_code == 200, listed.content
    content = listed.json()["result"]["content"]
    assert content.startswith("Open tabs: ") and f"{popup['id']} (active)" in content and "secret-1" not in content
    switched = act(api, runner_key, run_id, "tab_switch", "tabs-00002", tab=opener["id"])
    assert switched.json()["result"]["isError"] is False
    closed = act(api, runner_key, run_id, "tab_close", "tabs-00003", tab=popup["id"])
    assert closed.json()["result"]["content"] == f"Open tabs: {opener['id']} (active): Opener <about:blank>."
    after = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert after["title"] == "Opener" and [t["id"] for t in after["tabs"]] == [opener["id"]]
    missing = act(api, runner_key, run_id, "tab_switch", "tabs-00004", tab=popup["id"])
    assert missing.json()["result"]["isError"] is True


def test_observation_text_is_bounded_and_says_it_was_truncated(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str], settings: Any
) -> None:
    api = Api(Client())
    run_id = make_external()
    settings.RAM_OBSERVATION_MAX_CHARS = 50
    reset_executor(screen, "<title>Long</title><body><p>" + "word " * 400 + "</p><p id=end>THE-END</p></body>")
    seen = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert seen["truncated"] is True
    assert len(seen["text"]) == 50 and seen["text"].startswith("word word") and "THE-END" not in seen["text"]
    # A page within the bound is whole, and says so.
    settings.RAM_OBSERVATION_MAX_CHARS = 5000
    whole = api.get(f"/api/runs/{run_id}/observation", key=runner_key).json()
    assert whole["truncated"] is False and whole["text"].rstrip().endswith("THE-END")
    assert len(whole["text"]) <= 5000


def test_an_action_longer_than_the_wait_answers_202_and_the_long_poll_gives_its_one_result(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str], settings: Any
) -> None:
    api = Api(Client())
    run_id = make_external()
    settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS = 1
    # The element the action waits for appears about 3 s later.
    reset_executor(
        screen,
        "<title>Slow</title><body><script>setTimeout(() => { const p = document.createElement('p');"
        " p.id = 'late'; p.textContent = 'Arrived'; document.body.append(p); }, 3000)</script></body>",
    )
    started = time.monotonic()
    answer = act(api, runner_key, run_id, "wait_for", "wait-late-01", selector="#late", timeout_ms=15_000)
    assert time.monotonic() - started < 2.5  # answered after the 1 s wait, not after the action
    assert answer.status_code == 202, answer.content
    step_id = answer.json()["step_id"]
    assert answer.json()["state"] == "started" and answer.json()["result"] is None
    done = api.get(f"/api/runs/{run_id}/actions/{step_id}", key=runner_key, wait="5")
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["step_id"] == step_id and body["state"] == "succeeded" and body["result"]["isError"] is False
    assert RunStep.objects.filter(run_id=run_id).count() == 1
    assert Run.objects.get(pk=run_id).model_calls == 1
    # A retry with the same key answers the settled step: nothing runs again.
    again = act(api, runner_key, run_id, "wait_for", "wait-late-01", selector="#late", timeout_ms=15_000)
    assert again.status_code == 200 and again.json() == body
    assert RunStep.objects.filter(run_id=run_id).count() == 1 and Run.objects.get(pk=run_id).model_calls == 1


def test_a_right_guess_in_an_external_action_is_never_recorded(
    screen: Any, live_origin: str, funded: Account, runner_key: str, make_external: Callable[..., str]
) -> None:
    """The harness's step is recorded before the executor refuses a right guess: its summary and
    ``step_started`` event are withheld whole, identically for two secrets of one length."""
    api = Api(Client())
    reset_executor(screen, "<title>Form</title><body><input id=pw type=password></body>")
    seen = []
    for n, secret in enumerate(("Kq8-secret-Zx1", "Lm3-hidden-Wy7")):

        async def remember(value: str = secret) -> None:
            taint.remember_secrets(screen.page, [value])  # as the executor keeps a typed credential

        on_executor(screen, remember)
        run_id = make_external()
        answer = act(api, runner_key, run_id, "navigate", f"guess-{n:04d}", url=f"{live_origin}/blank/{secret}")
        assert answer.status_code == 200, answer.content
        assert answer.json()["result"]["code"] == "browser.secret_in_arguments"
        step = RunStep.objects.get(run_id=run_id, index=0)
        started = RunEvent.objects.get(run_id=run_id, kind="step_started").data
        record = str([step.summary, started, api.get(f"/api/runs/{run_id}/steps", key=runner_key).content])
        assert secret not in record and "/blank" not in record
        seen.append((step.summary, {k: v for k, v in started.items() if k != "microcredits"}))
        assert act(api, runner_key, run_id, "finish", f"finish-{n:04d}", output={}).status_code == 200
    assert seen[0] == seen[1]
    assert seen[0][0] == {"tool": "navigate", "withheld": True, "isError": True}


def test_an_action_on_a_draining_computer_is_refused_and_charges_nothing(
    api: Api, make_external: Callable[..., str], runner_key: str, funded: Account
) -> None:
    """The built-in loop and external runs record a step through one service: both re-check, under the
    run's lock, that the computer is not draining for its executor's restart."""
    run_id = make_external()
    external.run_ready(Run.objects.get(pk=run_id).pk)
    assert Run.objects.get(pk=run_id).status == "running"
    balance = Account.objects.get(pk=funded.pk).microcredit_balance
    Computer.objects.filter(pk="pc-1").update(draining=True)
    refused = act(api, runner_key, run_id, "finish", "finish-drain-1", output="x")
    assert refused.status_code == 503, refused.content
    assert refused.json()["code"] == "run.computer_draining"
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.model_calls, run.step_count) == ("running", 0, 0)
    assert not RunStep.objects.filter(run=run).exists()
    assert Account.objects.get(pk=funded.pk).microcredit_balance == balance
    Computer.objects.filter(pk="pc-1").update(draining=False)
    done = act(api, runner_key, run_id, "finish", "finish-drain-1", output="x")
    assert done.status_code == 200 and done.json()["run_status"] == "succeeded"
