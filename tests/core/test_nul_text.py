"""PostgreSQL stores no NUL character in text or jsonb: a body whose text holds one (the JSON escape
\\u0000) is the documented 400 and changes nothing, never a server error; the six characters
backslash-u-0-0-0-0 as text are ordinary text."""

from __future__ import annotations

import json

from computers.models import Computer
from runs.models import Run
from tests.conftest import Api


def post_raw(api: Api, path: str, text: str, key: str) -> object:
    return api.post(path, raw=text.encode(), key=key)


def test_a_nul_anywhere_in_a_body_is_a_400_that_changes_nothing(api: Api, runner_key: str, computer: Computer) -> None:
    for body in (
        '{"task": {"goal": "J\\u0000x"}, "computer_id": "%s"}',
        '{"task": {"goal": "g", "steps": [{"tool": "extract_text", "arguments": {"selector": "a\\u0000"}}]}, "computer_id": "%s"}',
        '{"task": {"goal": "g", "steps": [{"tool": "finish", "arguments": {"output": {"k\\u0000": [1]}}}]}, "computer_id": "%s"}',
        '{"task": {"goal": "g", "steps": [{"tool": "finish", "arguments": {"output": {"k": ["a", "\\u0000"]}}}]}, "computer_id": "%s"}',
    ):
        answer = post_raw(api, "/api/runs", body % computer.id, runner_key)
        assert answer.status_code == 400, answer.content  # type: ignore[attr-defined]
        assert answer.json() == {"error": "Invalid request: text may not hold the NUL character (U+0000)."}  # type: ignore[attr-defined]
    assert Run.objects.count() == 0


def test_an_escaped_backslash_before_u0000_is_ordinary_text(api: Api, runner_key: str, computer: Computer) -> None:
    body = json.dumps({"task": {"goal": "say \\u0000 literally", "steps": [{"tool": "finish", "arguments": {"output": "x"}}]}, "computer_id": computer.id})
    assert "\\\\u0000" in body
    answer = post_raw(api, "/api/runs", body, runner_key)
    assert answer.status_code == 201, answer.content  # type: ignore[attr-defined]
    assert Run.objects.get().task["goal"] == "say \\u0000 literally"
