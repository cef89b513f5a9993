"""No credential value lands in a computer's profile: after a real ``browser_login`` (OpenBao,
the run loop, an executor process on its profile, Chromium) and a form the agent typed into and
submitted, neither the username nor the password is in any file under the profile, in UTF-8 or
UTF-16LE, once the browser has closed and written everything down. The profile is what a
computer keeps across restarts and what a move carries: saved passwords and autofill would keep
secrets outside the Vault."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from runs import loop
from runs.models import Run
from runs.services import run_create
from tests.executor.test_profile import ready, stop
from tests.support.executors import start_executor_process
from tests.support.portals import PASSWORD, USERNAME, Portal, serve_portal
from tests.support.tiers import live
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, portal_credential_write

pytestmark = pytest.mark.live

TYPED_EMAIL = "alice@example.com"


@pytest.fixture
@live
def portal() -> Iterator[Portal]:
    with serve_portal() as served:
        yield served


@pytest.fixture
def profiles() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="ram-profiles-"))
    yield root / "profiles"
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607 - a test's own directory


def _found(root: Path, values: list[str]) -> list[tuple[str, str, str]]:
    """(file, value, encoding) for every value found in any file under ``root``."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for value in values:
                for encoding in ("utf-8", "utf-16-le"):
                    if value.encode(encoding) in data:
                        hits.append((str(path.relative_to(root)), value, encoding))
    return hits


def test_no_credential_value_is_left_in_the_profile_after_a_login_and_a_form(
    live_origin: str,
    account: Account,
    make_computer: Callable[..., Computer],
    vault: VaultServer,
    portal: Portal,
    profiles: Path,
    settings: Any,
) -> None:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    settings.RAM_BROWSER_LOGIN_BUDGET_SECONDS = 30
    portal_credential_write(
        token=vault.root_token,
        account_id=account.id,
        credential_id="portal",
        credential=PortalCredential(username=USERNAME, password=PASSWORD, origins=(portal.origin,)),
    )
    computer = make_computer(account, "pc-nofill")
    process = start_executor_process(
        "pc-nofill",
        live_origin,
        stderr=subprocess.DEVNULL,
        new_session=True,
        RAM_BROWSER_PROFILE_DIR=str(profiles),
        RAM_BROWSER_EGRESS_ALLOW=portal.origin.removeprefix("http://"),
        VAULT_ADDR=vault.addr,  # the executor reads with the run's one-use grant, never a token of its own
        VAULT_KV_MOUNT=vault.kv_mount,
    )
    try:
        computer = ready("pc-nofill")
        steps = [
            {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
            {"tool": "browser_login", "arguments": {"credentialId": "portal"}},
            {"tool": "navigate", "arguments": {"url": portal.origin + "/login/standard"}},
            {"tool": "type", "arguments": {"selector": "input[name=username]", "text": TYPED_EMAIL}},
            {"tool": "click", "arguments": {"selector": "button[type=submit]"}},
            {"tool": "wait_for", "arguments": {"selector": "input[name=username]"}},
            {"tool": "navigate", "arguments": {"url": portal.origin + "/welcome"}},
        ]
        run = run_create(
            account=account,
            computer=computer,
            task={"goal": "log in, then fill a form", "steps": steps},
            agent_config={"type": "scripted", "browser": {"provider": "self_hosted", "solveCaptcha": False}},
            max_model_calls=20,
        )
        for _ in range(20):
            if not loop.run_step_advance(run_id=run.id):
                break
        run.refresh_from_db()
        login = dict(run.steps.get(index=1).result)
        assert login.get("isError") is not True, login
        assert any(p.get("username") == USERNAME for p in portal.posts), "the login reached the portal"
        assert any(p.get("username") == TYPED_EMAIL for p in portal.posts), "the form was submitted"
        assert run.status != Run.Status.FAILED, run.steps.order_by("index").values_list("tool", "result")
        generation_dir = profiles / "pc-nofill" / str(computer.profile_generation)
        assert (generation_dir / "chromium" / "Default").is_dir()
    finally:
        stop(process)  # SIGTERM: the browser closes and writes its files
    hits = _found(profiles / "pc-nofill", [USERNAME, PASSWORD, TYPED_EMAIL])
    assert not hits, "\n".join(map(str, hits))
