"""The select_option tool end to end: its executor action on a real Chromium, a run through the loop,
and the tables that read the tool registry (MCP, the OpenAI-compatible agent's schemas)."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor import ops, taint
from runs import loop
from runs.models import Run
from runs.tool_calls import RunTask, tool_schemas
from tests.support.screen import on_executor


def step(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


FORM = """<!doctype html><title>Plan</title><body>
<select id="plan"><option value="">Choose</option><option value="b1">Basic</option><option value="p2">Pro plan</option></select>
<input id="name"><script>
window.changes = [];
document.querySelector('#plan').addEventListener('change', (e) => window.changes.push(e.target.value));
</script>"""


def _chosen(screen: Any) -> Any:
    return on_executor(screen, lambda: screen.page.evaluate("() => [document.querySelector('#plan').value, window.changes]"))


def test_select_option_chooses_by_value_or_by_label_and_fires_change(screen: Any) -> None:
    on_executor(screen, lambda: screen.page.set_content(FORM))
    executor = ExecutorClient(Computer.objects.get(pk="pc-1"))
    lease = executor.lease_acquire()
    try:
        by_value = executor.action(lease, "select_option", selector="#plan", value="p2")
        assert (by_value["value"], by_value["label"]) == ("p2", "Pro plan")
        assert _chosen(screen) == ["p2", ["p2"]]
        by_label = executor.action(lease, "select_option", selector="#plan", label="Basic")
        assert (by_label["value"], by_label["label"]) == ("b1", "Basic")
        assert _chosen(screen) == ["b1", ["p2", "b1"]]
        with pytest.raises(ExecutorError) as missing:
            executor.action(lease, "select_option", selector="#plan", label="Pro")  # exact, not a prefix
        assert missing.value.reason == "option_not_found"
        with pytest.raises(ExecutorError) as not_a_select:
            executor.action(lease, "select_option", selector="#name", value="b1")
        assert not_a_select.value.reason == "option_not_found"
    finally:
        executor.lease_release(lease)
    assert _chosen(screen) == ["b1", ["p2", "b1"]], "a refused choice changed nothing"


def test_a_run_selects_through_the_loop(screen: Any, account: Account) -> None:
    on_executor(screen, lambda: screen.page.set_content(FORM))
    account_top_up(account=account, microcredits=10_000, actor="test")
    run = Run.objects.create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": "pick", "steps": [step("select_option", selector="#plan", label="Pro plan"), step("finish", output="ok")]},
        microcredits_per_model_call=1,
    )
    for _ in range(5):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    assert run.status == "succeeded", run.result
    selected = run.steps.get(index=0)
    assert selected.summary == {"tool": "select_option", "selector": "#plan", "label": "Pro plan", "isError": False}
    assert selected.result["content"] == "Selected the option 'Pro plan' (value 'p2')."
    assert _chosen(screen)[0] == "p2"


@pytest.mark.unit
def test_the_tool_is_in_every_table_that_reads_the_registry() -> None:
    # The OpenAI-compatible agent's function schemas, and the MCP run_create's task schema.
    functions = {t["function"]["name"]: t["function"] for t in tool_schemas()}
    assert set(functions["select_option"]["parameters"]["properties"]) == {"selector", "value", "label"}
    assert '"const": "select_option"' in json.dumps(RunTask.model_json_schema())
    for wrong in ({"selector": "#p"}, {"selector": "#p", "value": "a", "label": "b"}, {"selector": "#p", "value": 1}):
        with pytest.raises(pydantic.ValidationError):
            ops.SelectOptionArgs.model_validate(wrong)


HELD = """<!doctype html><title>Plan</title><body><table><tr><td>Username:</td>
<td><input id="u" name="username"></td><td><select id="plan"><option value="b1">Basic</option>
<option value="echo">Basic</option></select></td></tr></table>
<script>document.querySelector('#u').addEventListener('input', (e) => {
  document.querySelector('option[value=echo]').textContent = e.target.value; });</script>"""


def test_select_option_is_no_oracle_on_a_page_that_holds_a_secret(screen: Any) -> None:
    """A hostile agent after a fill: a value-matching selector to reach the <select> is refused
    (the selector rule), a label equal to the secret is refused before anything is chosen (the
    arguments check), and the option the page made of the secret is answered redacted."""
    secret = "alice-x1@example.com"

    async def fill() -> None:
        await screen.page.set_content(HELD)
        handle = await screen.page.query_selector("#u")
        await handle.type(secret)
        await taint.mark_filled(screen.page, handle, secret)

    on_executor(screen, fill)
    executor = ExecutorClient(Computer.objects.get(pk="pc-1"))
    lease = executor.lease_acquire()
    try:
        with pytest.raises(ExecutorError) as oracle:
            executor.action(lease, "select_option", selector="internal:role=row[name=/Username: a/] >> select", value="b1")
        assert oracle.value.reason == "selector_value_dependent"
        with pytest.raises(ExecutorError) as guess:
            executor.action(lease, "select_option", selector="#plan", label=secret)
        assert guess.value.reason == "secret_in_arguments"
        chosen = executor.action(lease, "select_option", selector="#plan", value="echo")
        assert secret not in json.dumps(chosen) and chosen["value"] == "echo"
    finally:
        executor.lease_release(lease)
