"""What the browser_login attack tests share: the hostile pages as a fixture, portal credentials
stored in OpenBao for a funded account, and a scripted run advanced step by step in the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run
from runs.services import run_create
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, portal_credential_write

# How long browser_login may take in these tests (the refusing pages end it early).
LOGIN_BUDGET_SECONDS = 20


@pytest.fixture(name="site")
def site_fixture(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    """``site``: tests/support/hostile_pages.py's pages, which the computer may open (a test module
    imports ``site_fixture`` to have it)."""
    with serve_hostile() as served:
        allow_egress(served.origin)
        yield served


def store_credentials(
    vault: VaultServer, account: Account, settings: Any, origin: str, credentials: dict[str, tuple[str, str]]
) -> Account:
    """``credentials`` (id → username, password) stored for ``origin`` in ``account``'s Vault area;
    the account funded and browser_login's budget set for the tests."""
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = LOGIN_BUDGET_SECONDS
    for credential_id, (username, password) in credentials.items():
        portal_credential_write(
            token=vault.root_token,
            account_id=account.id,
            credential_id=credential_id,
            credential=PortalCredential(username=username, password=password, origins=(origin,)),
        )
    return account


def scripted_run(account: Account, goal: str, steps: list[dict[str, Any]], *, advances: int) -> Run:
    """A scripted run of ``steps`` on pc-1, advanced in the test up to ``advances`` times."""
    run = run_create(
        account=account,
        computer=Computer.objects.get(pk="pc-1"),
        task={"goal": goal, "steps": steps},
        agent_config={"type": "scripted", "browser": {"provider": "self_hosted", "solveCaptcha": False}},
        max_model_calls=10,
    )
    for _ in range(advances):
        if not loop.run_step_advance(run_id=run.id):
            break
    run.refresh_from_db()
    return run
