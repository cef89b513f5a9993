"""A run's credentials follow the run's account, never the computer's current one.

Attacked for real: staff move a computer to another account in the admin (Django admin,
the real form), the old account tries to continue and to step its runs, the executor is
asked to read a credential with a binding that no longer holds, and a registered executor
wipes its browser profile before the new owner can use it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Account, ApiKey
from accounts.services import account_top_up, api_key_create
from computers.client import ExecutorClient
from computers.models import Computer
from computers.services import computer_reassign
from core.errors import Conflict
from executor.runtime import Executor, ExecutorThread
from runs import loop
from runs.models import Run, RunEvent
from runs.selectors import BINDING_CHANGED
from runs.services import run_continue, run_create
from tests.conftest import Api
from tests.support.portals import PASSWORD, USERNAME, Portal, serve_portal
from tests.support.screen import on_executor
from tests.support.tiers import live
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, portal_credential_write


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


@pytest.fixture
def owners(screen: Executor, account: Account, make_account: Callable[..., Account], vault: VaultServer, portal: Portal) -> tuple[Account, Account]:
    """The computer's first owner, and the account it is moved to, which has a stored credential."""
    newcomer = make_account("Newcomer")
    for each in (account, newcomer):
        account_top_up(account=each, microcredits=1_000_000, actor="test")
    portal_credential_write(
        token=vault.root_token,
        account_id=newcomer.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,)),
    )
    return account, newcomer


def advance(run: Run, limit: int = 10) -> Run:
    for _ in range(limit):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run


