"""What a published schema allows is what the server accepts: a client (or a fuzzer) that builds
its request from ``/api/openapi.json`` is never refused for a rule the schema does not state."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from executor.contracts import AuthAnswerArgs, ClickArgs, PressArgs, WaitForArgs
from runs.tool_calls import ActionIn, ToolCall
from webhooks.contracts import SecretRotateIn

pytestmark = pytest.mark.unit

CASES: list[tuple[type[BaseModel], dict[str, Any], bool]] = [
    (ClickArgs, {"selector": "#go"}, True),
    (ClickArgs, {"x": 10, "y": 20.5}, True),
    (ClickArgs, {"selector": "#go", "x": 10, "y": 20}, False),
    (ClickArgs, {"x": 10}, False),
    (ClickArgs, {}, False),
    (ClickArgs, {"selector": None, "x": 1, "y": 2}, True),
    (AuthAnswerArgs, {"accept": True, "credentialId": "staging"}, True),
    (AuthAnswerArgs, {"accept": False}, True),
    (AuthAnswerArgs, {"accept": False, "credentialId": None, "dialog": None}, True),
    (AuthAnswerArgs, {"accept": False, "credentialId": "staging"}, False),
    (AuthAnswerArgs, {"accept": True}, False),
    (WaitForArgs, {"selector": "#go", "timeout_ms": 3000}, True),
    (WaitForArgs, {"selector": "#go", "timeout_ms": 3000.0}, True),
    (WaitForArgs, {"selector": "#go", "timeout_ms": 3000.5}, False),
    (WaitForArgs, {"selector": "#go", "timeout_ms": "3000"}, False),
    (WaitForArgs, {"selector": "#go", "timeout_ms": True}, False),
    (PressArgs, {"key": "a"}, True),
    (PressArgs, {"key": "é"}, True),
    (PressArgs, {"key": "Enter"}, True),
    (PressArgs, {"key": "F5"}, True),
    (PressArgs, {"key": "ab"}, False),
    (PressArgs, {"key": "\U0001f600"}, False),  # two UTF-16 units
    (PressArgs, {"key": "enter"}, False),
    (PressArgs, {"key": ""}, False),
    (SecretRotateIn, {"overlap_seconds": 6381.0}, True),
    (SecretRotateIn, {"overlap_seconds": 6381}, True),
    (SecretRotateIn, {"overlap_seconds": -1}, False),
]


def _accepted(model: type[BaseModel], body: dict[str, Any]) -> bool:
    try:
        model.model_validate(body)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("model", "body", "valid"), CASES, ids=[f"{m.__name__}-{b}" for m, b, _ in CASES])
def test_the_schema_and_the_model_agree(model: type[BaseModel], body: dict[str, Any], valid: bool) -> None:
    schema_says = Draft202012Validator(model.model_json_schema()).is_valid(body)
    assert (schema_says, _accepted(model, body)) == (valid, valid)


def test_a_tool_call_leaves_out_its_arguments_only_when_the_tool_takes_none() -> None:
    """``{"tool": "click"}`` is refused (a selector or a point is needed): its schema requires ``arguments``."""
    validator = Draft202012Validator(ActionIn.model_json_schema())
    for tool, accepted in (("click", False), ("extract_text", True), ("tabs_list", True)):
        body = {"tool": tool, "idempotency_key": "key-0001"}
        assert validator.is_valid(body) == accepted == _accepted(ToolCall, {"tool": tool}), tool
