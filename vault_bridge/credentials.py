"""Portal credentials and Google connection tokens in KV v2, and one-time invites.

Layout under the KV v2 mount ``settings.VAULT_KV_MOUNT``, per account:

- ``accounts/<account_id>/portal_login/<credential_id>``: ``username``,
  ``password``, optional ``totp_secret``, ``origins`` (the portal origins the
  credential may be typed into).
- ``accounts/<account_id>/connections/<connection_id>``: OAuth tokens.
- ``accounts/<account_id>/browser_vendors/<backend>``: ``api_key`` of the
  account's Steel or Browserbase (``steel``, ``browserbase``), ``token`` of a
  CDP endpoint (``cdp``): written by the server, read only with a one-use grant the
  server hands to that computer's executor.
- ``accounts/<account_id>/computer_proxies/<computer_id>``: ``username`` and
  ``password`` of the computer's upstream proxy: written by the server, read
  only with a one-use grant the server hands to that computer's executor.

Nothing reads a portal credential, a vendor secret or a proxy's credentials with a role
token: each read brings its one-use grant (there is no executor role).

An invite is a Vault token whose only policy allows create/update of exactly
one credential path: usable once at the Vault level, expiring at the request's
deadline, not renewable, an orphan without the default policy. It is never
stored by RAM; revoking it deletes its policy, which leaves the token with no
capability at all.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import hvac
import requests
from django.conf import settings
from django.utils import timezone

from core.contracts import CREDENTIAL_ID_RE
from core.metrics import VAULT_ERRORS
from vault_bridge.client import server_client, token_client
from vault_bridge.policies import (
    ACCOUNT_POLICY_PREFIX,
    ACCOUNT_READ_ROLE,
    ACCOUNT_READ_TTL_SECONDS,
    INVITE_MAX_TTL_SECONDS,
    INVITE_POLICY_PREFIX,
    INVITE_ROLE,
    account_read_policy,
    invite_policy,
    vendor_read_policy,
)

# Account, request and credential ids become path segments: the one credential id rule.
_ID = re.compile(CREDENTIAL_ID_RE)


class VaultRefused(Exception):
    """Vault refused the token: an invite already used, expired or revoked, or a role without the right."""


class VaultUnavailable(Exception):
    """Vault could not be reached or answered with an error."""


@dataclass(frozen=True)
class PortalCredential:
    username: str
    password: str = field(repr=False)
    origins: tuple[str, ...] = ()
    totp_secret: str | None = field(default=None, repr=False)

    def to_secret(self) -> dict[str, Any]:
        data: dict[str, Any] = {"username": self.username, "password": self.password, "origins": list(self.origins)}
        if self.totp_secret:
            data["totp_secret"] = self.totp_secret
        return data


def mask_username(username: str) -> str:
    """What may be shown of a username: ``p***r@example.com`` (results, the stored-credentials page)."""
    name, at, domain = username.partition("@")
    if len(name) <= 2:
        masked = name[:1] + "*" * 3
    else:
        masked = name[0] + "*" * 3 + name[-1]
    return f"{masked}{at}{domain}" if at else masked


def _checked_id(value: str | uuid.UUID, what: str) -> str:
    text = str(value)
    if not _ID.match(text):
        raise ValueError(f"invalid {what}")
    return text


def portal_credential_path(*, account_id: str | uuid.UUID, credential_id: str) -> str:
    """The credential's path relative to the KV mount (no ``data/`` segment)."""
    return (
        f"accounts/{_checked_id(account_id, 'account id')}/portal_login/{_checked_id(credential_id, 'credential id')}"
    )


def connection_path(*, account_id: str | uuid.UUID, connection_id: str | uuid.UUID) -> str:
    return f"accounts/{_checked_id(account_id, 'account id')}/connections/{_checked_id(connection_id, 'connection id')}"


def _invite_policy_name(request_id: str | uuid.UUID) -> str:
    return INVITE_POLICY_PREFIX + _checked_id(request_id, "request id")


