"""Invites, portal credentials and read grants against a real OpenBao with least-privilege roles."""

from __future__ import annotations

import uuid
from datetime import timedelta

import hvac
import pytest
from django.utils import timezone

from tests.support.vault import VaultServer, portal_credential_read_back
from vault_bridge.credentials import (
    PortalCredential,
    VaultRefused,
    account_read_grant,
    browser_vendor_read_grant,
    browser_vendor_secret_read,
    browser_vendor_secret_write,
    computer_proxy_credentials_read,
    connection_tokens_read,
    connection_tokens_write,
    invite_create,
    invite_revoke,
    portal_credential_path,
    portal_credential_read,
    portal_credential_save,
    portal_credential_write,
)
from vault_bridge.policies import LEGACY_EXECUTOR_POLICY, server_policy, vault_configure

CREDENTIAL = PortalCredential(username="ana", password="s3cret-pass", origins=("https://portal.example",))


def _invite(account_id: str, credential_id: str, seconds: int = 300) -> str:
    return invite_create(
        request_id=uuid.uuid4(),
        account_id=account_id,
        credential_id=credential_id,
        expires_at=timezone.now() + timedelta(seconds=seconds),
    )


def test_invite_writes_once_and_a_read_grant_reads_it(vault: VaultServer) -> None:
    account_id, credential_id = str(uuid.uuid4()), str(uuid.uuid4())
    invite = _invite(account_id, credential_id)
    portal_credential_save(invite=invite, account_id=account_id, credential_id=credential_id, credential=CREDENTIAL)
    assert portal_credential_read_back(account_id=account_id, credential_id=credential_id) == CREDENTIAL
    with pytest.raises(VaultRefused):
        portal_credential_save(
            invite=invite,
            account_id=account_id,
            credential_id=credential_id,
            credential=PortalCredential(username="mallory", password="x"),
        )
    assert portal_credential_read_back(account_id=account_id, credential_id=credential_id) == CREDENTIAL


def test_invite_cannot_read_back_its_credential(vault: VaultServer) -> None:
    account_id, credential_id = str(uuid.uuid4()), str(uuid.uuid4())
    portal_credential_write(
        token=vault.root_token, account_id=account_id, credential_id=credential_id, credential=CREDENTIAL
    )
    invite = _invite(account_id, credential_id)
    reader = hvac.Client(url=vault.addr, token=invite)
    with pytest.raises(hvac.exceptions.Forbidden):
        reader.secrets.kv.v2.read_secret_version(
            path=portal_credential_path(account_id=account_id, credential_id=credential_id),
            mount_point=vault.kv_mount,
            raise_on_deleted_version=True,
        )


def test_invite_cannot_write_another_path(vault: VaultServer) -> None:
    account_id = str(uuid.uuid4())
    invite = _invite(account_id, "cred-a")
    with pytest.raises(VaultRefused):
        portal_credential_save(invite=invite, account_id=account_id, credential_id="cred-b", credential=CREDENTIAL)
    assert portal_credential_read_back(account_id=account_id, credential_id="cred-b") is None


def test_invite_token_is_single_use_orphan_without_default_policy(vault: VaultServer) -> None:
    invite = _invite(str(uuid.uuid4()), "cred", seconds=120)
    info = hvac.Client(url=vault.addr, token=vault.root_token).auth.token.lookup(invite)["data"]
    assert info["num_uses"] == 1
    assert info["orphan"] is True
    assert info["renewable"] is False
    assert info["policies"] == [info["policies"][0]] and info["policies"][0].startswith("ram-invite-")
    assert 0 < info["ttl"] <= 120


def test_revoked_invite_writes_nothing(vault: VaultServer) -> None:
    account_id, request_id = str(uuid.uuid4()), uuid.uuid4()
    invite = invite_create(
        request_id=request_id,
        account_id=account_id,
        credential_id="cred",
        expires_at=timezone.now() + timedelta(seconds=300),
    )
    invite_revoke(request_id=request_id)
    with pytest.raises(VaultRefused):
        portal_credential_save(invite=invite, account_id=account_id, credential_id="cred", credential=CREDENTIAL)


def test_invite_for_a_past_deadline_is_refused(vault: VaultServer) -> None:
    with pytest.raises(VaultRefused):
        _invite(str(uuid.uuid4()), "cred", seconds=-1)


def test_server_role_cannot_read_or_write_portal_credentials(vault: VaultServer) -> None:
    account_id = str(uuid.uuid4())
    with pytest.raises(VaultRefused):
        portal_credential_write(
            token=vault.server_token, account_id=account_id, credential_id="cred", credential=CREDENTIAL
        )
    # The only portal-credential right the server holds is deleting a credential's metadata (every
    # version at once, when a person deletes it): never create, update or read.
    lines = [line for line in server_policy("ram").splitlines() if "portal_login" in line]
    assert lines == ['path "ram/metadata/accounts/+/portal_login/+" { capabilities = ["delete"] }']


