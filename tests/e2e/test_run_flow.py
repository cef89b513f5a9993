"""The whole product in one run: created through the API, it navigates to a
local portal, asks for a credential that a person saves through the Vault form
in a real browser, logs in with browser_login, pauses for a person, is
continued explicitly, and finishes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.async_api import Page

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from executor.runtime import Executor
from runs import loop
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


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


def drive(run_id: Any) -> Run:
    for _ in range(20):
        if not loop.run_step_advance(run_id=run_id):
            break
    return Run.objects.get(pk=run_id)


async def api(origin: str, key: str, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=origin, timeout=30) as client:
        return await client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


async def test_run_logs_in_with_a_credential_a_person_saved_then_pauses_continues_and_finishes(
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

    steps = [
        {"tool": "navigate", "arguments": {"url": f"{portal.origin}/login/standard"}},
        {"tool": "request_credential", "arguments": {"portal_origin": portal.origin, "label": "Acme portal", "credential_id": "acme"}},
        {"tool": "browser_login", "arguments": {"credentialId": "acme"}},
        {"tool": "request_takeover", "arguments": {"reason": "verification"}},
        {"tool": "extract_text", "arguments": {}},
    ]
    created = await api(
        human_origin, runner_key, "POST", "/api/runs",
        {"task": {"goal": "Read the portal's home page", "steps": steps}, "computer_id": "pc-1", "max_model_calls": 10},
    )
    assert created.status_code == 201, created.text
    first = await orm(lambda: drive(created.json()["id"]))
    assert first.pause_kind == "credential"

    # The person: descriptor URL -> sign in -> open -> Vault form -> saved.
    descriptor = await api(human_origin, runner_key, "GET", f"/api/runs/{first.id}/intervention-descriptor")
    await page.goto(descriptor.json()["intervention"]["human_action"]["url"])
    await sign_in(page, person.username, PERSON_PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    await page.get_by_label("Username").fill(PORTAL_USERNAME)
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()
    saved = await api(human_origin, runner_key, "GET", f"/api/runs/{first.id}/intervention-descriptor")
    assert saved.json()["intervention"]["state"] == "credential_saved"

    # The harness continues explicitly; the agent logs in and asks for a person.
    continued = await api(human_origin, runner_key, "POST", f"/api/runs/{first.id}/continue", {"idempotency_key": "after-credential"})
    assert continued.status_code == 201
    second = await orm(lambda: drive(continued.json()["run"]["id"]))
    login = await orm(lambda: second.steps.get(tool="browser_login").result)
    assert login == {"content": "Logged in as p***r@example.com.", "isError": False}
    assert second.pause_kind == "takeover"
    assert len(portal.posts) == 1

    # Continued again, it reads the signed-in page and finishes.
    again = await api(human_origin, runner_key, "POST", f"/api/runs/{second.id}/continue", {"idempotency_key": "after-check"})
    assert again.status_code == 201
    third = await orm(lambda: drive(again.json()["run"]["id"]))
    assert third.status == "succeeded"
    assert "Welcome back" in str(third.result)
    # Nothing of the earlier sequence was replayed: one login submission, three runs, one step each decision.
    assert len(portal.posts) == 1
    assert [s.tool for s in await orm(lambda: list(third.steps.all()))] == ["extract_text", "finish"]