class _Call:
    """Map hvac and transport errors to the two exceptions callers handle."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc is None:
            return False
        if isinstance(exc, (hvac.exceptions.Forbidden, hvac.exceptions.Unauthorized)):
            VAULT_ERRORS.labels(error="refused").inc()
            raise VaultRefused("Vault refused the token.") from None
        if isinstance(exc, (hvac.exceptions.VaultError, requests.RequestException)):
            VAULT_ERRORS.labels(error="unavailable").inc()
            raise VaultUnavailable(f"Vault is unavailable ({type(exc).__name__}).") from None
        return False


def invite_create(
    *, request_id: str | uuid.UUID, account_id: str | uuid.UUID, credential_id: str, expires_at: datetime
) -> str:
    """Mint the single-use invite for one credential path; the raw token is returned once."""
    seconds = math.floor((expires_at - timezone.now()).total_seconds())
    if seconds < 1:
        raise VaultRefused("The request's deadline has passed.")
    policy = _invite_policy_name(request_id)
    path = portal_credential_path(account_id=account_id, credential_id=credential_id)
    client = server_client()
    with _Call():
        client.sys.create_or_update_policy(policy, invite_policy(settings.VAULT_KV_MOUNT, path))
        result = client.auth.token.create(
            policies=[policy],
            role_name=INVITE_ROLE,
            num_uses=1,
            ttl=f"{min(seconds, INVITE_MAX_TTL_SECONDS)}s",
            explicit_max_ttl=f"{min(seconds, INVITE_MAX_TTL_SECONDS)}s",
            renewable=False,
            no_default_policy=True,
            display_name="ram-invite",
        )
    return str(result["auth"]["client_token"])


def invite_revoke(*, request_id: str | uuid.UUID) -> None:
    """Leave an outstanding invite with no capability (idempotent)."""
    client = server_client()
    with _Call():
        client.sys.delete_policy(_invite_policy_name(request_id))


def portal_credential_save(
    *, invite: str, account_id: str | uuid.UUID, credential_id: str, credential: PortalCredential
) -> None:
    """Write the credential with the invite itself: Vault enforces its single use."""
    path = portal_credential_path(account_id=account_id, credential_id=credential_id)
    with _Call():
        token_client(invite).secrets.kv.v2.create_or_update_secret(
            path=path, secret=credential.to_secret(), mount_point=settings.VAULT_KV_MOUNT
        )


def portal_credential_destroy(*, account_id: str | uuid.UUID, credential_id: str) -> None:
    """Destroy every version and the metadata of a credential (a KV v2 soft delete could be undone).

    With the server's role, which may delete but never read. Idempotent: an absent path is fine.
    """
    path = portal_credential_path(account_id=account_id, credential_id=credential_id)
    with _Call():
        server_client().secrets.kv.v2.delete_metadata_and_all_versions(path=path, mount_point=settings.VAULT_KV_MOUNT)


def portal_credential_write(
    *, token: str, account_id: str | uuid.UUID, credential_id: str, credential: PortalCredential
) -> None:
    """Write a credential with an operator's token (administration and tests)."""
    path = portal_credential_path(account_id=account_id, credential_id=credential_id)
    with _Call():
        token_client(token).secrets.kv.v2.create_or_update_secret(
            path=path, secret=credential.to_secret(), mount_point=settings.VAULT_KV_MOUNT
        )


def _read_with(grant: str, path: str) -> dict[str, Any] | None:
    """Read ``path`` with a one-use grant (``VaultRefused`` without one: no role reads these)."""
    if not grant:
        raise VaultRefused("No Vault grant was given for this read.")
    return _read(token_client(grant), path)


def _read(client: hvac.Client, path: str) -> dict[str, Any] | None:
    with _Call():
        try:
            response = client.secrets.kv.v2.read_secret_version(
                path=path, mount_point=settings.VAULT_KV_MOUNT, raise_on_deleted_version=True
            )
        except hvac.exceptions.InvalidPath:
            return None
    return dict(response["data"]["data"])


def account_read_grant(*, account_id: str | uuid.UUID) -> str:
    """A token that reads only this account's portal credentials, once, for two minutes.

    Minted by the worker (server role) for one ``browser_login`` and handed to the
    executor with that call, so the executor itself holds no Vault token.
    """
    policy = ACCOUNT_POLICY_PREFIX + _checked_id(account_id, "account id")
    return _read_grant(policy, account_read_policy(settings.VAULT_KV_MOUNT, str(account_id)))


def _read_grant(policy: str, rules: str) -> str:
    """Write ``policy`` and mint a one-use, two-minute, non-renewable token of it (server role)."""
    client = server_client()
    with _Call():
        client.sys.create_or_update_policy(policy, rules)
        result = client.auth.token.create(
            policies=[policy],
            role_name=ACCOUNT_READ_ROLE,
            num_uses=1,
            ttl=f"{ACCOUNT_READ_TTL_SECONDS}s",
            explicit_max_ttl=f"{ACCOUNT_READ_TTL_SECONDS}s",
            renewable=False,
            no_default_policy=True,
            display_name="ram-account-read",
        )
    return str(result["auth"]["client_token"])


def portal_credential_read(*, account_id: str | uuid.UUID, credential_id: str, grant: str) -> PortalCredential | None:
    """Read a portal credential (None when absent) with an account read grant (``account_read_grant``)."""
    data = _read_with(grant, portal_credential_path(account_id=account_id, credential_id=credential_id))
    if data is None:
        return None
    return PortalCredential(
        username=str(data["username"]),
        password=str(data["password"]),
        origins=tuple(str(o) for o in data.get("origins", [])),
        totp_secret=str(data["totp_secret"]) if data.get("totp_secret") else None,
    )


