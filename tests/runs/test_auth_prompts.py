"""A site's HTTP sign-in prompt in a run: the agent's navigation returns at the challenge and
says so, the observation lists the prompt, and the agent answers it with ``auth_answer`` from
the Vault (a credential of exactly that origin; the model never sees the secret) or cancels it;
an agent that acts on the waiting page instead pauses the run as a takeover (reason ``other``).
Real Chromium, a real OpenBao, a loopback site that checks the ``Authorization`` header,
external agent through the REST API; the password is in no log line, step or event."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from accounts.models import Account
from accounts.services import account_top_up
from runs.models import Run, RunEvent, RunStep
from tests.conftest import Api
from tests.support.screen import reset_executor
from tests.support.site import STAGING_REALM, Site, serve_site
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, portal_credential_write

pytestmark = pytest.mark.django_db(transaction=True)

USERNAME, PASSWORD = "ana.lima", "Basic-Secret-9031"


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[Site]:
    with serve_site() as served:
        served.basic_users[USERNAME] = PASSWORD
        allow_egress(served.origin)
        yield served


@pytest.fixture
def run_id(api: Api, screen: Any, account: Account, runner_key: str, vault: VaultServer, site: Site) -> str:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    for credential_id, origins in (("staging", (site.origin,)), ("elsewhere", (site.origin.replace("127.0.0.1", "localhost"),))):
        portal_credential_write(
            token=vault.root_token,
            account_id=account.id,
            credential_id=credential_id,
            credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=origins),
        )
    reset_executor(screen)
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


def recorded(run_id: str) -> str:
    """Everything the run keeps: its steps (summaries, results), events, result and agent state."""
    run = Run.objects.get(pk=run_id)
    text = str(list(RunStep.objects.filter(run_id=run_id).values()))
    text += str(list(RunEvent.objects.filter(run_id=run_id).values()))
    return text + str(run.result) + str(run.agent_state)


def test_the_agent_signs_in_from_the_vault_and_never_sees_the_secret(
    run_id: str, runner_key: str, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    navigated = act(runner_key, run_id, "navigate", "navigate-001", url=site.origin + "/staging")
    content = navigated["result"]["content"]
    assert navigated["result"]["isError"] is False
    assert f"{site.origin} asks for a sign-in" in content and STAGING_REALM in content and "auth_answer" in content
    seen = observe(runner_key, run_id)
    [prompt] = seen["dialogs"]
    assert prompt == {"id": prompt["id"], "tab": "t1", "kind": "auth", "origin": site.origin, "realm": STAGING_REALM}

    answered = act(runner_key, run_id, "auth_answer", "answer-0001", accept=True, credentialId="staging")
    result = answered["result"]
    assert result["isError"] is False, result
    assert result["content"].startswith(f"Answered the sign-in prompt {prompt['id']} of {site.origin} as ")
    assert "The site answered and the page loaded" in result["content"]
    assert site.authorizations == ["Basic " + base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()]
    after = observe(runner_key, run_id)
    # The site echoes the username; the observation carries it redacted (executor/taint.py).
    assert after["dialogs"] == [] and "Staging, signed in as [redacted]" in after["text"]
    step = RunStep.objects.get(run_id=run_id, tool="auth_answer")
    assert {k: step.summary[k] for k in ("tool", "accept", "credential")} == {
        "tool": "auth_answer", "accept": True, "credential": "staging",
    }  # fmt: skip
    # The secret is nowhere: not in what the model read, the run's records or a log line.
    assert PASSWORD not in recorded(run_id) and PASSWORD not in caplog.text
    assert USERNAME not in result["content"]
    assert Run.objects.get(pk=run_id).status == Run.Status.RUNNING


def test_a_credential_of_another_origin_is_refused_with_a_code_and_nothing_is_sent(
    run_id: str, runner_key: str, site: Site
) -> None:
    act(runner_key, run_id, "navigate", "navigate-001", url=site.origin + "/staging")
    refused = act(runner_key, run_id, "auth_answer", "answer-0001", accept=True, credentialId="elsewhere")
    result = refused["result"]
    assert result["isError"] is True and result["code"] == "browser.origin_refused"
    assert result["category"] == "unprocessable"
    assert "Nothing was sent to the site" in result["content"] and site.origin in result["content"]
    assert site.authorizations == []
    assert [d["kind"] for d in observe(runner_key, run_id)["dialogs"]] == ["auth"]  # it still waits
    assert refused["run_status"] == "running"


def test_cancelling_shows_the_sites_refusal(run_id: str, runner_key: str, site: Site) -> None:
    act(runner_key, run_id, "navigate", "navigate-001", url=site.origin + "/staging")
    cancelled = act(runner_key, run_id, "auth_answer", "answer-0001", accept=False)
    assert cancelled["result"]["isError"] is False
    assert cancelled["result"]["content"].startswith("Cancelled the sign-in prompt")
    seen = observe(runner_key, run_id)
    assert seen["dialogs"] == [] and "401: sign-in required" in seen["text"]
    assert site.authorizations == []


def test_an_agent_that_acts_on_the_waiting_page_pauses_the_run_as_a_takeover(
    run_id: str, runner_key: str, site: Site
) -> None:
    act(runner_key, run_id, "navigate", "navigate-001", url=site.origin + "/staging")
    blocked = act(runner_key, run_id, "extract_text", "extract-001")
    assert blocked["result"]["isError"] is True and "auth_answer" in blocked["result"]["content"]
    assert blocked["run_status"] == "waiting_for_input"
    assert blocked["required_action"]["kind"] == "takeover" and blocked["required_action"]["reason"] == "other"
    assert Run.objects.get(pk=run_id).pause_kind == "takeover"
    # The prompt still waits for the person on the screen; nothing was sent.
    assert [d["kind"] for d in observe(runner_key, run_id)["dialogs"]] == ["auth"]
    assert site.authorizations == []


def test_bad_auth_answers_are_refused_before_any_step(run_id: str, runner_key: str) -> None:
    for arguments in (
        {"accept": True},
        {"accept": False, "credentialId": "staging"},
        {"accept": True, "credentialId": "staging", "password": PASSWORD},
        {"accept": True, "credentialId": "staging", "username": USERNAME},
        {"accept": 1, "credentialId": "staging"},
    ):
        body = {"tool": "auth_answer", "arguments": arguments, "idempotency_key": "bad-answer-1"}
        answer = Api(Client()).post(f"/api/runs/{run_id}/actions", body, key=runner_key)
        assert answer.status_code == 400, (arguments, answer.content)
        assert PASSWORD not in answer.content.decode()
    assert Run.objects.get(pk=run_id).model_calls == 0
