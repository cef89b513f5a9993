"""Bring your own agent: a harness drives a run's computer one action at a time.

The same journey as the built-in loop (``test_run_flow``), decided by a test
harness instead: navigate to a local portal, ask for a credential that a
person saves through the Vault form in a real browser, continue explicitly,
``browser_login``, read the page and finish — once through REST, once through
the official MCP client — with the same secrets checks.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from django.contrib.auth.models import User
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Page

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor.runtime import Executor
from runs.models import Run
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.portals import PASSWORD as PORTAL_PASSWORD
from tests.support.portals import USERNAME as PORTAL_USERNAME
from tests.support.portals import Portal, serve_portal
from tests.support.screen import register, reset_executor
from tests.support.tiers import live
from tests.support.vault import VaultServer

pytestmark = pytest.mark.e2e

PERSON_PASSWORD = "correct horse battery"

# One action: (tool, arguments) -> the answer's body. REST and MCP each provide one.
Act = Callable[[str, str, dict[str, Any], str], Awaitable[dict[str, Any]]]


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


async def rest(origin: str, key: str, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=origin, timeout=30) as client:
        return await client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


def rest_act(origin: str, key: str) -> Act:
    async def act(run_id: str, tool: str, arguments: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        body = {"tool": tool, "arguments": arguments, "idempotency_key": idempotency_key}
        answer = await rest(origin, key, "POST", f"/api/runs/{run_id}/actions", body)
        while answer.status_code == 202:  # a long action: bounded long-polls until it settles
            step_id = answer.json()["step_id"]
            answer = await rest(origin, key, "GET", f"/api/runs/{run_id}/actions/{step_id}?wait=20")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    return act


async def person_saves_the_credential(page: Page, origin: str, key: str, run_id: str, person: User) -> None:
    descriptor = await rest(origin, key, "GET", f"/api/runs/{run_id}/intervention-descriptor")
    assert descriptor.status_code == 200, descriptor.text
    await page.goto(descriptor.json()["intervention"]["human_action"]["url"])
    await sign_in(page, person.username, PERSON_PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    await page.get_by_label("Username").fill(PORTAL_USERNAME)
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()


async def journey(
    *,
    act: Act,
    observe: Callable[[str], Awaitable[dict[str, Any]]],
    continue_run: Callable[[str, str], Awaitable[str]],
    create: Callable[[], Awaitable[str]],
    page: Page,
    origin: str,
    key: str,
    person: User,
    portal: Portal,
) -> str:
    """The harness's decisions, step by step; returns the final run's id."""
    run_id = await create()
    navigated = await act(run_id, "navigate", {"url": f"{portal.origin}/login/standard"}, "nav-login-1")
    assert navigated["state"] == "succeeded" and navigated["result"]["isError"] is False
    seen = await observe(run_id)
    assert seen["url"].startswith(portal.origin) and seen["run_status"] == "running"

    asked = await act(
        run_id,
        "request_credential",
        {"portal_origin": portal.origin, "label": "Acme portal", "credential_id": "acme"},
        "ask-credential-1",
    )
    assert asked["run_status"] == "waiting_for_input"
    assert asked["required_action"]["kind"] == "credential"
    assert "browser_login" in asked["result"]["content"]

    await person_saves_the_credential(page, origin, key, run_id, person)
    second = await continue_run(run_id, "after-credential")

    login = await act(second, "browser_login", {"credentialId": "acme"}, "login-acme-1")
    assert login["result"] == {"content": "Logged in as p***r@example.com.", "isError": False}
    # A retry of the same action answers the first result and never submits the form again.
    assert await act(second, "browser_login", {"credentialId": "acme"}, "login-acme-1") == login
    assert len(portal.posts) == 1

    page_text = await act(second, "extract_text", {}, "read-home-1")
    assert "Welcome back" in page_text["result"]["content"]
    observed = await observe(second)
    assert "Welcome back" in observed["text"] and PORTAL_PASSWORD not in json.dumps(observed)
    done = await act(second, "finish", {"output": page_text["result"]["content"][:200]}, "finish-1")
    assert done["run_status"] == "succeeded"
    return second


async def test_a_harness_drives_the_whole_journey_through_rest(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    executor: Executor,
    account: Account,
    make_user: Callable[..., User],
    make_computer: Callable[..., Computer],
    runner_key: str,
    portal: Portal,
) -> None:
    person = await orm(lambda: make_user(account, "ana", PERSON_PASSWORD))
    await orm(lambda: make_computer(account, "pc-1"))
    await orm(lambda: register(executor))
    await orm(lambda: reset_executor(executor))
    await orm(lambda: account_top_up(account=account, microcredits=1_000_000, actor="test"))
    leak_guard.watch(PORTAL_PASSWORD, PERSON_PASSWORD, runner_key)

    async def create() -> str:
        body = {"task": {"goal": "Read the portal's home page"}, "computer_id": "pc-1", "agent": {"type": "external"}}
        created = await rest(human_origin, runner_key, "POST", "/api/runs", body)
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    async def observe(run_id: str) -> dict[str, Any]:
        answer = await rest(human_origin, runner_key, "GET", f"/api/runs/{run_id}/observation")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    async def continue_run(run_id: str, idempotency_key: str) -> str:
        answer = await rest(human_origin, runner_key, "POST", f"/api/runs/{run_id}/continue", {"idempotency_key": idempotency_key})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["run"]["id"])

    final = await journey(
        act=rest_act(human_origin, runner_key),
        observe=observe,
        continue_run=continue_run,
        create=create,
        page=page,
        origin=human_origin,
        key=runner_key,
        person=person,
        portal=portal,
    )
    run = await orm(lambda: Run.objects.get(pk=final))
    assert run.status == "succeeded" and "Welcome back" in str(run.result)
    steps = await orm(lambda: [(s.tool, s.state) for s in run.steps.all()])
    assert steps == [("browser_login", "succeeded"), ("extract_text", "succeeded"), ("finish", "succeeded")]
    # One model call per action, debited on each run.
    assert run.model_calls == 3
    # On a continued run, actions are refused with the new run's id.
    first = await orm(lambda: Run.objects.get(pk=run.continued_from_id))
    refused = await rest(
        human_origin, runner_key, "POST", f"/api/runs/{first.id}/actions",
        {"tool": "extract_text", "arguments": {}, "idempotency_key": "too-late-1"},
    )
    assert refused.status_code == 409 and refused.json()["continued_run_id"] == str(run.id)


async def test_a_harness_drives_the_whole_journey_through_the_mcp_client(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    executor: Executor,
    account: Account,
    make_user: Callable[..., User],
    make_computer: Callable[..., Computer],
    runner_key: str,
    portal: Portal,
) -> None:
    person = await orm(lambda: make_user(account, "ana", PERSON_PASSWORD))
    await orm(lambda: make_computer(account, "pc-1"))
    await orm(lambda: register(executor))
    await orm(lambda: reset_executor(executor))
    await orm(lambda: account_top_up(account=account, microcredits=1_000_000, actor="test"))
    leak_guard.watch(PORTAL_PASSWORD, PERSON_PASSWORD, runner_key)

    async def call(name: str, **arguments: Any) -> dict[str, Any]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {runner_key}"}, timeout=60) as http:
            async with streamable_http_client(f"{human_origin}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool(name, arguments)
        assert not result.is_error, result.structured_content
        assert result.structured_content is not None
        return dict(result.structured_content)

    async def create() -> str:
        run = await call(
            "run_create", task={"goal": "Read the portal's home page"}, computer_id="pc-1", agent={"type": "external"}
        )
        return str(run["id"])

    async def act(run_id: str, tool: str, arguments: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        answer = await call("run_act", run_id=run_id, tool=tool, arguments=arguments, idempotency_key=idempotency_key)
        while answer["state"] == "started":
            answer = await call("run_action", run_id=run_id, step_id=answer["step_id"], wait=20)
        return answer

    async def observe(run_id: str) -> dict[str, Any]:
        return await call("run_observe", run_id=run_id)

    async def continue_run(run_id: str, idempotency_key: str) -> str:
        return str((await call("run_continue", run_id=run_id, idempotency_key=idempotency_key))["run"]["id"])

    final = await journey(
        act=act,
        observe=observe,
        continue_run=continue_run,
        create=create,
        page=page,
        origin=human_origin,
        key=runner_key,
        person=person,
        portal=portal,
    )
    run = await orm(lambda: Run.objects.get(pk=final))
    assert run.status == "succeeded" and "Welcome back" in str(run.result)
