"""Stored credentials: metadata written at save time, replacement through a new
one-time form, deletion of every version in a real OpenBao, listing over REST and
MCP without a secret."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hvac
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from accounts.models import Account, AccountEvent
from computers.models import Computer
from core.errors import Conflict, DomainError, NotFound
from runs import credentials, services
from runs.models import CredentialReplacement, CredentialRequest, Run, StoredCredential
from tests.conftest import Api
from tests.support.vault import VaultServer, portal_credential_read_back
from vault_bridge.credentials import (
    PortalCredential,
    VaultRefused,
    portal_credential_path,
    portal_credential_save,
)
from vault_bridge.policies import server_policy

PASSWORD = "Portal-Pa55-never-shown"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


def save_through_a_run(person: User, run: Run, username: str = "ana.maria@portal.example") -> CredentialRequest:
    target = services.intervention_open(run_id=str(run.id), user=person, auth_method="password")
    invite = target.partition("#invite=")[2]
    return services.credential_request_save(
        run_id=str(run.id),
        user=person,
        auth_method="password",
        invite=invite,
        username=username,
        password=PASSWORD,
        totp_secret=None,
    )


@pytest.fixture
def saved(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run], vault: VaultServer
) -> StoredCredential:
    run = make_paused_run(account, computer, "credential", portal_origin="https://portal.example")
    request = save_through_a_run(person, run)
    return StoredCredential.objects.get(account=account, credential_id=request.credential_id)


def test_saving_a_credential_records_what_may_be_shown_and_no_secret(saved: StoredCredential) -> None:
    assert saved.label == "Portal"
    assert saved.origins == ["https://portal.example"]
    assert saved.username_masked == "a***a@portal.example"
    assert saved.saved_at is not None and saved.last_used_at is None
    row = StoredCredential.objects.filter(pk=saved.pk).values().get()
    assert PASSWORD not in repr(row) and "ana.maria" not in repr(row)


def test_the_web_role_can_delete_but_never_read_a_credential(vault: VaultServer) -> None:
    policy = server_policy(vault.kv_mount)
    assert f'"{vault.kv_mount}/metadata/accounts/+/portal_login/+" {{ capabilities = ["delete"] }}' in policy
    assert "portal_login/+\" { capabilities = [\"read\"" not in policy
    web = hvac.Client(url=vault.addr, token=vault.server_token)
    path = portal_credential_path(account_id="a1", credential_id="c1")
    hvac.Client(url=vault.addr, token=vault.root_token).secrets.kv.v2.create_or_update_secret(
        path=path, secret={"username": "u", "password": PASSWORD}, mount_point=vault.kv_mount
    )
    with pytest.raises(hvac.exceptions.Forbidden):
        web.secrets.kv.v2.read_secret_version(path=path, mount_point=vault.kv_mount, raise_on_deleted_version=True)


def test_delete_destroys_every_version_and_the_metadata(saved: StoredCredential, account: Account, vault: VaultServer) -> None:
    root = hvac.Client(url=vault.addr, token=vault.root_token)
    path = portal_credential_path(account_id=account.id, credential_id=saved.credential_id)
    # A second version, so that "every version" means something.
    root.secrets.kv.v2.create_or_update_secret(
        path=path, secret={"username": "x", "password": "second", "origins": saved.origins}, mount_point=vault.kv_mount
    )
    credentials.stored_credential_delete(account=account, credential_id=saved.credential_id, actor="user:person")
    with pytest.raises(hvac.exceptions.InvalidPath):
        root.secrets.kv.v2.read_secret_metadata(path=path, mount_point=vault.kv_mount)
    assert portal_credential_read_back(account_id=account.id, credential_id=saved.credential_id) is None
    assert not StoredCredential.objects.filter(pk=saved.pk).exists()
    event = AccountEvent.objects.get(account=account, kind="credential_deleted")
    assert event.data == {"credential_id": saved.credential_id, "label": "Portal"} and event.actor == "user:person"
    # A second delete (a double submission) changes nothing and says so.
    with pytest.raises(DomainError) as again:
        credentials.stored_credential_delete(account=account, credential_id=saved.credential_id, actor="user:person")
    assert isinstance(again.value, NotFound)
    assert AccountEvent.objects.filter(account=account, kind="credential_deleted").count() == 1


def test_replace_issues_a_one_time_form_that_writes_a_new_version(
    saved: StoredCredential, account: Account, vault: VaultServer
) -> None:
    target = credentials.credential_replacement_open(account=account, credential_id=saved.credential_id)
    replacement_id, _, invite = target.removeprefix("/credentials/forms/").partition("#invite=")
    assert invite and CredentialReplacement.objects.get(pk=replacement_id).state == "pending"
    credentials.credential_replacement_save(
        account=account,
        replacement_id=replacement_id,
        invite=invite,
        username="bruno@portal.example",
        password="New-Pa55",
        totp_secret=None,
    )
    stored = portal_credential_read_back(account_id=account.id, credential_id=saved.credential_id)
    assert stored == PortalCredential(username="bruno@portal.example", password="New-Pa55", origins=("https://portal.example",))
    saved.refresh_from_db()
    assert saved.username_masked == "b***o@portal.example"
    assert CredentialReplacement.objects.get(pk=replacement_id).state == "credential_saved"
    assert AccountEvent.objects.filter(account=account, kind="credential_replaced").count() == 1
    # The invite worked once: Vault refuses it now, and the form refuses a second save.
    with pytest.raises(VaultRefused):
        portal_credential_save(
            invite=invite,
            account_id=account.id,
            credential_id=saved.credential_id,
            credential=PortalCredential(username="m", password="m"),
        )
    with pytest.raises(DomainError) as again:
        credentials.credential_replacement_save(
            account=account, replacement_id=replacement_id, invite=invite, username="m", password="m", totp_secret=None
        )
    assert isinstance(again.value, Conflict)


def test_replacement_form_of_another_account_is_a_404(
    saved: StoredCredential, account: Account, make_account: Callable[..., Account], vault: VaultServer
) -> None:
    target = credentials.credential_replacement_open(account=account, credential_id=saved.credential_id)
    replacement_id = target.removeprefix("/credentials/forms/").partition("#")[0]
    other = make_account("Other")
    with pytest.raises(DomainError) as refused:
        credentials.credential_replacement_get(account=other, replacement_id=replacement_id)
    assert isinstance(refused.value, NotFound)
    with pytest.raises(DomainError) as missing:
        credentials.credential_replacement_open(account=other, credential_id=saved.credential_id)
    assert isinstance(missing.value, NotFound)


def test_expired_replacement_forms_lose_their_invite(saved: StoredCredential, account: Account, vault: VaultServer) -> None:
    target = credentials.credential_replacement_open(account=account, credential_id=saved.credential_id)
    replacement_id, _, invite = target.removeprefix("/credentials/forms/").partition("#invite=")
    CredentialReplacement.objects.filter(pk=replacement_id).update(expires_at=timezone.now())
    assert credentials.credential_replacements_expire() == 1
    assert CredentialReplacement.objects.get(pk=replacement_id).state == "expired"
    with pytest.raises(VaultRefused):
        portal_credential_save(
            invite=invite,
            account_id=account.id,
            credential_id=saved.credential_id,
            credential=PortalCredential(username="m", password="m"),
        )


def test_browser_login_marks_the_credential_last_used(saved: StoredCredential, account: Account, computer: Computer) -> None:
    run = Run.objects.create(account=account, computer=computer, task={"goal": "g"})
    credentials.stored_credential_used(run=run, credential_id=saved.credential_id)
    saved.refresh_from_db()
    assert saved.last_used_run_id == run.id and saved.last_used_at is not None


def test_rest_lists_stored_credentials_without_a_secret(
    api: Api, saved: StoredCredential, runner_key: str, observer_key: str, make_account: Callable[..., Account], make_key: Callable[..., str]
) -> None:
    for key in (runner_key, observer_key):
        response = api.get("/api/credentials", key)
        assert response.status_code == 200
        (item,) = response.json()["credentials"]
        assert set(item) == {"credential_id", "label", "origins", "saved_at", "last_used_at", "last_used_run_id"}
        assert item["credential_id"] == saved.credential_id and item["origins"] == ["https://portal.example"]
        assert "a***a" not in response.content.decode() and PASSWORD not in response.content.decode()
    other = make_key(make_account("Other"))
    assert api.get("/api/credentials", other).json() == {"credentials": []}
    assert api.get("/api/credentials").status_code == 401


def test_every_stored_credential_field_is_in_the_contract(saved: StoredCredential, account: Account) -> None:
    wire: dict[str, Any] = credentials.stored_credentials_wire(account=account)
    assert wire["credentials"][0]["label"] == "Portal"
