"""Dialogs in a run: the agent sees a dialog its action opened (in the tool's result and its
observation) and answers it with ``dialog_answer``; an agent that acts on the blocked page
instead pauses the run as a takeover (reason ``other``) for a person to answer it on the
screen. Real Chromium, external agent through the REST API (its steps commit)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run, RunEvent, RunStep
from runs.services import run_create
from tests.conftest import Api
from tests.support.screen import on_executor, reset_executor

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = """<title>Draft</title><body>
<button id=delete onclick="answer.textContent = confirm('Delete the draft?') ? 'deleted' : 'kept'">Delete</button>
<button id=rename onclick="const v = prompt('New name?', 'draft'); answer.textContent = v === null ? 'unnamed' : v">Rename</button>
<p id=answer>untouched</p></body>"""


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


@pytest.fixture
def run_id(api: Api, screen: Any, funded: Account, runner_key: str) -> str:
    reset_executor(screen, PAGE)
    assert Computer.objects.filter(pk="pc-1").exists()
    body = {"task": {"goal": "test"}, "computer_id": "pc-1", "agent": {"type": "external"}, "max_model_calls": 20}
    created = api.post("/api/runs", body, key=runner_key)
    assert created.status_code == 201, created.content
    return str(created.json()["id"])


def act(key: str, run_id: str, tool: str, idempotency_key: str, **arguments: Any) -> Any:
    body = {"tool": tool, "arguments": arguments, "idempotency_key": idempotency_key}
    answer = Api(Client()).post(f"/api/runs/{run_id}/actions", body, key=key)
    assert answer.status_code == 200, answer.content
    return answer.json()


def observe(key: str, run_id: str) -> dict[str, Any]:
    answer = Api(Client()).get(f"/api/runs/{run_id}/observation", key=key)
    assert answer.status_code == 200, answer.content
    return dict(answer.json())


def test_the_agent_sees_the_dialog_it_opened_and_answers_it(run_id: str, runner_key: str) -> None:
    started = time.monotonic()
    clicked = act(runner_key, run_id, "click", "click-00001", selector="#delete")
    assert time.monotonic() - started < 15
    content = clicked["result"]["content"]
    assert clicked["result"]["isError"] is False
    assert "confirm “Delete the draft?”" in content and "dialog_answer" in content
    seen = observe(runner_key, run_id)
    [dialog] = seen["dialogs"]
    assert dialog == {"id": dialog["id"], "tab": "t1", "kind": "confirm", "message": "Delete the draft?", "default_text": ""}
    assert seen["title"] == "Draft" and seen["text"] == ""  # the blocked page is not read
    answered = act(runner_key, run_id, "dialog_answer", "answer-0001", accept=False)
    assert answered["result"] == {"content": f"Dismissed the confirm dialog {dialog['id']}.", "isError": False}
    after = observe(runner_key, run_id)
    assert after["dialogs"] == [] and "kept" in after["text"]

    act(runner_key, run_id, "click", "click-00002", selector="#rename")
    secret_name = "Quarterly-Plan-77"
    answered = act(runner_key, run_id, "dialog_answer", "answer-0002", accept=True, text=secret_name)
    assert answered["result"]["isError"] is False
    assert secret_name in observe(runner_key, run_id)["text"]
    # The prompt's answer is in no step record or event: only its length.
    step = RunStep.objects.get(run_id=run_id, tool="dialog_answer", index=3)
    assert step.summary["characters"] == len(secret_name) and step.summary["accept"] is True
    recorded = str(list(RunStep.objects.filter(run_id=run_id).values("summary", "result")))
    recorded += str(list(RunEvent.objects.filter(run_id=run_id).values("data")))
    assert secret_name not in recorded
    assert Run.objects.get(pk=run_id).status == Run.Status.RUNNING


def test_acting_on_a_page_a_dialog_blocks_pauses_the_run_as_a_takeover(run_id: str, runner_key: str) -> None:
    act(runner_key, run_id, "click", "click-00001", selector="#delete")
    blocked = act(runner_key, run_id, "click", "click-00002", selector="#rename")
    assert blocked["result"]["isError"] is True and "dialog_answer" in blocked["result"]["content"]
    assert blocked["run_status"] == "waiting_for_input"
    assert blocked["required_action"]["kind"] == "takeover" and blocked["required_action"]["reason"] == "other"
    run = Run.objects.get(pk=run_id)
    assert run.pause_kind == "takeover"
    # The dialog still waits for the person, and the blocked click never reached the page.
    seen = observe(runner_key, run_id)
    assert [d["kind"] for d in seen["dialogs"]] == ["confirm"]


def test_bad_dialog_answers_are_refused_before_any_step(run_id: str, runner_key: str) -> None:
    for arguments in ({}, {"accept": "yes"}, {"accept": True, "dialog": "2"}, {"accept": True, "other": 1}):
        body = {"tool": "dialog_answer", "arguments": arguments, "idempotency_key": "bad-answer-1"}
        answer = Api(Client()).post(f"/api/runs/{run_id}/actions", body, key=runner_key)
        assert answer.status_code == 400, (arguments, answer.content)
    assert Run.objects.get(pk=run_id).model_calls == 0
    # Nothing to answer: a tool error, the run goes on.
    none = act(runner_key, run_id, "dialog_answer", "answer-0001", accept=True)
    assert none["result"]["isError"] is True and none["run_status"] == "running"


def scripted(account: Account, steps: list[dict[str, Any]]) -> Run:
    return run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "test", "steps": steps},
        max_model_calls=10,
        microcredits_per_model_call=1000,
    )


def drive(run: Run) -> Run:
    for _ in range(20):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def test_a_scripted_run_answers_the_dialog_its_click_opened(screen: Any, funded: Account) -> None:
    reset_executor(screen, PAGE)
    run = drive(
        scripted(
            funded,
            [
                {"tool": "click", "arguments": {"selector": "#delete"}},
                {"tool": "dialog_answer", "arguments": {"accept": True}},
                {"tool": "extract_text", "arguments": {"selector": "#answer"}},
            ],
        )
    )
    assert run.status == Run.Status.SUCCEEDED, run.result
    results = [s.result["content"] for s in RunStep.objects.filter(run=run, index__lt=3).order_by("index")]
    assert "confirm “Delete the draft?”" in results[0]
    assert results[1].startswith("Accepted the confirm dialog d")
    assert results[2] == "deleted"


def test_a_scripted_run_that_ignores_the_dialog_pauses_for_a_person(screen: Any, funded: Account) -> None:
    reset_executor(screen, PAGE)
    run = drive(
        scripted(
            funded,
            [
                {"tool": "click", "arguments": {"selector": "#delete"}},
                {"tool": "extract_text", "arguments": {"selector": "#answer"}},
            ],
        )
    )
    assert run.status == Run.Status.WAITING_FOR_INPUT and run.pause_kind == "takeover"
    blocked = RunStep.objects.get(run=run, index=1)
    assert blocked.result is not None and "dialog_answer" in blocked.result["content"]
    # The dialog still waits for the person on the screen.
    assert [d["kind"] for d in on_executor(screen, _waiting(screen))] == ["confirm"]


def _waiting(screen: Any) -> Any:
    async def read() -> list[dict[str, Any]]:
        return list(screen.pages.dialogs_describe())

    return read
