"""The one rule for the ids that become Vault path segments (credential, account, request ids).

Every layer that accepts a credential id — the agent's tools, the REST and MCP bodies, the
executor's ``browser_login`` and the Vault paths — validates it with this pattern, so an id
that passes one layer never fails another later (after a one-time claim was consumed).
"""

PATH_SEGMENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"
CREDENTIAL_ID_PATTERN = PATH_SEGMENT_PATTERN
