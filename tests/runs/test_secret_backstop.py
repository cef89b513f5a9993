"""The backstop over what is not a browser tool: an agent that puts a secret the computer's browser
holds into ``finish``'s output, ``fail``'s error, a ``request_*`` tool's words or its own history
(a model's messages) has the call refused and withheld, nothing stored (real Chromium, OpenBao,
the run loop with a model agent, and an external harness through the REST API)."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import pytest
from django.apps import apps
from django.core import serializers
from django.test import Client

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor import taint
from runs import loop
from runs.models import Run, RunEvent, RunStep
from runs.services import run_create
from tests.conftest import Api
from tests.runs.test_llm_agent import ChatServer, chat, tool_reply  # noqa: F401 - the fixture
from tests.support.hostile_login import site_fixture, store_credentials  # noqa: F401 - the fixture
from tests.support.hostile_pages import HostileSite
from tests.support.screen import on_executor, reset_executor
from tests.support.vault import VaultServer

pytestmark = pytest.mark.django_db(transaction=True)

# Two credentials of one length: every answer must be the same for both.
CREDENTIALS = {
    "first": ("alice-x1@example.com", "Tr0ub4dor&3x"),
    "second": ("bobby-y2@example.com", "Hunter2!Hunt"),
}
WITHHELD = "browser.secret_in_arguments"


def forms(secret: str) -> list[str]:
    return [secret, secret.casefold(), quote(secret, safe=""), json.dumps(secret)[1:-1]]


def stored_rows() -> str:
    """Every row of every table, serialized."""
    return "\n".join(serializers.serialize("json", model.objects.all()) for model in apps.get_models())


def assert_nowhere(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in forms(secret):
            assert form not in text, form


def api_answers(api: Api, key: str, run_id: str) -> list[Any]:
    answers = []
    for path in ("", "/steps", "/events"):
        answer = api.get(f"/api/runs/{run_id}{path}", key=key)
        assert answer.status_code == 200, answer.content
        answers.append(answer.json())
    return answers


def comparable(value: Any) -> Any:
    """An answer without what differs between two runs anyway (ids, times, artifact ids)."""
    varying = {"id", "run_id", "step_id", "created_at", "started_at", "finished_at", "updated_at", "artifact_id", "at"}
    varying |= {"microcredits", "cursor", "next_cursor", "computer_binding", "event_id", "sequence"}
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in varying}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


@pytest.fixture
def stored(screen: Any, vault: VaultServer, account: Account, site: HostileSite, settings: Any) -> Account:
    return store_credentials(vault, account, settings, site.origin, CREDENTIALS)


def test_a_model_that_leaks_a_held_secret_leaves_no_trace(
    stored: Account,
    site: HostileSite,
    chat: ChatServer,  # noqa: F811 - the fixture
    runner_key: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model agent signs in (the table login refuses in place, the executor keeps both strings),
    then puts the username in a URL (its own history) and the password in a request's label,
    ``fail``'s error and ``finish``'s output: each call is refused (``browser.secret_in_arguments``,
    nothing done) and withheld, and the run finishes with its clean answer. No row, event, API
    answer, log record or later model request holds either string, and two credentials of one
    length leave the same answers."""
    caplog.set_level(logging.DEBUG)
    api = Api(Client())
    seen = []
    for credential_id, (username, password) in CREDENTIALS.items():
        chat.replies = [
            tool_reply("navigate", {"url": site.origin + "/login"}),
            tool_reply("browser_login", {"credentialId": credential_id}),
            tool_reply("navigate", {"url": f"{site.origin}/blank/{username}"}),
            tool_reply("request_credential", {"portal_origin": site.origin, "label": f"pw {password}"}),
            tool_reply("fail", {"error": f"The password is {password}."}),
            tool_reply("finish", {"output": {"user": username.upper(), "password": password}}),
            tool_reply("finish", {"output": "done"}),
        ]
        chat.requests.clear()
        run = run_create(
            account=stored,
            computer=Computer.objects.get(pk="pc-1"),
            task={"goal": "sign in and report"},
            agent_config={"type": "openai_compatible"},
            max_model_calls=10,
        )
        for _ in range(10):
            if not loop.run_step_advance(run_id=run.id):
                break
        run.refresh_from_db()
        assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": "done"}, run.result
        steps = list(RunStep.objects.filter(run=run).order_by("index"))
        assert [s.tool for s in steps][2:] == ["navigate", "request_credential", "fail", "finish", "finish"]
        for step in steps[2:6]:
            assert step.summary == {"tool": step.tool, "withheld": True, "isError": True}, step.summary
            assert step.result["code"] == WITHHELD and step.result["category"] == "invalid", step.result
        assert steps[6].summary == {"tool": "finish", "isError": False}
        assert run.agent_state["history"][2]["arguments"] == {"withheld": True}
        answers = api_answers(api, runner_key, str(run.id))
        record = "\n".join([stored_rows(), json.dumps(answers), caplog.text, json.dumps([b for _, b in chat.requests])])
        assert_nowhere(record, username, password)
        events = [e.data for e in RunEvent.objects.filter(run=run).order_by("id") if e.data.get("index", 0) >= 2]
        seen.append(
            (
                [(s.tool, s.summary, comparable(s.result)) for s in steps[2:]],
                comparable(events),
                comparable(answers[0].get("result")),
                # What the model saw of its calls after the sign-in: its own calls withheld.
                [b["messages"][6:] for _, b in chat.requests[3:]],
            )
        )
    assert seen[0] == seen[1]


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


