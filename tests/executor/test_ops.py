"""The op registry (executor/ops.py) both sides of the executor's private interface read: a wrong
argument or reply shape fails loudly on the executor's side and on the server's."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from websockets.sync.client import connect

from computers.client import ExecutorClient, ExecutorError, _reply, _request
from computers.models import Computer
from computers.tokens import private_interface_token
from executor import actions, handlers, ops, rpc
from executor.control import ControlError

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-very-secret"


def test_every_operation_has_one_handler_and_every_action_one_reply_model() -> None:
    assert set(handlers.OP_HANDLERS) == set(ops.OPS)
    assert set(ops.ACTION_REPLIES) == set(actions.AGENT_ACTIONS)
    for name, handler in handlers.OP_HANDLERS.items():
        assert handler.__name__ == f"op_{name}"


def test_the_registry_imports_nothing_of_django_or_playwright() -> None:
    tree = ast.parse((ROOT / "executor" / "ops.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"__future__", "dataclasses", "typing", "pydantic", "core.contracts", "executor.contracts"}
    # Nor does what it imports (the browser process has no settings).
    for module in ("core/contracts.py", "executor/contracts.py", "core/clock.py"):
        text = (ROOT / module).read_text()
        assert "django" not in text.replace("Django", "") and "playwright" not in text, module


@pytest.mark.parametrize(
    ("op", "args", "where"),
    [
        ("teleport", {}, None),
        (7, {}, None),
        ("observe", {}, "max_chars"),
        ("observe", {"max_chars": "5"}, "max_chars"),
        ("observe", {"max_chars": 5.0}, "max_chars"),
        ("observe", {"max_chars": True}, "max_chars"),
        ("observe", {"max_chars": 0}, "max_chars"),
        ("observe", {"max_chars": 100_001}, "max_chars"),
        ("observe", {"max_chars": 10, "extra": 1}, "extra"),
        ("subscribe", {"max_fps": 31}, "max_fps"),
        ("status", {"verbose": True}, "verbose"),
        ("lease_renew", {"lease_id": 5}, "lease_id"),
        ("grant_release", {}, "grant_id"),
        ("input", {"grant_id": "g", "input": {"type": "teleport"}}, "input"),
        ("agent", {"action": "click", "args": {}}, "lease_id"),
        ("agent", {"lease_id": "l", "action": "click", "args": []}, "args"),
    ],
)
def test_arguments_that_do_not_match_their_model_are_refused(op: Any, args: dict[str, Any], where: str | None) -> None:
    with pytest.raises(ops.OpRefused) as refused:
        ops.op_args(op, args)
    assert refused.value.reason == "bad_request"
    if where is None:
        assert refused.value.message.startswith("Unknown operation")
    else:
        assert where in refused.value.message
    # The server's client refuses them the same way, before anything is sent.
    with pytest.raises(ExecutorError) as not_sent:
        _request(op, args)
    assert not_sent.value.reason == "bad_request" and not_sent.value.message == refused.value.message


def test_a_refusal_names_the_fields_never_their_values() -> None:
    answer = {"type": "dialog", "dialog": "d1", "accept": False, "username": "ana", "password": PASSWORD}
    with pytest.raises(ops.OpRefused) as refused:
        ops.op_args("input", {"grant_id": "g", "input": answer})
    assert "input" in refused.value.message and PASSWORD not in refused.value.message
    op, parsed = ops.op_args("input", {"grant_id": "g", "input": {**answer, "accept": True}})
    assert op.name == "input" and isinstance(parsed, ops.InputArgs) and PASSWORD not in repr(parsed)


def test_arguments_that_match_are_parsed_into_their_model() -> None:
    op, parsed = ops.op_args("observe", {"max_chars": 100})
    assert op.reply is ops.ObserveReply and parsed == ops.ObserveArgs(max_chars=100)
    _, agent = ops.op_args("agent", {"lease_id": "l", "action": "scroll", "args": {"delta_y": 300}})
    assert isinstance(agent, ops.AgentArgs) and agent.args == {"delta_y": 300} and agent.context is None
    assert ops.op_args("hello", None)[1] == ops.NoArgs()


SCROLLED = {"url": "https://example.com/", "scroll_x": 0, "scroll_y": 500}


def test_an_action_reply_is_read_into_its_model() -> None:
    reply = ops.action_reply("scroll", SCROLLED)
    assert isinstance(reply, ops.ScrollReply) and (reply.scroll_x, reply.scroll_y, reply.downloads) == (0, 500, [])
    fractional = ops.action_reply("scroll", {**SCROLLED, "scroll_y": 12.5})
    assert isinstance(fractional, ops.ScrollReply) and fractional.scroll_y == 12.5
    alert = {"id": "d1", "tab": "t1", "kind": "alert", "message": "Hi", "default_text": "", "opened_at": 1.5}
    opened = ops.action_reply("click", {"url": "https://example.com/", "dialog_opened": alert})
    assert isinstance(opened, ops.DialogOpenedReply) and opened.dialog_opened.id == "d1"
    assert isinstance(ops.action_reply("type", {}), ops.DoneReply)
    refused = ops.action_reply("auth_answer", {"tool_result": {"content": "not answered", "isError": True}})
    assert isinstance(refused, ops.AuthAnswerReply) and refused.answered is None


@pytest.mark.parametrize(
    ("action", "result"),
    [
        # A renamed key (what `reply.get("scroll_x", 0)` would have read as 0).
        ("scroll", {"url": "https://example.com/", "scrollX": 0, "scroll_y": 500}),
        ("scroll", {"url": "https://example.com/", "scroll_y": 500}),
        ("scroll", {**SCROLLED, "scroll_y": "500"}),
        ("navigate", {"url": "https://example.com/"}),
        ("extract_text", {"text": "hi", "truncated": "no", "url": "https://example.com/"}),
        ("screenshot", {"artifact_id": 5, "url": "https://example.com/"}),
        ("type", {"url": "https://example.com/"}),
        ("auth_answer", {"answered": {"dialog": "d1"}, "dialogs": [], "tool_result": {}}),
        ("auth_answer", {}),
        ("browser_login", {}),
        ("tab_switch", {"tabs": "t1"}),
    ],
)
def test_an_action_reply_that_does_not_match_fails(action: str, result: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        ops.action_reply(action, result)


def test_a_reply_that_does_not_match_fails_on_both_sides() -> None:
    status, none = ops.OPS["status"], ops.NoArgs()
    wrong = {"generation": "g", "control": "leased", "url": "about:blank"}  # the rest missing
    # The executor never sends it: its reply becomes a bad_reply refusal.
    with pytest.raises(ControlError) as unsent:
        rpc.checked_reply(status, none, wrong)
    assert unsent.value.reason == "bad_reply" and "status" in unsent.value.message
    # The server's client never hands it on.
    with pytest.raises(ExecutorError) as unread:
        _reply(status, none, wrong)
    assert unread.value.reason == "bad_reply"
    with pytest.raises(ExecutorError):
        _reply(ops.OPS["hello"], none, {"computer_id": "pc-1", "generation": "g", "control": "owned", "viewport": {}})
    with pytest.raises(ExecutorError):
        _reply(ops.OPS["subscribe"], ops.SubscribeArgs(max_fps=5), {"ok": True})
    _, scroll = ops.op_args("agent", {"lease_id": "l", "action": "scroll"})
    assert rpc.checked_reply(ops.OPS["agent"], scroll, SCROLLED) == SCROLLED
    with pytest.raises(ExecutorError) as renamed:
        _reply(ops.OPS["agent"], scroll, {"url": "https://example.com/", "scrollX": 0, "scroll_y": 5})
    assert renamed.value.reason == "bad_reply"


def test_a_reason_off_the_list_is_read_as_bad_reply() -> None:
    assert ops.failure_reason("lease_invalid") == "lease_invalid"
    assert ops.failure_reason("lease_lost") == "bad_reply"
    assert ops.failure_reason(None) == "bad_reply"


def _reasons_in(path: Path) -> set[str]:
    """The reason words passed (as literals) to ControlError and ExecutorError in one module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("ControlError", "ExecutorError"):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                found.add(node.args[1].value)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", "").endswith("REASON") for t in targets):
                found.add(node.value.value)
    return found