def test_there_is_no_executor_role_and_every_read_needs_its_grant(vault: VaultServer) -> None:
    """The former ``ram-executor`` role read every account's secrets. Configuring Vault deletes its
    policy, so a token a deployment still holds from it reads nothing; no read goes without a grant."""
    root = hvac.Client(url=vault.addr, token=vault.root_token)
    account_id = str(uuid.uuid4())
    portal_credential_write(token=vault.root_token, account_id=account_id, credential_id="cred", credential=CREDENTIAL)
    browser_vendor_secret_write(account_id=account_id, vendor="steel", secret="sk-steel")
    # A deployment configured by an earlier version: the role's policy and a token of it.
    root.sys.create_or_update_policy(
        LEGACY_EXECUTOR_POLICY, f'path "{vault.kv_mount}/data/accounts/+/portal_login/+" {{ capabilities = ["read"] }}'
    )
    legacy = root.auth.token.create(policies=[LEGACY_EXECUTOR_POLICY], no_parent=True, ttl="1h")["auth"]["client_token"]
    assert portal_credential_read(account_id=account_id, credential_id="cred", grant=legacy) == CREDENTIAL
    vault_configure(client=root, kv_mount=vault.kv_mount)
    assert LEGACY_EXECUTOR_POLICY not in root.sys.list_acl_policies()["data"]["keys"]
    with pytest.raises(VaultRefused):
        portal_credential_read(account_id=account_id, credential_id="cred", grant=legacy)
    # Without a grant nothing is read (there is no role to fall back to).
    for read in (
        lambda: portal_credential_read(account_id=account_id, credential_id="cred", grant=""),
        lambda: browser_vendor_secret_read(account_id=account_id, vendor="steel", grant=""),
        lambda: computer_proxy_credentials_read(account_id=account_id, computer_id="pc-1", grant=""),
    ):
        with pytest.raises(VaultRefused):
            read()
    # A read grant only reads.
    with pytest.raises(VaultRefused):
        grant = account_read_grant(account_id=account_id)
        portal_credential_write(token=grant, account_id=account_id, credential_id="cred", credential=CREDENTIAL)


def test_server_role_stores_connection_tokens(vault: VaultServer) -> None:
    account_id, connection_id = str(uuid.uuid4()), str(uuid.uuid4())
    connection_tokens_write(account_id=account_id, connection_id=connection_id, tokens={"access_token": "at"})
    assert connection_tokens_read(account_id=account_id, connection_id=connection_id) == {"access_token": "at"}


def test_path_segments_are_validated() -> None:
    with pytest.raises(ValueError):
        portal_credential_path(account_id="a/../b", credential_id="c")


def test_credential_repr_hides_secrets() -> None:
    text = repr(PortalCredential(username="u", password="hunter2", totp_secret="JBSWY3DP"))
    assert "hunter2" not in text and "JBSWY3DP" not in text


def test_an_account_read_grant_reads_only_its_account_once(vault: VaultServer) -> None:
    """The executor holds no Vault token: the worker hands it a one-use grant per browser_login
    that reads only the run's account's portal credentials."""
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    for account_id in (mine, theirs):
        portal_credential_write(
            token=vault.root_token,
            account_id=account_id,
            credential_id="portal",
            credential=PortalCredential(username=f"user-{account_id[:4]}", password="pw", origins=("https://p.example",)),
        )
    grant = account_read_grant(account_id=mine)
    read = portal_credential_read(account_id=mine, credential_id="portal", grant=grant)
    assert read is not None and read.username == f"user-{mine[:4]}"
    with pytest.raises(VaultRefused):
        portal_credential_read(account_id=mine, credential_id="portal", grant=grant)  # used once
    with pytest.raises(VaultRefused):
        portal_credential_read(account_id=theirs, credential_id="portal", grant=account_read_grant(account_id=mine))


def test_a_vendor_read_grant_reads_only_its_accounts_secret_of_its_vendor_once(vault: VaultServer) -> None:
    """The executor holds no Vault role for its backend: the server hands it, at start, a one-use
    grant that reads only its own account's secret of its own vendor."""
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    for account_id in (mine, theirs):
        for vendor in ("steel", "browserbase"):
            browser_vendor_secret_write(account_id=account_id, vendor=vendor, secret=f"{vendor}-{account_id[:4]}")
    grant = browser_vendor_read_grant(account_id=mine, vendor="steel")
    assert browser_vendor_secret_read(account_id=mine, vendor="steel", grant=grant) == f"steel-{mine[:4]}"
    with pytest.raises(VaultRefused):
        browser_vendor_secret_read(account_id=mine, vendor="steel", grant=grant)  # used once
    for account_id, vendor in [(theirs, "steel"), (mine, "browserbase"), (theirs, "browserbase")]:
        with pytest.raises(VaultRefused):
            browser_vendor_secret_read(
                account_id=account_id, vendor=vendor, grant=browser_vendor_read_grant(account_id=mine, vendor="steel")
            )
