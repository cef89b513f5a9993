"""The MCP server at /mcp, driven by the official MCP client over streamable HTTP
against a live uvicorn: every tool, the same bodies as REST, key kinds, refusals."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from mcp import ClientSession
from mcp.types import CallToolResult

from accounts.models import Account
from accounts.services import api_key_authenticate, api_key_revoke
from computers.contracts import ComputerOut
from computers.models import Computer
from core.api import MAX_BODY_BYTES
from runs.contracts import ContinueOut, EventList, InterventionEnvelope, RunList, RunOut, StepList
from runs.mcp import TOOL_KINDS
from runs.models import IdempotencyRecord, Run, RunStep
from runs.queries import RunListQuery
from runs.services import _continue_digest
from tests.mcp.conftest import with_session
from tests.runs.test_recordings import _stored_recording

McpCall = Callable[..., CallToolResult]


def rest(origin: str, key: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, f"{origin}{path}", headers={"Authorization": f"Bearer {key}"}, json=body, timeout=30
    )


def ok(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    return result.structured_content


def refused(result: CallToolResult, status: int) -> dict[str, Any]:
    assert result.is_error
    data = result.structured_content
    assert data is not None and data["status"] == status, data
    assert isinstance(data["error"], str) and data["error"]
    return data


def test_runner_lists_every_tool_with_its_contract_schemas(live_origin: str, runner_key: str) -> None:
    async def body(session: ClientSession) -> Any:
        return await session.list_tools()

    tools = {tool.name: tool for tool in with_session(live_origin, runner_key, body).tools}
    assert set(tools) == set(TOOL_KINDS)
    assert set(tools["run_create"].output_schema["properties"]) == set(RunOut.model_fields)  # type: ignore[index]
    assert set(tools["run_viewer"].output_schema["properties"]) == {"available", "computer_id", "url", "requires_login"}  # type: ignore[index]
    for name in ("run_get", "run_cancel"):
        assert set(tools[name].output_schema["properties"]) == set(RunOut.model_fields)  # type: ignore[index]
    assert set(tools["runs_list"].output_schema["properties"]) == set(RunList.model_fields)  # type: ignore[index]
    assert set(tools["run_intervention"].output_schema["properties"]) == {"intervention"}  # type: ignore[index]
    assert set(tools["run_continue"].output_schema["properties"]) == set(ContinueOut.model_fields)  # type: ignore[index]
    assert tools["run_continue"].input_schema["required"] == ["run_id", "idempotency_key"]
    assert tools["run_get"].annotations is not None and tools["run_get"].annotations.read_only_hint is True


def test_run_get_and_runs_list_answer_the_rest_bodies(
    live_origin: str,
    account: Account,
    runner_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    credits_run = make_paused_run(account, computer, "credits")
    credential_run = make_paused_run(account, computer, "credential")

    got = ok(mcp_call(runner_key, "run_get", run_id=str(credential_run.id)))
    assert got == rest(live_origin, runner_key, "GET", f"/api/runs/{credential_run.id}").json()
    assert got["required_action"]["kind"] == "credential"
    RunOut.model_validate(got)

    listed = ok(mcp_call(runner_key, "runs_list", kind="credits"))
    assert listed == rest(live_origin, runner_key, "GET", "/api/runs?kind=credits").json()
    assert [r["id"] for r in listed["runs"]] == [str(credits_run.id)]
    assert listed["runs"][0]["required_action"]["credits"]["missing_microcredits"] == "12000000"

    page = ok(mcp_call(runner_key, "runs_list", limit=1))
    assert page["count"] == 2 and page["next_offset"] == 1 and len(page["runs"]) == 1
    assert ok(mcp_call(runner_key, "runs_list", limit=1, offset=1))["next_offset"] is None


def test_run_intervention_answers_the_descriptor_and_never_an_invite(
    live_origin: str,
    account: Account,
    runner_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    for kind, descriptor_kind in (("takeover", "human_control"), ("credential", "credential"), ("connection", "google_connection")):
        run = make_paused_run(account, computer, kind)
        result = mcp_call(runner_key, "run_intervention", run_id=str(run.id))
        got = ok(result)
        assert got == rest(live_origin, runner_key, "GET", f"/api/runs/{run.id}/intervention-descriptor").json()
        assert list(got) == ["intervention"]
        envelope = InterventionEnvelope.model_validate(got)
        assert envelope.intervention.kind == descriptor_kind
        assert got["intervention"]["human_action"] == {
            "url": f"{live_origin}/tasks/{run.id}/intervention",
            "requires_login": True,
        }
        text = result.model_dump_json().lower()
        assert "invite" not in text and "ticket" not in text and runner_key.lower() not in text


def test_run_intervention_refuses_continue_and_credits_pauses(
    account: Account, runner_key: str, computer: Computer, make_paused_run: Callable[..., Run], mcp_call: McpCall
) -> None:
    for kind in ("continue", "credits"):
        run = make_paused_run(account, computer, kind)
        assert "continue" in refused(mcp_call(runner_key, "run_intervention", run_id=str(run.id)), 409)["error"]


def test_run_continue_creates_one_continuation_per_key(
    live_origin: str,
    account: Account,
    runner_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    run = make_paused_run(account, computer, "takeover")
    first = ok(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="mcp-key-0001"))
    ContinueOut.model_validate(first)
    assert first["continued_from"] == str(run.id)
    assert first["run"]["continued_from"] == str(run.id)

    assert ok(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="mcp-key-0001")) == first
    again = refused(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="mcp-key-0002"), 409)
    assert again["continued_run_id"] == first["run"]["id"]
    assert Run.objects.filter(continued_from=run).count() == 1
    # REST sees the same continuation and the same replay.
    replay = rest(live_origin, runner_key, "POST", f"/api/runs/{run.id}/continue", {"idempotency_key": "mcp-key-0001"})
    assert replay.status_code == 201 and replay.json() == first


def test_run_continue_with_short_credits_reports_what_is_missing(
    account: Account, runner_key: str, computer: Computer, make_paused_run: Callable[..., Run], mcp_call: McpCall
) -> None:
    run = make_paused_run(account, computer, "credits", required=5_000)
    data = refused(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="credits-0001"), 409)
    assert data["missing_microcredits"] == "5000"
    assert not Run.objects.filter(continued_from=run).exists()


def test_run_cancel_ends_the_run_and_its_intervention(
    account: Account, runner_key: str, computer: Computer, make_paused_run: Callable[..., Run], mcp_call: McpCall
) -> None:
    run = make_paused_run(account, computer, "credential")
    got = ok(mcp_call(runner_key, "run_cancel", run_id=str(run.id)))
    assert got["status"] == "cancelled" and "required_action" not in got
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert "cancelled" in refused(mcp_call(runner_key, "run_intervention", run_id=str(run.id)), 409)["error"]


def test_task_observer_reads_runs_and_nothing_else(
    account: Account,
    observer_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    run = make_paused_run(account, computer, "credential")
    assert ok(mcp_call(observer_key, "run_get", run_id=str(run.id)))["required_action"]["kind"] == "credential"
    assert ok(mcp_call(observer_key, "runs_list"))["count"] == 1
    for tool, arguments in (
        ("run_intervention", {}),
        ("run_continue", {"idempotency_key": "observer-0001"}),
        ("run_cancel", {}),
    ):
        data = refused(mcp_call(observer_key, tool, run_id=str(run.id), **arguments), 403)
        assert "task_observer" in data["error"]
    # Refused before arguments are read: a bad argument does not leak past the kind check.
    refused(mcp_call(observer_key, "run_continue", run_id=str(run.id), idempotency_key="x"), 403)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_FOR_INPUT
    assert not Run.objects.filter(continued_from=run).exists()


def test_another_accounts_run_is_not_found(
    make_account: Callable[..., Account],
    make_key: Callable[..., str],
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    owner, other = make_account("Owner"), make_account("Other")
    run = make_paused_run(owner, make_computer(owner), "takeover")
    other_key = make_key(other)
    for tool in ("run_get", "run_intervention", "run_cancel"):
        assert refused(mcp_call(other_key, tool, run_id=str(run.id)), 404)["error"] == "No such run."
    refused(mcp_call(other_key, "run_get", run_id="not-a-uuid"), 404)
    assert ok(mcp_call(other_key, "runs_list"))["count"] == 0
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING_FOR_INPUT


def test_bad_arguments_are_refused_in_the_error_shape_without_echoing_them(
    account: Account, runner_key: str, computer: Computer, make_paused_run: Callable[..., Run], mcp_call: McpCall
) -> None:
    run = make_paused_run(account, computer, "takeover")
    data = refused(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="bad key!"), 400)
    assert data["error"].startswith("Invalid request: idempotency_key") and "bad key!" not in data["error"]
    assert refused(mcp_call(runner_key, "runs_list", limit=101), 400)["error"].startswith("Invalid request: limit")
    assert "status must be one of" in refused(mcp_call(runner_key, "runs_list", status="paused"), 400)["error"]
    assert not Run.objects.filter(continued_from=run).exists()


def test_requests_without_a_live_key_are_refused_with_401(
    live_origin: str, account: Account, runner_key: str
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(f"{live_origin}/mcp", json=initialize, headers=headers, timeout=30)
    assert missing.status_code == 401
    assert missing.json() == {"error": "Authentication required: send Authorization: Bearer <API key>."}
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")

    works = httpx.post(
        f"{live_origin}/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {runner_key}"}, timeout=30
    )
    assert works.status_code == 200 and works.json()["result"]["serverInfo"]["name"] == "ram"
    assert works.headers["Cache-Control"] == "no-store" and works.headers["X-Content-Type-Options"] == "nosniff"

    key = api_key_authenticate(raw_key=runner_key)
    assert key is not None
    api_key_revoke(key=key)
    revoked = httpx.post(
        f"{live_origin}/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {runner_key}"}, timeout=30
    )
    assert revoked.status_code == 401 and revoked.json() == {"error": "The API key is invalid or revoked."}
    assert runner_key not in revoked.text


def test_inactive_account_and_foreign_origin_are_refused_with_403(
    live_origin: str, account: Account, runner_key: str
) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {runner_key}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    foreign = httpx.post(f"{live_origin}/mcp", json=body, headers={**headers, "Origin": "http://evil.example"}, timeout=30)
    assert foreign.status_code == 403 and "origin" in foreign.json()["error"]
    rebound = httpx.post(f"{live_origin}/mcp", json=body, headers={**headers, "Host": "evil.example"}, timeout=30)
    assert rebound.status_code == 400 and rebound.json() == {"error": "Invalid Host header."}
    same_origin = httpx.post(f"{live_origin}/mcp", json=body, headers={**headers, "Origin": live_origin}, timeout=30)
    assert same_origin.status_code == 200
    Account.objects.filter(pk=account.pk).update(is_active=False)
    inactive = httpx.post(f"{live_origin}/mcp", json=body, headers=headers, timeout=30)
    assert inactive.status_code == 403 and inactive.json() == {"error": "The account is inactive."}



def test_run_create_queues_a_run_on_an_own_computer(
    live_origin: str,
    account: Account,
    runner_key: str,
    observer_key: str,
    computer: Computer,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    mcp_call: McpCall,
) -> None:
    task = {"goal": "Read the title", "steps": [{"tool": "navigate", "arguments": {"url": "https://example.com/"}}]}
    created = ok(mcp_call(runner_key, "run_create", task=task, computer_id=computer.id, max_model_calls=5))
    RunOut.model_validate(created)
    assert created["computer_id"] == computer.id and created["max_model_calls"] == 5
    assert created["task"] == task
    assert rest(live_origin, runner_key, "GET", f"/api/runs/{created['id']}").json()["id"] == created["id"]
    assert Run.objects.get(pk=created["id"]).account_id == account.id
    assert Run.objects.get(pk=created["id"]).recording is True

    foreign = make_computer(make_account("Other"), "other-pc")
    assert refused(mcp_call(runner_key, "run_create", task=task, computer_id=foreign.id), 404)
    assert refused(mcp_call(observer_key, "run_create", task=task, computer_id=computer.id), 403)
    bad = refused(mcp_call(runner_key, "run_create", task={"steps": []}, computer_id=computer.id), 400)
    assert bad["error"].startswith("Invalid request: task.goal")
    assert Run.objects.count() == 1
    unrecorded = ok(mcp_call(runner_key, "run_create", task=task, computer_id=computer.id, recording=False))
    assert Run.objects.get(pk=unrecorded["id"]).recording is False


def test_run_viewer_gives_the_runner_the_clean_screen_link_of_the_bound_computer(
    live_origin: str,
    account: Account,
    runner_key: str,
    observer_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    run = make_paused_run(account, computer, "takeover")
    got = ok(mcp_call(runner_key, "run_viewer", run_id=str(run.id)))
    assert got == {
        "available": True,
        "computer_id": computer.id,
        "url": f"{live_origin}/view?computer_id={computer.id}",
        "requires_login": True,
    }
    assert got == rest(live_origin, runner_key, "GET", f"/api/runs/{run.id}/viewer").json()
    assert "task_observer" in refused(mcp_call(observer_key, "run_viewer", run_id=str(run.id)), 403)["error"]

    Computer.objects.filter(pk=computer.pk).update(is_active=False)
    assert "No viewer" in refused(mcp_call(runner_key, "run_viewer", run_id=str(run.id)), 409)["error"]


def test_run_steps_and_run_events_answer_the_rest_bodies_for_both_key_kinds(
    live_origin: str,
    account: Account,
    runner_key: str,
    observer_key: str,
    make_key: Callable[..., str],
    make_account: Callable[..., Account],
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    run = make_paused_run(account, computer, "takeover")
    RunStep.objects.create(
        run=run,
        index=0,
        tool="type",
        state="succeeded",
        summary={"tool": "type", "selector": "#q", "characters": 7, "isError": False},
        result={"content": "Done.", "isError": False},
    )
    for key in (runner_key, observer_key):
        steps = ok(mcp_call(key, "run_steps", run_id=str(run.id)))
        assert steps == rest(live_origin, key, "GET", f"/api/runs/{run.id}/steps").json()
        assert steps["steps"][0]["arguments"] == {"selector": "#q", "characters": 7}
        StepList.model_validate(steps)
        events = ok(mcp_call(key, "run_events", run_id=str(run.id)))
        assert events == rest(live_origin, key, "GET", f"/api/runs/{run.id}/events").json()
        assert "run_paused" in [e["kind"] for e in events["events"]]
        EventList.model_validate(events)
    first = ok(mcp_call(runner_key, "run_events", run_id=str(run.id), limit=1))
    newer = ok(mcp_call(runner_key, "run_events", run_id=str(run.id), after=first["next_after"]))
    assert [e["id"] for e in first["events"] + newer["events"]] == [e["id"] for e in events["events"]]
    refused(mcp_call(runner_key, "run_steps", run_id=str(run.id), limit=0), 400)
    other = make_key(make_account(name="Other"))
    refused(mcp_call(other, "run_events", run_id=str(run.id)), 404)


def test_an_oversized_body_gets_the_json_error_shape_and_a_small_one_still_works(live_origin: str, runner_key: str) -> None:
    headers = {
        "Authorization": f"Bearer {runner_key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "runs_list", "arguments": {}}}
    huge = json.dumps({**call, "params": {"name": "runs_list", "arguments": {"pad": "x" * MAX_BODY_BYTES}}})
    refused = httpx.post(f"{live_origin}/mcp", content=huge, headers=headers, timeout=30)
    assert refused.status_code == 413
    assert refused.headers["content-type"] == "application/json"
    assert refused.json() == {"error": "Invalid request: body is too large."}
    # Sent in chunks without a length, it is bounded the same way.
    chunks = (huge[i : i + 4096].encode() for i in range(0, len(huge), 4096))
    assert httpx.post(f"{live_origin}/mcp", content=chunks, headers=headers, timeout=30).status_code == 413
    answered = httpx.post(f"{live_origin}/mcp", content=json.dumps(call), headers=headers, timeout=30)
    assert answered.status_code == 200 and answered.json()["result"]["structuredContent"]["runs"] == []


def test_a_nul_in_any_argument_is_the_rest_400_and_changes_nothing(
    runner_key: str, computer: Computer, mcp_call: McpCall
) -> None:
    task = {"goal": "J\x00", "steps": []}
    data = refused(mcp_call(runner_key, "run_create", task=task, computer_id=computer.id), 400)
    assert data["error"] == "Invalid request: text may not hold the NUL character (U+0000)."
    nested = {"goal": "g", "steps": [{"tool": "finish", "arguments": {"output": {"k\x00": 1}}}]}
    assert refused(mcp_call(runner_key, "run_create", task=nested, computer_id=computer.id), 400)
    assert not Run.objects.exists()


def test_run_continue_replays_a_record_stored_as_rest_bytes(
    live_origin: str,
    account: Account,
    runner_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:
    """A record of the format before the snapshot (REST's status and bytes) answers MCP with its JSON."""
    run = make_paused_run(account, computer, "takeover")
    first = rest(live_origin, runner_key, "POST", f"/api/runs/{run.id}/continue", {"idempotency_key": "rest-first-1"})
    assert first.status_code == 201
    IdempotencyRecord.objects.create(
        account=account,
        key="stored-as-bytes",
        request_digest=_continue_digest(run.id, "stored-as-bytes"),
        status_code=201,
        response_body=first.content,
    )
    replay = ok(mcp_call(runner_key, "run_continue", run_id=str(run.id), idempotency_key="stored-as-bytes"))
    assert replay == first.json()
    assert Run.objects.filter(continued_from=run).count() == 1


def test_runs_list_takes_the_rest_query_model(live_origin: str, runner_key: str) -> None:
    """REST's parameters and MCP's arguments of the run list are one model's fields, bounds included."""

    async def body(session: ClientSession) -> Any:
        return await session.list_tools()

    tools = {tool.name: tool for tool in with_session(live_origin, runner_key, body).tools}
    arguments = tools["runs_list"].input_schema["properties"]
    assert set(arguments) == set(RunListQuery.model_fields)
    parameters = {
        p["name"]: p["schema"]
        for p in httpx.get(f"{live_origin}/api/openapi.json", timeout=30).json()["paths"]["/api/runs"]["get"]["parameters"]
    }
    assert set(parameters) == set(RunListQuery.model_fields)
    for name in ("limit", "offset"):
        assert (arguments[name]["minimum"], arguments[name]["maximum"]) == (
            parameters[name]["minimum"],
            parameters[name]["maximum"],
        )
        assert arguments[name]["default"] == RunListQuery.model_fields[name].default
    for name in ("status", "kind"):
        assert [v for v in arguments[name]["enum"] if v is not None] == parameters[name]["enum"]
    assert "1-100" in (tools["runs_list"].description or "")


def test_computer_tools_create_list_and_delete_within_the_account(
    live_origin: str,
    account: Account,
    runner_key: str,
    observer_key: str,
    make_account: Callable[..., Account],
    make_key: Callable[..., str],
    mcp_call: McpCall,
) -> None:
    created = ok(mcp_call(runner_key, "computer_create", id="mcp-pc", name="From MCP"))
    ComputerOut.model_validate(created)
    assert created["id"] == "mcp-pc" and created["state"] == "stopped"
    assert created == rest(live_origin, runner_key, "GET", "/api/computers/mcp-pc").json()
    assert ok(mcp_call(runner_key, "computers_list")) == rest(live_origin, runner_key, "GET", "/api/computers").json()
    # Another account's same id is its own; a foreign id is not found.
    other_key = make_key(make_account("Other"))
    assert ok(mcp_call(other_key, "computer_create", id="mcp-pc"))["id"] == "mcp-pc"
    assert refused(mcp_call(runner_key, "computer_create", id="mcp-pc"), 409)
    bad = refused(mcp_call(runner_key, "computer_create", id="-bad id"), 400)
    assert "-bad id" not in bad["error"]
    assert refused(mcp_call(observer_key, "computer_create", id="obs"), 403)
    assert refused(mcp_call(observer_key, "computer_delete", computer_id="mcp-pc"), 403)
    assert refused(mcp_call(observer_key, "computer_start", computer_id="mcp-pc"), 403)
    started = ok(mcp_call(runner_key, "computer_start", computer_id="mcp-pc"))
    assert started["state"] == "starting" and started == rest(live_origin, runner_key, "GET", "/api/computers/mcp-pc").json()
    assert refused(mcp_call(runner_key, "computer_start", computer_id="mcp-absent"), 404)
    assert ok(mcp_call(runner_key, "computer_delete", computer_id="mcp-pc")) == {"id": "mcp-pc", "deleted": True}
    assert refused(mcp_call(runner_key, "computer_delete", computer_id="mcp-pc"), 404)
    assert rest(live_origin, runner_key, "GET", "/api/computers/mcp-pc").status_code == 404
    assert rest(live_origin, other_key, "GET", "/api/computers/mcp-pc").status_code == 200
    assert Computer.objects.filter(handle="mcp-pc", deleted_at__isnull=True).count() == 1


def test_run_recording_answers_the_rest_timeline_to_runner_keys_only(
    live_origin: str,
    account: Account,
    runner_key: str,
    observer_key: str,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    mcp_call: McpCall,
) -> None:

    run = make_paused_run(account, computer, "takeover")
    refused(mcp_call(runner_key, "run_recording", run_id=str(run.id)), 404)
    _stored_recording(run)
    timeline = ok(mcp_call(runner_key, "run_recording", run_id=str(run.id)))
    assert timeline == rest(live_origin, runner_key, "GET", f"/api/runs/{run.id}/recording/timeline").json()
    assert [s["index"] for s in timeline["recording"]["segments"]] == [0]
    assert "pause" in [e["type"] for e in timeline["entries"]]
    assert "task_observer" in refused(mcp_call(observer_key, "run_recording", run_id=str(run.id)), 403)["error"]
