"""Small ones from the same review: one rule for credential ids (an id that passes the tools
never fails at the vault after a one-time claim), and the text of a scripted ``type`` step
(or a scripted ``dialog_answer``'s prompt answer) exists only until its step runs, is never shown to ``task_observer`` keys, and staff see
only its length."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Account, ApiKey
from accounts.services import account_top_up, api_key_create
from computers.models import Computer
from executor.runtime import Executor
from runs import loop
from runs.models import CredentialRequest, Run
from runs.services import run_continue, run_create
from tests.conftest import Api
from tests.runs.test_views import open_intervention, signed_in
from tests.support.screen import on_executor

TYPED = "note-for-the-portal-7Q"


@pytest.mark.parametrize(
    "step",
    [
        {"tool": "request_credential", "arguments": {"portal_origin": "https://portal.example", "label": "x", "credential_id": "acme.portal"}},
        {"tool": "browser_login", "arguments": {"credentialId": "acme.portal"}},
    ],
)
def test_a_credential_id_with_a_dot_is_refused_where_it_is_given(
    api: Api, runner_key: str, computer: Computer, step: dict[str, Any]
) -> None:
    body = {"task": {"goal": "x", "steps": [step]}, "computer_id": "pc-1"}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400, response.content
    assert not Run.objects.exists() and not CredentialRequest.objects.exists()


def test_a_request_whose_id_cannot_be_stored_is_refused_before_its_claim(
    account: Account, computer: Computer, make_paused_run: Callable[..., Run], make_user: Callable[..., User], vault: Any
) -> None:
    run = make_paused_run(account, computer, "credential")
    request = CredentialRequest.objects.get(run=run)
    CredentialRequest.objects.filter(pk=request.pk).update(credential_id="acme.portal")  # stored by an older version
    client = signed_in(make_user(account))
    response = open_intervention(client, run)
    assert response.status_code == 409
    assert "cancel the task" in response.content.decode()
    request.refresh_from_db()
    assert request.opened_at is None, "the one-time claim was not consumed"


PRIVATE_STEPS = {
    # The text a ``type`` step types, and a scripted ``dialog_answer``'s prompt answer: private fields
    # of their tools (``Tool.private``), at index 1 or 2 of the task's steps.
    "type": [{"tool": "type", "arguments": {"selector": "#q", "text": TYPED}}],
    "dialog_answer": [
        {"tool": "click", "arguments": {"selector": "#rename"}},
        {"tool": "dialog_answer", "arguments": {"accept": True, "text": TYPED}},
    ],
}


def private_index(run: Run) -> int:
    return len(run.task["steps"]) - 1


def where_it_went(screen: Executor, run: Run) -> str:
    if run.task["steps"][-1]["tool"] == "type":
        return str(on_executor(screen, lambda: screen.page.input_value("#q")))
    return str(on_executor(screen, lambda: screen.page.text_content("#answer")))


@pytest.fixture(params=sorted(PRIVATE_STEPS))
def typed_run(request: pytest.FixtureRequest, screen: Executor, account: Account) -> Run:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    page = "<input id=q><button id=rename onclick=\"answer.textContent = prompt('Name?')\">Rename</button><p id=answer></p>"
    on_executor(screen, lambda: screen.page.set_content(page))
    steps = [{"tool": "request_takeover", "arguments": {"reason": "other"}}, *PRIVATE_STEPS[request.param]]
    return run_create(account=account, computer=Computer.objects.get(pk="pc-1"), task={"goal": "x", "steps": steps}, max_model_calls=5)


def advance(run: Run) -> Run:
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def test_typed_text_exists_until_its_step_runs_and_observers_never_see_it(
    typed_run: Run, api: Api, runner_key: str, observer_key: str, screen: Executor
) -> None:
    def task_seen(key: str) -> Any:
        return api.get(f"/api/runs/{typed_run.id}", key).json()["task"]["steps"][index]["arguments"]["text"]

    index = private_index(typed_run)

    assert task_seen(runner_key) == TYPED
    assert task_seen(observer_key) == ""
    listed = api.get("/api/runs", observer_key).json()["runs"][0]
    assert TYPED not in str(listed)
    # The step runs (after the pause, once the run is continued).
    paused = advance(typed_run)
    assert paused.status == "waiting_for_input"
    run_continue(key=api_key_create(account=typed_run.account, kind=ApiKey.Kind.RUNNER)[0], run_id=paused.id, idempotency_key="typed-continue")
    continuation = advance(Run.objects.get(continued_from=paused))
    assert continuation.steps.filter(tool=typed_run.task["steps"][index]["tool"]).exists()
    assert where_it_went(screen, continuation) == TYPED, "the text existed until its step ran"
    assert TYPED not in str(Run.objects.get(pk=continuation.pk).task)
    assert TYPED not in str(list(continuation.steps.values())) + str(list(continuation.events.values()))
    assert api.get(f"/api/runs/{continuation.id}", runner_key).json()["task"]["steps"][index]["arguments"]["text"] == ""


def test_staff_see_only_the_length_of_typed_text(typed_run: Run, client: Client) -> None:
    User.objects.create_superuser(username="staff", password="correct horse battery")
    assert client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"}).status_code in (302, 303)
    page = client.get(f"/admin/runs/run/{typed_run.id}/change/").content.decode()
    assert TYPED not in page
    assert f"&lt;{len(TYPED)} characters&gt;" in page or f"<{len(TYPED)} characters>" in page