def test_every_reason_the_code_raises_is_on_the_closed_list() -> None:
    raised = set()
    for folder in ("executor", "computers", "runs", "visual"):
        for path in (ROOT / folder).rglob("*.py"):
            raised |= _reasons_in(path)
    assert {"lease_invalid", "dialog_open", "egress_refused", "secret_in_arguments", "bad_reply"} <= raised
    assert raised <= ops.FAILURE_REASONS, raised - ops.FAILURE_REASONS


def _raw(screen: Any) -> Any:
    computer = Computer.objects.get(pk="pc-1")
    token = private_interface_token(computer_id=computer.pk, generation=computer.generation)
    return connect(f"ws://{screen.address}/", additional_headers={"Authorization": f"Bearer {token}"}, proxy=None)


def test_the_executor_refuses_a_malformed_operation_before_its_handler(screen: Any) -> None:
    """A real executor, spoken to on its wire without the server's client: each malformed request is
    answered ``bad_request`` naming what is wrong, and nothing happens."""
    malformed: list[tuple[Any, str]] = [
        ({"id": 1, "op": "teleport", "args": {}}, "Unknown operation"),
        ({"id": 2, "op": "observe", "args": {"max_chars": "5"}}, "max_chars"),
        ({"id": 3, "op": "subscribe", "args": {"max_fps": 10, "quality": 99}}, "quality"),
        ({"id": 4, "op": "lease_acquire", "args": {"lease_id": "mine"}}, "lease_id"),
        ({"id": 5, "op": "agent", "args": {"action": "navigate", "args": {"url": "https://example.com/"}}}, "lease_id"),
        ({"id": 6, "op": "input", "args": {"grant_id": "g", "input": {"type": "text"}}}, "input"),
        ({"id": 7, "op": "status", "args": []}, "Invalid arguments"),
    ]
    with _raw(screen) as ws:
        for request, names in malformed:
            ws.send(json.dumps(request))
            reply = json.loads(ws.recv(timeout=10))
            assert reply["id"] == request["id"] and reply["ok"] is False, reply
            assert reply["reason"] == "bad_request" and names in reply["error"], reply
        ws.send(json.dumps(["not", "an", "object"]))
        assert json.loads(ws.recv(timeout=10)) == {
            "id": None,
            "ok": False,
            "error": "A request is a JSON object.",
            "reason": "bad_request",
        }
        # Nothing happened: no lease was taken, no subscriber added; a good request is served.
        ws.send(json.dumps({"id": 8, "op": "status", "args": {}}))
        status = json.loads(ws.recv(timeout=10))
        assert status["ok"] is True and status["result"]["control"] == "available", status
        assert status["result"]["subscribers"] == 0
        assert ops.StatusReply.model_validate(status["result"]).generation == str(screen.generation)


