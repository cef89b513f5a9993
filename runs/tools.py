"""The agent's browser tools, executed on the run's computer through the executor.

A browser tool runs under an agent lease acquired for the step and released
after it. A person's takeover makes the call fail cleanly; a run that once
held a lease never takes control back after a person released it: it pauses
and waits for an explicit continuation. Tool results are secret-free.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from executor.client import ExecutorClient, ExecutorError, HumanHasControl
from runs.contracts import TOOL_ARGUMENTS, ToolCall, ToolResult
from runs.models import Run

logger = logging.getLogger(__name__)

BROWSER_TOOLS = frozenset({"navigate", "click", "type", "press", "wait_for", "extract_text", "browser_login"})
# browser_login has its own end-to-end budget; other calls use the 25 s default.
LOGIN_CALL_TIMEOUT_SECONDS = 125.0


class NeedsPerson(Exception):
    """The computer is (or was) under human control: the run must pause."""


@dataclass(frozen=True)
class PageState:
    url: str
    control: str


def page_state(run: Run) -> PageState | None:
    """What the executor reports of the page now, for the agent's observation."""
    if run.computer is None:
        return None
    try:
        status = ExecutorClient(run.computer).status()
    except ExecutorError:
        return None
    return PageState(url=str(status.get("url", "")), control=str(status.get("control", "")))


def execute_browser_tool(*, run: Run, call: ToolCall, has_leased: bool) -> ToolResult:
    """Run one browser tool under a fresh lease; raises NeedsPerson on human control."""
    if run.computer is None:
        return ToolResult(content="The run has no computer assigned.", isError=True, category="invalid")
    arguments = TOOL_ARGUMENTS[call.tool].model_validate(call.arguments).model_dump(exclude_none=True)
    timeout = LOGIN_CALL_TIMEOUT_SECONDS if call.tool == "browser_login" else 25.0
    try:
        client = ExecutorClient(run.computer, timeout=timeout)
        if has_leased and client.status().get("control") == "released":
            raise NeedsPerson("A person handed control back; the run waits for an explicit continuation.")
        lease_id = client.lease_acquire()
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        # Never an availability category: nothing may re-run a tool on its own.
        return ToolResult(content=f"The computer is not available: {exc.message}", isError=True, category="unprocessable")
    try:
        binding = None
        if call.tool == "browser_login":
            arguments["browser"] = (run.agent_config or {}).get("browser", {})
            # The credential is read for the run's account, after the executor re-checks this binding.
            binding = {"account_id": str(run.account_id), "computer_binding": str(run.computer_binding or "")}
        reply = client.action(lease_id, call.tool, binding=binding, **arguments)
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        if exc.reason in ("lease_invalid",):
            raise NeedsPerson("The agent's control of the computer was taken away.") from None
        if call.tool == "browser_login":
            # The answer was lost: nothing is proven about the credential, and nothing repeats it.
            return ToolResult(
                content="The login did not complete: the computer did not answer in time. Nothing is known about "
                "the credential. Take a snapshot of the page (for example with extract_text) and call "
                "browser_login again if it still needs a login.",
                isError=True,
                code="browser.login_timeout",
                category="unprocessable",
            )
        code = "browser.egress_refused" if exc.reason == "egress_refused" else None
        return ToolResult(content=exc.message, isError=True, code=code, category="unprocessable")
    finally:
        try:
            client.lease_release(lease_id)
        except ExecutorError:
            pass
    return _result_of(call.tool, reply)


def _result_of(tool: str, reply: dict[str, Any]) -> ToolResult:
    if tool == "browser_login":
        return ToolResult.model_validate(reply["tool_result"])
    if tool == "extract_text":
        text = str(reply.get("text", ""))
        limit = settings.RAM_TOOL_RESULT_MAX_CHARS
        suffix = " [truncated]" if reply.get("truncated") or len(text) > limit else ""
        return ToolResult(content=text[:limit] + suffix)
    if tool == "navigate":
        # Origin and path only: a query or fragment may carry a one-time token.
        parts = urlsplit(str(reply.get("url", "")))
        return ToolResult(content=f"Navigated; the page is {urlunsplit((parts.scheme, parts.netloc, parts.path, '', ''))}.")
    return ToolResult(content="Done.")
