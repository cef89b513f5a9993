"""The tool registry: one record and one argument model per tool, read by
run creation, the loop, the agent's schemas, MCP and docs/agents.md."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pydantic
import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor.actions import AGENT_ACTIONS
from runs import loop
from runs.contracts import InterventionReason
from runs.mcp import server
from runs.models import Run, RunStep
from runs.tool_calls import ToolCall, tool_enums, tool_schemas, tool_table
from runs.tools import TOOLS
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def test_every_browser_tool_shares_its_executor_actions_model() -> None:
    browser = [tool for tool in TOOLS.values() if tool.browser]
    assert {t.name for t in browser} >= {"navigate", "click", "type", "press", "scroll", "wait_for", "extract_text"}
    for tool in browser:
        assert tool.action in AGENT_ACTIONS, f"{tool.name} names no executor action"
        assert tool.args is AGENT_ACTIONS[tool.action].args, f"{tool.name} has a second argument model"


def test_a_tool_that_drives_nothing_changes_the_run() -> None:
    for tool in TOOLS.values():
        if not tool.browser:
            assert tool.outcome is not None or tool.pauses is not None, (
                f"{tool.name} neither drives the browser nor changes the run"
            )
            assert tool.outcome is None or tool.pauses is None, f"{tool.name} says twice what it does"


def test_an_unregistered_tool_cannot_be_called_or_created(api: Api, computer: Computer, runner_key: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolCall(tool="hover", arguments={})
    body = {"task": {"goal": "x", "steps": [step("hover", selector="#a")]}, "computer_id": computer.id}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "bad_step",
    [
        # The stricter bound of the two former copies, everywhere.
        step("press", key="Control+A"),
        step("type", selector="#q", text="😀" * 2001),  # 4002 UTF-16 units
        step("type", selector="#q", text=5),
        step("click", selector="#" + "a" * 1000),
        step("wait_for", selector="#a", timeout_ms="100"),
        step("click", x="5", y=5),
        step("scroll", delta_y=2001),
        step("scroll", delta_x=-2000.5),
        step("scroll", delta_y=True),
        step("scroll", delta_y=10, speed=1),
        step("navigate", url="https://example.com/a b"),
    ],
)
def test_creation_applies_the_executors_own_rules(
    api: Api, computer: Computer, runner_key: str, bad_step: dict[str, Any]
) -> None:
    body = {"task": {"goal": "x", "steps": [bad_step]}, "computer_id": computer.id}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400, bad_step
    assert set(response.json()) == {"error"}
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("bad_step", "where"),
    [
        (step("navigate", url="ftp://example.com/"), "task.steps.0.arguments.url: "),
        (step("navigate"), "task.steps.0.arguments.url: Field required"),
        (step("navigate", url="https://example.com/", colour="red"), "task.steps.0.arguments.colour: "),
        (step("scroll", delta_y=2001), "task.steps.0.arguments.delta_y: "),
        (step("click", x=5), "task.steps.0.arguments: "),  # a rule over several arguments
    ],
)
def test_an_argument_error_names_the_argument_by_its_full_path(
    api: Api, computer: Computer, runner_key: str, bad_step: dict[str, Any], where: str
) -> None:
    body = {"task": {"goal": "x", "steps": [bad_step]}, "computer_id": computer.id}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid request: " + where), response.json()
    assert not Run.objects.exists()


def test_the_bounds_themselves_are_accepted(api: Api, computer: Computer, runner_key: str) -> None:
    steps = [
        step("type", selector="#q", text="😀" * 2000),
        step("press", key="Enter"),
        step("press", key="a"),
        step("scroll", delta_x=-2000, delta_y=2000),
        step("click", x=1279, y=719),
    ]
    response = api.post("/api/runs", {"task": {"goal": "x", "steps": steps}, "computer_id": computer.id}, runner_key)
    assert response.status_code == 201, response.content


def test_stored_runs_the_new_models_refuse_still_read_and_list(
    api: Api, account: Account, computer: Computer, runner_key: str
) -> None:
    # Created before the bounds were tightened (or by hand): never re-validated on a read.
    old_steps = [step("press", key="Control+A"), step("type", selector="#q", text="x" * 9000), step("hover")]
    stored = Run.objects.create(account=account, computer=computer, task={"goal": "old", "steps": old_steps})
    listed = api.get("/api/runs", runner_key)
    assert listed.status_code == 200
    assert [r["id"] for r in listed.json()["runs"]] == [str(stored.id)]
    read = api.get(f"/api/runs/{stored.id}", runner_key)
    assert read.status_code == 200
    assert read.json()["task"]["steps"] == old_steps


def test_a_stored_step_the_new_models_refuse_fails_the_run_cleanly(account: Account, computer: Computer) -> None:
    account_top_up(account=account, microcredits=10_000, actor="test")
    stored = Run.objects.create(
        account=account,
        computer=computer,
        task={"goal": "old", "steps": [step("press", key="Control+A")]},
        microcredits_per_model_call=1,
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=stored.id):
            break
    stored.refresh_from_db()
    assert stored.status == "failed"
    assert "does not fit" in stored.result["error"]
    assert list(RunStep.objects.filter(run=stored).values_list("tool", flat=True)) == ["fail"]


def test_summaries_are_secret_free_and_name_the_tool() -> None:
    calls = {
        "type": {"selector": "#q", "text": "hunter2"},
        "navigate": {"url": "https://portal.example.com/cb?code=abc#t=1"},
        "browser_login": {"credentialId": "acme"},
        "scroll": {"delta_y": 300},
    }
    for name, arguments in calls.items():
        call = ToolCall(tool=name, arguments=arguments)
        summary = call.spec.summary(name, call.parsed())
        assert summary["tool"] == name
        dumped = json.dumps(summary)
        assert "hunter2" not in dumped and "code=abc" not in dumped
    typed = ToolCall(tool="type", arguments=calls["type"])
    assert typed.spec.summary("type", typed.parsed())["characters"] == 7


def test_the_agents_schemas_come_from_the_registry() -> None:
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas()}
    assert set(schemas) == set(TOOLS)
    scroll = schemas["scroll"]["parameters"]
    assert scroll["properties"]["delta_y"]["maximum"] == 2000
    assert scroll["properties"]["delta_x"]["minimum"] == -2000
    assert scroll["additionalProperties"] is False
    assert all(s["description"] for s in schemas.values())


def test_the_agents_guide_tool_table_is_generated_from_the_registry() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert tool_table() in guide, "docs/agents.md's tool table is stale: run make docs"
    assert "| `scroll` |" in tool_table()


def test_the_mcp_run_create_schema_lists_every_registered_tool() -> None:
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    schema = tools["run_create"].input_schema
    variants = schema["$defs"]["ScriptedStep"]["oneOf"]
    assert [v["properties"]["tool"]["const"] for v in variants] == list(TOOLS)
    for variant in variants:
        on_error = variant["properties"]["on_error"]
        assert on_error["enum"] == ["fail", "continue"] and on_error["default"] == "fail"


def test_every_fixed_set_of_values_is_listed_in_the_tool_table_and_the_tool_schemas() -> None:
    reasons = list(get_args(InterventionReason))
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas()}
    assert schemas["request_takeover"]["properties"]["reason"]["enum"] == reasons
    assert schemas["request_credential"]["properties"]["reason"]["enum"] == reasons
    rows = {line.split("|")[1].strip(" `"): line for line in tool_table().splitlines()[2:]}
    assert "`reason` is one of " + ", ".join(f"`{r}`" for r in reasons) in rows["request_takeover"]
    for name, tool in TOOLS.items():
        for values in tool_enums(tool).values():
            assert all(f"`{value}`" in rows[name] for value in values), name


def test_a_reason_outside_the_list_is_refused_naming_the_allowed_ones(
    api: Api, computer: Computer, runner_key: str
) -> None:
    body = {"task": {"goal": "x", "steps": [step("request_takeover", reason="mfa")]}, "computer_id": computer.id}
    response = api.post("/api/runs", body, runner_key)
    assert response.status_code == 400
    assert "verification" in response.json()["error"]
    assert not Run.objects.exists()


def test_a_tool_calls_schema_gives_each_tool_its_own_arguments(api: Api) -> None:
    document = api.get("/api/openapi.json").json()
    step_schema = document["components"]["schemas"]["ScriptedStep"]
    variants = {variant["properties"]["tool"]["const"]: variant for variant in step_schema["oneOf"]}
    assert set(variants) == set(TOOLS)
    assert variants["navigate"]["properties"]["arguments"]["required"] == ["url"]
    assert variants["navigate"]["required"] == ["tool", "arguments"]
    assert variants["finish"]["required"] == ["tool"]  # no argument is required: they may be left out
    # What the schema accepts is what the server accepts (the schema's refusals are refused too).
    create = {"$ref": "#/components/schemas/RunCreateIn", "components": document["components"]}
    good = {"computer_id": "pc-1", "task": {"goal": "g", "steps": [step("navigate", url="https://example.com/"), {"tool": "finish"}]}}
    jsonschema.validate(good, create)
    for bad in (step("navigate"), step("navigate", url="https://example.com/", extra=1), {"tool": "nothing"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, "task": {"goal": "g", "steps": [bad]}}, create)
        with pytest.raises(pydantic.ValidationError):
            ToolCall.model_validate(bad)


def test_a_private_field_is_in_no_summary() -> None:
    marker = "private-answer-7Q"
    calls = {"type": {"selector": "#q", "text": marker}, "dialog_answer": {"accept": True, "text": marker}}
    assert {name for name, tool in TOOLS.items() if tool.private} == set(calls)
    for name, arguments in calls.items():
        tool = TOOLS[name]
        assert set(tool.private) <= set(tool.args.model_fields)
        summary = tool.summary(name, tool.args.model_validate(arguments))
        assert marker not in json.dumps(summary) and summary["characters"] == len(marker)


# The modules that take a step through its phases; they read a tool's record, never its name.
_STEP_MODULES = ("runs/loop.py", "runs/external.py", "runs/browser.py")


def _tool_names_in(source: str) -> list[tuple[int, str]]:
    """Where code compares a value with a tool's name (``call.tool == "browser_login"``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
                found += [(node.lineno, v.value) for v in values if isinstance(v, ast.Constant) and v.value in TOOLS]
    return found


def test_the_step_machinery_names_no_tool() -> None:
    """What a tool does besides its action (a post-step record, an outcome counter, its private
    fields) is on its record: the loop and external runs need no edit for a new tool."""
    root = Path(__file__).resolve().parents[2]
    offenders = [
        f"{module}:{line} names {name!r}"
        for module in _STEP_MODULES
        for line, name in _tool_names_in((root / module).read_text())
    ]
    assert offenders == []
    assert _tool_names_in('if call.tool == "browser_login":\n    pass\n') == [(1, "browser_login")]


def test_tool_hooks_are_on_their_records() -> None:
    with_hook = {name for name, tool in TOOLS.items() if tool.settled is not None}
    counted = {name for name, tool in TOOLS.items() if tool.outcomes is not None}
    assert with_hook == counted == {"browser_login"}