def test_the_servers_client_reads_replies_into_their_models(screen: Any) -> None:
    client = ExecutorClient(Computer.objects.get(pk="pc-1"))
    status = client.op_status()
    assert isinstance(status, ops.StatusReply) and status.control == "available"
    assert client.status() == status.model_dump(mode="json")
    observed = client.op_observe(50)
    assert isinstance(observed, ops.ObserveReply) and len(observed.text) <= 50
    lease = client.lease_acquire()
    try:
        reply = client.op_agent(lease, "tabs_list")
        assert isinstance(reply, ops.TabsActionReply) and [t.active for t in reply.tabs] == [True]
        with pytest.raises(ExecutorError) as refused:
            client.op_agent(lease, "scroll", delta_y="down")
        assert refused.value.reason == "bad_request"
    finally:
        client.lease_release(lease)


def test_a_renamed_key_in_a_nested_reply_or_a_pushed_event_fails_on_both_sides() -> None:
    tab = {"id": "t1", "title": "Home", "url": "https://example.com/", "active": True}
    assert ops.TabsReply.model_validate({"tabs": [tab]}).tabs[0].active is True
    renamed = {**{k: v for k, v in tab.items() if k != "active"}, "is_active": True}
    with pytest.raises(pydantic.ValidationError):
        ops.TabsReply.model_validate({"tabs": [renamed]})
    # The executor builds what it pushes through the model; the gateway's link reads it back.
    with pytest.raises(pydantic.ValidationError):
        ops.TabsEvent(event="tabs", tabs=[renamed])  # type: ignore[list-item]
    event = ops.PUSHED_EVENT.validate_json(ops.pushed(ops.TabsEvent(event="tabs", tabs=[tab])))  # type: ignore[list-item]
    assert isinstance(event, ops.TabsEvent) and event.tabs[0].id == "t1"
    with pytest.raises(pydantic.ValidationError):
        ops.PUSHED_EVENT.validate_python({"event": "control", "state": "human", "version": 1})
    stored = {"outcome": "stored", "artifact_id": "a1", "filename": "f.pdf", "content_type": "application/pdf"}
    with pytest.raises(pydantic.ValidationError):  # a stored download without its size and digest
        ops.action_reply("type", {"downloads": [stored]})
    with pytest.raises(pydantic.ValidationError):  # a dialog answer whose answer lost a key
        ops.action_reply("dialog_answer", {"answered": {"dialog": "d1", "kind": "alert"}, "dialogs": []})
    with pytest.raises(pydantic.ValidationError):
        ops.FrameMeta.model_validate({"url": "", "control": "available", "captured_at": 1.0, "width": 1})
