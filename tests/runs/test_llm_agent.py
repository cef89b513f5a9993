"""The optional OpenAI-compatible agent against a local server speaking the
chat completions tool-calling protocol."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run
from runs.services import run_create
from tests.conftest import Api
from tests.support.tiers import live

pytestmark = pytest.mark.django_db


class ChatServer:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.replies: list[dict[str, Any]] = []
        self.origin = ""


def tool_reply(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


@pytest.fixture
@live
def chat(settings: Any) -> Iterator[ChatServer]:
    server_state = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server_state.requests.append((dict(self.headers), body))
            if self.path != "/v1/chat/completions":
                self.send_response(404)
                self.end_headers()
                return
            reply = json.dumps(server_state.replies.pop(0)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server_state.origin = f"http://127.0.0.1:{server.server_address[1]}"
    settings.RAM_LLM_BASE_URL = server_state.origin + "/v1"
    settings.RAM_LLM_API_KEY = "llm-test-key"
    settings.RAM_LLM_MODEL = "test-model"
    try:
        yield server_state
    finally:
        server.shutdown()
        server.server_close()


def drive(run: Run) -> Run:
    for _ in range(10):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def test_model_decides_one_tool_call_per_step(chat: ChatServer, account: Account, computer: Computer) -> None:
    account_top_up(account=account, microcredits=10_000, actor="test")
    chat.replies = [tool_reply("navigate", {"url": "http://127.0.0.1:9/"}), tool_reply("finish", {"output": "done"})]
    run = drive(
        run_create(
            account=account,
            computer=computer,
            task={"goal": "Open the page"},
            agent_config={"type": "openai_compatible", "browser": {"provider": "self_hosted", "solveCaptcha": False}},
            max_model_calls=5,
        )
    )
    assert run.status == "succeeded" and run.result == {"outcome": "succeeded", "output": "done"}
    assert run.model_calls == 2
    headers, first = chat.requests[0]
    assert headers["Authorization"] == "Bearer llm-test-key"
    assert first["model"] == "test-model" and first["tool_choice"] == "required"
    tools = {tool["function"]["name"]: tool["function"]["parameters"] for tool in first["tools"]}
    assert "credentialId" in tools["browser_login"]["properties"]
    assert "Open the page" in json.dumps(first["messages"])
    second = json.dumps(chat.requests[1][1]["messages"])
    assert "Called navigate" in second and "not available" in second


def test_the_model_sees_the_structured_tool_result(chat: ChatServer, account: Account, computer: Computer) -> None:
    """isError, code and category reach the model, not only the text (a login that did not complete)."""
    account_top_up(account=account, microcredits=10_000, actor="test")
    chat.replies = [tool_reply("browser_login", {"credentialId": "portal"}), tool_reply("fail", {"error": "no login"})]
    run = drive(
        run_create(
            account=account,
            computer=computer,
            task={"goal": "Sign in"},
            agent_config={"type": "openai_compatible"},
            max_model_calls=5,
        )
    )
    # The model decides what an error means: the run goes on to its next decision (here: fail).
    assert run.status == "failed" and run.result == {"outcome": "failed", "error": "no login"}
    messages = chat.requests[1][1]["messages"]
    results = [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("Result: ")]
    seen = json.loads(results[-1].removeprefix("Result: "))
    assert seen["isError"] is True
    assert seen["code"] == "browser.executor_unavailable" and seen["category"] == "unprocessable"
    assert seen["content"].startswith("The login did not complete")
    assert "isError" in chat.requests[0][1]["messages"][0]["content"], "the system prompt explains the fields"


def test_invalid_model_reply_fails_the_run(chat: ChatServer, account: Account, computer: Computer) -> None:
    account_top_up(account=account, microcredits=10_000, actor="test")
    chat.replies = [tool_reply("teleport", {})]
    run = drive(
        run_create(
            account=account,
            computer=computer,
            task={"goal": "x"},
            agent_config={"type": "openai_compatible"},
            max_model_calls=5,
        )
    )
    assert run.status == "failed"
    assert "valid tool call" in str(run.result)


def test_unconfigured_model_agent_is_refused(api: Api, computer: Computer, runner_key: str, settings: Any) -> None:
    settings.RAM_LLM_BASE_URL = ""
    body = {"task": {"goal": "x"}, "computer_id": computer.id, "agent": {"type": "openai_compatible"}}
    response = api.post("/api/runs", body, runner_key)
    # A type the schema lists but this server is not configured for: 422, documented.
    assert response.status_code == 422
    assert "RAM_LLM_BASE_URL" in response.json()["error"]
    assert not Run.objects.exists()