def test_an_external_harness_that_leaks_a_held_secret_leaves_no_trace(
    screen: Any, funded: Account, runner_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An external harness sends a held secret in ``request_credential``'s label, ``fail``'s error
    and ``finish``'s output (a string and a number): each action is refused, withheld, answered the
    same for two secrets of one length, and nothing stored or answered holds the secret; the
    run's clean ``finish`` then ends it."""
    caplog.set_level(logging.DEBUG)
    api = Api(Client())
    reset_executor(screen, "<title>Form</title><body><input id=pw type=password></body>")
    seen = []
    for n, (secret, code) in enumerate((("Kq8-secret-Zx1", "48213957"), ("Lm3-hidden-Wy7", "71935528"))):

        async def remember(value: str = secret, otp: str = code) -> None:
            taint.remember_secrets(screen.page, [value])  # as the executor keeps a typed credential
            taint.remember_secrets(screen.page, [otp], one_time=True)

        on_executor(screen, remember)
        created = api.post(
            "/api/runs",
            {"task": {"goal": "test"}, "computer_id": "pc-1", "agent": {"type": "external"}, "max_model_calls": 10},
            key=runner_key,
        )
        assert created.status_code == 201, created.content
        run_id = created.json()["id"]
        answers = []
        for i, (tool, arguments) in enumerate(
            (
                ("request_credential", {"portal_origin": "https://portal.example", "label": secret.upper()}),
                ("fail", {"error": f"found {quote(secret, safe='')}"}),
                ("finish", {"output": {"note": [secret]}}),
                ("finish", {"output": {"code": int(code)}}),
            )
        ):
            body = {"tool": tool, "arguments": arguments, "idempotency_key": f"leak-{n}-{i:04d}"}
            answer = api.post(f"/api/runs/{run_id}/actions", body, key=runner_key)
            assert answer.status_code == 200, answer.content
            assert answer.json()["result"]["code"] == WITHHELD and answer.json()["run_status"] == "running"
            answers.append(comparable(answer.json()))
        done = api.post(
            f"/api/runs/{run_id}/actions",
            {"tool": "finish", "arguments": {"output": "clean"}, "idempotency_key": f"leak-{n}-done"},
            key=runner_key,
        )
        assert done.json()["run_status"] == "succeeded", done.content
        run = Run.objects.get(pk=run_id)
        assert run.result == {"outcome": "succeeded", "output": "clean"}
        assert [s.summary for s in RunStep.objects.filter(run=run).order_by("index")][:4] == [
            {"tool": t, "withheld": True, "isError": True} for t in ("request_credential", "fail", "finish", "finish")
        ]
        assert not RunEvent.objects.filter(run=run, kind="intervention_requested").exists()
        read = api_answers(api, runner_key, run_id)
        # The idempotency digest is a SHA-256 of the arguments (docs/security.md, known limits).
        record = "\n".join([stored_rows(), json.dumps(read), caplog.text])
        assert_nowhere(record, secret, code)
        seen.append((answers, comparable(read[0].get("result")), comparable(read[1])))
    assert seen[0] == seen[1]