def login_steps(portal: Portal, *, pause_first: bool) -> list[dict[str, Any]]:
    steps = [
        {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
        {"tool": "browser_login", "arguments": {"credentialId": "portal"}},
    ]
    return ([{"tool": "request_takeover", "arguments": {"reason": "captcha"}}] if pause_first else []) + steps


def staff_moves(client: Client, computer_id: str, account: Account) -> None:
    User.objects.create_superuser(username="staff", password="correct horse battery")
    assert client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"}).status_code in (302, 303)
    response = client.post(
        f"/admin/computers/computer/{computer_id}/change/",
        {"id": computer_id, "account": str(account.pk), "name": computer_id, "is_active": "on"},
    )
    assert response.status_code == 302, [line for line in response.content.decode().splitlines() if "error" in line][:10]


def test_moving_a_computer_in_the_admin_ends_the_old_owners_runs_and_their_continue(
    owners: tuple[Account, Account], portal: Portal, client: Client
) -> None:
    first, newcomer = owners
    computer = Computer.objects.get(pk="pc-1")
    paused = advance(run_create(account=first, computer=computer, task={"goal": "x", "steps": login_steps(portal, pause_first=True)}, max_model_calls=10))
    assert paused.status == "waiting_for_input"
    before = computer.binding
    staff_moves(client, "pc-1", newcomer)
    computer.refresh_from_db()
    assert computer.account_id == newcomer.id and computer.binding != before
    assert computer.generation is None and computer.status == "offline", "the executor's generation ended"
    paused.refresh_from_db()
    assert paused.status == "cancelled"
    assert RunEvent.objects.filter(run=paused, kind="run_binding_changed").exists()
    key = api_key_create(account=first, kind=ApiKey.Kind.RUNNER)[0]
    with pytest.raises(Conflict) as refused:
        run_continue(key=key, run_id=paused.id, idempotency_key="continue-after-move")
    assert refused.value.code == "run.cancelled"
    assert not Run.objects.filter(continued_from=paused).exists()
    assert portal.posts == [], "the new owner's credential was never typed for the old owner"


def test_every_step_rechecks_the_binding_and_the_run_fails_plainly(owners: tuple[Account, Account], portal: Portal) -> None:
    first, newcomer = owners
    computer = Computer.objects.get(pk="pc-1")
    run = run_create(account=first, computer=computer, task={"goal": "x", "steps": login_steps(portal, pause_first=False)}, max_model_calls=10)
    # The computer moves between the run's creation and its first step (the cancellation of
    # the old owner's runs has not reached this one yet).
    Computer.objects.filter(pk="pc-1").update(account=newcomer, binding=uuid.uuid4())
    run = advance(run)
    assert run.status == "failed"
    assert run.result == {"outcome": "failed", "error": BINDING_CHANGED}
    assert run.steps.count() == 0
    assert portal.posts == []


def test_a_paused_run_whose_binding_changed_fails_on_continue(owners: tuple[Account, Account], portal: Portal) -> None:
    first, newcomer = owners
    computer = Computer.objects.get(pk="pc-1")
    paused = advance(run_create(account=first, computer=computer, task={"goal": "x", "steps": login_steps(portal, pause_first=True)}, max_model_calls=10))
    Computer.objects.filter(pk="pc-1").update(account=newcomer, binding=uuid.uuid4())
    key = api_key_create(account=first, kind=ApiKey.Kind.RUNNER)[0]
    with pytest.raises(Conflict) as refused:
        run_continue(key=key, run_id=paused.id, idempotency_key="continue-unbound")
    assert refused.value.code == "run.binding_changed" and "binding changed" in refused.value.message
    paused.refresh_from_db()
    assert paused.status == "failed"
    assert not Run.objects.filter(continued_from=paused).exists()
    assert portal.posts == []


def test_the_executor_reads_a_credential_only_for_a_binding_that_holds(
    owners: tuple[Account, Account], portal: Portal, screen: Executor
) -> None:
    first, newcomer = owners
    computer = Computer.objects.get(pk="pc-1")
    on_executor(screen, lambda: screen.page.goto(portal.origin + "/login/standard"))
    client = ExecutorClient(computer, timeout=60)
    lease = client.lease_acquire()
    try:
        # The old owner's run, still naming its binding, after the computer moved.
        stale = {"account_id": str(first.id), "computer_binding": str(computer.binding)}
        Computer.objects.filter(pk="pc-1").update(account=newcomer, binding=uuid.uuid4())
        reply = client.action(lease, "browser_login", context=stale, credentialId="portal")
        assert reply["tool_result"]["code"] == "browser.binding_changed"
        # Another account's id with the computer's current binding is refused too.
        computer.refresh_from_db()
        forged = {"account_id": str(first.id), "computer_binding": str(computer.binding)}
        reply = client.action(lease, "browser_login", context=forged, credentialId="portal")
        assert reply["tool_result"]["code"] == "browser.binding_changed"
        # No binding at all: nothing is read.
        reply = client.action(lease, "browser_login", credentialId="portal")
        assert reply["tool_result"]["code"] == "browser.binding_changed"
    finally:
        client.lease_release(lease)
    values = on_executor(screen, lambda: screen.page.eval_on_selector_all("input", "els => els.map(e => e.value)"))
    assert PASSWORD not in values and USERNAME not in values
    assert portal.posts == []


def test_a_moved_computer_wipes_its_browser_profile_before_the_new_owner_uses_it(
    live_origin: str, account: Account, make_account: Callable[..., Account], make_computer: Callable[..., Computer], portal: Portal
) -> None:
    make_computer(account, "pc-moving")
    thread = ExecutorThread(Executor(computer_id="pc-moving", register=True, sandbox=False)).start()
    executor = thread.executor
    try:
        first_generation = Computer.objects.get(pk="pc-moving").generation
        assert first_generation == executor.generation

        async def leave_traces() -> None:
            await executor.page.goto(portal.origin + "/welcome")
            await executor.page.evaluate("localStorage.setItem('owner', 'first'); document.cookie = 'session=first-owner'")

        on_executor(executor, leave_traces)
        assert on_executor(executor, lambda: executor.context.cookies())
        computer_reassign(computer_id="pc-moving", account=make_account("Newcomer"))
        deadline = time.monotonic() + 30
        while True:
            computer = Computer.objects.get(pk="pc-moving")
            if computer.generation is not None:
                break
            assert time.monotonic() < deadline, "the executor never registered a new generation"
            time.sleep(0.3)
        assert computer.generation != first_generation and computer.status == "ready"
        assert on_executor(executor, lambda: executor.context.cookies()) == []
        assert executor.page.url == "about:blank"

        async def storage() -> Any:
            await executor.page.goto(portal.origin + "/welcome")
            return await executor.page.evaluate("[localStorage.getItem('owner'), document.cookie]")

        assert on_executor(executor, storage) == [None, ""]
    finally:
        thread.stop()


def test_a_run_without_a_computer_never_breaks_the_run_list(
    api: Api, account: Account, runner_key: str, make_paused_run: Callable[..., Run], computer: Computer
) -> None:
    orphan = make_paused_run(account, None, "takeover")
    response = api.get("/api/runs", runner_key)
    assert response.status_code == 200, response.content
    listed = {run["id"]: run for run in response.json()["runs"]}
    assert listed[str(orphan.id)]["required_action"]["viewer"] is None
    assert api.get(f"/api/runs/{orphan.id}", runner_key).status_code == 200


def test_the_viewer_link_follows_the_same_binding_check_as_the_descriptor(
    api: Api, account: Account, runner_key: str, make_paused_run: Callable[..., Run], computer: Computer
) -> None:
    run = make_paused_run(account, computer, "takeover")
    action = api.get(f"/api/runs/{run.id}", runner_key).json()["required_action"]
    assert action["viewer"]["computer_id"] == "pc-1"
    Computer.objects.filter(pk="pc-1").update(is_active=False)
    assert api.get(f"/api/runs/{run.id}/intervention-descriptor", runner_key).status_code == 409
    assert api.get(f"/api/runs/{run.id}", runner_key).json()["required_action"]["viewer"] is None
    assert api.get(f"/api/runs/{run.id}/viewer", runner_key).status_code == 409
