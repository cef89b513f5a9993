"""The run body shown in docs/agents.md is a valid POST /api/runs body, and its
interface snippet names the real types."""

import json
import re
from pathlib import Path

from runs import agents
from runs.contracts import RUN_RESULT, FailedResult
from runs.tool_calls import RunCreateIn

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def test_documented_run_body_is_valid() -> None:
    block = re.search(r"```json\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    body = RunCreateIn.model_validate(json.loads(block.group(1)))
    assert [step.tool for step in body.task.steps] == ["navigate", "request_credential", "browser_login", "extract_text"]


def test_documented_interface_matches_the_code() -> None:
    text = DOC.read_text()
    for name in ("Observation", "Decision", "Agent", "ScriptedAgent", "AGENTS"):
        assert f"{name}" in text
        assert hasattr(agents, name)
    assert set(agents.Observation.__dataclass_fields__) == {"step", "page", "last_result"}
    assert set(agents.Decision.__dataclass_fields__) == {"call", "state", "stop_on_error"}


def test_documented_failed_result_is_a_valid_result() -> None:
    block = re.search(r"```json run-result\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    result = RUN_RESULT.validate_python(json.loads(block.group(1)))
    assert isinstance(result, FailedResult) and result.code == "browser.credential_not_found"