def connection_tokens_write(
    *, account_id: str | uuid.UUID, connection_id: str | uuid.UUID, tokens: dict[str, Any]
) -> None:
    """Store a connection's OAuth tokens with the server's role."""
    with _Call():
        server_client().secrets.kv.v2.create_or_update_secret(
            path=connection_path(account_id=account_id, connection_id=connection_id),
            secret=tokens,
            mount_point=settings.VAULT_KV_MOUNT,
        )


def connection_tokens_read(*, account_id: str | uuid.UUID, connection_id: str | uuid.UUID) -> dict[str, Any] | None:
    return _read(server_client(), connection_path(account_id=account_id, connection_id=connection_id))


# A browser backend's name (``executor.contracts.BROWSER_BACKENDS``, whose records say which keep a
# secret here): one lowercase word, so that it is one path segment.
BROWSER_VENDOR_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def browser_vendor_path(*, account_id: str | uuid.UUID, vendor: str) -> str:
    if not BROWSER_VENDOR_RE.fullmatch(vendor):
        raise ValueError("invalid browser vendor")
    return f"accounts/{_checked_id(account_id, 'account id')}/browser_vendors/{vendor}"


def browser_vendor_secret_write(*, account_id: str | uuid.UUID, vendor: str, secret: str) -> None:
    """Store the account's API key (or endpoint token) for ``vendor`` with the server's role (write only)."""
    with _Call():
        server_client().secrets.kv.v2.create_or_update_secret(
            path=browser_vendor_path(account_id=account_id, vendor=vendor),
            secret={"secret": secret},
            mount_point=settings.VAULT_KV_MOUNT,
        )


def browser_vendor_secret_destroy(*, account_id: str | uuid.UUID, vendor: str) -> None:
    with _Call():
        server_client().secrets.kv.v2.delete_metadata_and_all_versions(
            path=browser_vendor_path(account_id=account_id, vendor=vendor), mount_point=settings.VAULT_KV_MOUNT
        )


def browser_vendor_read_grant(*, account_id: str | uuid.UUID, vendor: str) -> str:
    """A token that reads only this account's secret for ``vendor``, once, for two minutes.

    Minted by the server when the computer's executor asks for its backend at start, and
    handed to that executor in the answer: it needs no Vault role of its own.
    """
    path = browser_vendor_path(account_id=account_id, vendor=vendor)
    policy = f"{ACCOUNT_POLICY_PREFIX}{_checked_id(account_id, 'account id')}-vendor-{vendor}"
    return _read_grant(policy, vendor_read_policy(settings.VAULT_KV_MOUNT, path))


def browser_vendor_secret_read(*, account_id: str | uuid.UUID, vendor: str, grant: str) -> str | None:
    """The account's secret for ``vendor`` (None when none is stored), with a vendor read grant
    (``browser_vendor_read_grant``)."""
    data = _read_with(grant, browser_vendor_path(account_id=account_id, vendor=vendor))
    if data is None:
        return None
    return str(data.get("secret") or "") or None


def computer_proxy_path(*, account_id: str | uuid.UUID, computer_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", computer_id):
        raise ValueError("invalid computer id")
    return f"accounts/{_checked_id(account_id, 'account id')}/computer_proxies/{computer_id}"


def computer_proxy_credentials_write(
    *, account_id: str | uuid.UUID, computer_id: str, username: str, password: str
) -> None:
    """Store the computer's upstream proxy credentials with the server's role (write only)."""
    with _Call():
        server_client().secrets.kv.v2.create_or_update_secret(
            path=computer_proxy_path(account_id=account_id, computer_id=computer_id),
            secret={"username": username, "password": password},
            mount_point=settings.VAULT_KV_MOUNT,
        )


def computer_proxy_credentials_destroy(*, account_id: str | uuid.UUID, computer_id: str) -> None:
    with _Call():
        server_client().secrets.kv.v2.delete_metadata_and_all_versions(
            path=computer_proxy_path(account_id=account_id, computer_id=computer_id),
            mount_point=settings.VAULT_KV_MOUNT,
        )


def computer_proxy_credentials_read_grant(*, account_id: str | uuid.UUID, computer_id: str) -> str:
    """A token that reads only this computer's upstream proxy credentials, once, for two minutes.

    Minted by the server when the computer's executor asks for its settings at start, and
    handed to that executor in the answer: it needs no Vault role of its own.
    """
    path = computer_proxy_path(account_id=account_id, computer_id=computer_id)
    policy = f"{ACCOUNT_POLICY_PREFIX}{_checked_id(account_id, 'account id')}-proxy-{computer_id}"
    return _read_grant(policy, vendor_read_policy(settings.VAULT_KV_MOUNT, path))


def computer_proxy_credentials_read(
    *, account_id: str | uuid.UUID, computer_id: str, grant: str
) -> tuple[str, str] | None:
    """The computer's proxy (username, password), None when none is stored, with a proxy read
    grant (``computer_proxy_credentials_read_grant``)."""
    data = _read_with(grant, computer_proxy_path(account_id=account_id, computer_id=computer_id))
    if data is None:
        return None
    return str(data.get("username") or ""), str(data.get("password") or "")
