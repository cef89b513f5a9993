"""``credentials_list`` over MCP: the REST body, ids, labels and origins, never a secret."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.utils import timezone
from mcp import ClientSession
from mcp.types import CallToolResult

from accounts.models import Account
from runs.contracts import StoredCredentialList
from runs.models import StoredCredential
from tests.mcp.conftest import with_session


def test_credentials_list_answers_the_rest_body_for_both_key_kinds(
    live_origin: str,
    account: Account,
    make_account: Callable[..., Account],
    runner_key: str,
    observer_key: str,
    make_key: Callable[..., str],
    mcp_call: Callable[..., CallToolResult],
) -> None:
    StoredCredential.objects.create(
        account=account,
        credential_id="acme-portal",
        label="Acme portal",
        origins=["https://portal.example"],
        username_masked="a***a@portal.example",
        saved_at=timezone.now(),
    )

    async def tools(session: ClientSession) -> Any:
        return await session.list_tools()

    listed = {t.name: t for t in with_session(live_origin, runner_key, tools).tools}
    assert set(listed["credentials_list"].output_schema["properties"]) == set(StoredCredentialList.model_fields)  # type: ignore[index]
    for key in (runner_key, observer_key):
        result = mcp_call(key, "credentials_list")
        assert not result.is_error
        assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        (item,) = result.structured_content["credentials"]  # type: ignore[index]
        assert item["credential_id"] == "acme-portal" and item["origins"] == ["https://portal.example"]
        assert "a***a" not in result.content[0].text  # type: ignore[union-attr]
    stranger = mcp_call(make_key(make_account("Other")), "credentials_list")
    assert stranger.structured_content == {"credentials": []}
