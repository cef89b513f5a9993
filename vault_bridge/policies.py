"""Least-privilege Vault policies and the server's role token.

One role, and grants that each hold no more than one read or one write needs:

- ``ram-server`` (the web processes): manage per-invite policies named
  ``ram-invite-*``, mint invite tokens only through the ``ram-invite`` token
  role, write/read the account's Google connection tokens, and destroy a portal
  credential (every version and its metadata) when the person deletes it. It
  can neither read nor write portal credentials itself.
- a vendor read grant (``ram-account-<account_id>-vendor-<vendor>``): read of one
  account's secret of one browser vendor (the Steel or Browserbase API key, a CDP
  endpoint's token), minted by the server when that computer's executor asks for its
  backend at start — one use, two minutes, not renewable.
- a proxy read grant (``ram-account-<account_id>-proxy-<computer_id>``): read of one
  computer's upstream proxy credentials, minted by the server when that computer's
  executor asks for its settings at start — one use, two minutes, not renewable.
- an account read grant (``ram-account-<account_id>``): read of one account's
  portal credentials, minted by the worker for one ``browser_login`` through the
  ``ram-account-read`` token role — one use, two minutes, not renewable — and
  handed to the executor with the call: the executor holds no Vault token.
- an invite (``ram-invite-<request_id>``): create/update of exactly one
  credential path, one use at the Vault level, no read back, not renewable.

Executors hold no Vault token at all: what they read comes with a grant above. The former
``ram-executor`` role (read of every account's secrets) is gone; ``vault_configure`` deletes its
policy, which leaves any token still holding it with no capability.

``vault_configure`` is run with a root (or equally privileged operator) token:
by ``run_embedded`` against the embedded OpenBao, by tests against
``bao server -dev``, and in production by the operator once (see README).
"""

from __future__ import annotations

from dataclasses import dataclass

import hvac

SERVER_POLICY = "ram-server"
# The removed role that read every account's secrets: its policy is deleted where it still exists.
LEGACY_EXECUTOR_POLICY = "ram-executor"
INVITE_ROLE = "ram-invite"
ACCOUNT_READ_ROLE = "ram-account-read"
ACCOUNT_POLICY_PREFIX = "ram-account-"
# A read grant is used at the start of one browser_login; it never outlives this.
ACCOUNT_READ_TTL_SECONDS = 120
INVITE_POLICY_PREFIX = "ram-invite-"
# An invite lives at most until its request's deadline, and never beyond this.
INVITE_MAX_TTL_SECONDS = 7 * 24 * 3600


def server_policy(kv_mount: str) -> str:
    return f"""
# Per-invite policies (one per credential request), nothing else under sys/.
path "sys/policies/acl/{INVITE_POLICY_PREFIX}*" {{ capabilities = ["create", "update", "delete"] }}
path "sys/policy/{INVITE_POLICY_PREFIX}*" {{ capabilities = ["create", "update", "delete"] }}
# Invite tokens only through the restricted token role.
path "auth/token/create/{INVITE_ROLE}" {{ capabilities = ["update"] }}
# Deleting a portal credential the person no longer wants: every version and its
# metadata. Delete only: this role can still neither read nor write a credential.
path "{kv_mount}/metadata/accounts/+/portal_login/+" {{ capabilities = ["delete"] }}
# Per-account read policies, and one-use read grants for one browser_login each.
path "sys/policies/acl/{ACCOUNT_POLICY_PREFIX}*" {{ capabilities = ["create", "update"] }}
path "sys/policy/{ACCOUNT_POLICY_PREFIX}*" {{ capabilities = ["create", "update"] }}
path "auth/token/create/{ACCOUNT_READ_ROLE}" {{ capabilities = ["update"] }}
# Google connection tokens stored after an authorization.
path "{kv_mount}/data/accounts/+/connections/*" {{ capabilities = ["create", "update", "read"] }}
# Browser vendor secrets (API keys) set by staff or the account's API: written, never read back.
path "{kv_mount}/data/accounts/+/browser_vendors/+" {{ capabilities = ["create", "update"] }}
path "{kv_mount}/metadata/accounts/+/browser_vendors/+" {{ capabilities = ["delete"] }}
# A computer's upstream proxy credentials, set by staff or the account's API: written, never read back.
path "{kv_mount}/data/accounts/+/computer_proxies/+" {{ capabilities = ["create", "update"] }}
path "{kv_mount}/metadata/accounts/+/computer_proxies/+" {{ capabilities = ["delete"] }}
"""


def account_read_policy(kv_mount: str, account_id: str) -> str:
    return f'path "{kv_mount}/data/accounts/{account_id}/portal_login/+" {{ capabilities = ["read"] }}\n'


def vendor_read_policy(kv_mount: str, vendor_path: str) -> str:
    """Read of one account's secret of one browser vendor (``accounts/<id>/browser_vendors/<vendor>``)."""
    return f'path "{kv_mount}/data/{vendor_path}" {{ capabilities = ["read"] }}\n'


def invite_policy(kv_mount: str, credential_path: str) -> str:
    return f'path "{kv_mount}/data/{credential_path}" {{ capabilities = ["create", "update"] }}\n'


@dataclass(frozen=True)
class RoleTokens:
    server: str

    def __repr__(self) -> str:
        return "RoleTokens(<redacted>)"


def vault_configure(*, client: hvac.Client, kv_mount: str, role_ttl_hours: int = 768) -> RoleTokens:
    """Mount KV v2, write the policies and the token roles, delete the legacy executor policy,
    mint the server's role token."""
    mounts = client.sys.list_mounted_secrets_engines()
    if f"{kv_mount}/" not in mounts.get("data", mounts):
        client.sys.enable_secrets_engine("kv", path=kv_mount, options={"version": "2"})
    client.sys.create_or_update_policy(SERVER_POLICY, server_policy(kv_mount))
    # A token of the former executor role keeps its lease but loses every capability with its policy.
    client.sys.delete_policy(LEGACY_EXECUTOR_POLICY)
    client.adapter.post(
        f"/v1/auth/token/roles/{INVITE_ROLE}",
        json={
            "allowed_policies_glob": [f"{INVITE_POLICY_PREFIX}*"],
            "disallowed_policies": ["root", SERVER_POLICY],
            "orphan": True,
            "renewable": False,
            "token_no_default_policy": True,
            "token_num_uses": 1,
            "token_explicit_max_ttl": INVITE_MAX_TTL_SECONDS,
            "token_type": "service",
        },
    )
    client.adapter.post(
        f"/v1/auth/token/roles/{ACCOUNT_READ_ROLE}",
        json={
            "allowed_policies_glob": [f"{ACCOUNT_POLICY_PREFIX}*"],
            "disallowed_policies": ["root", SERVER_POLICY],
            "orphan": True,
            "renewable": False,
            "token_no_default_policy": True,
            "token_num_uses": 1,
            "token_explicit_max_ttl": ACCOUNT_READ_TTL_SECONDS,
            "token_type": "service",
        },
    )
    server = client.auth.token.create(
        policies=[SERVER_POLICY], no_parent=True, ttl=f"{role_ttl_hours}h", renewable=True, display_name="ram-server"
    )
    return RoleTokens(server=server["auth"]["client_token"])
