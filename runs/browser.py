"""Browser tools run on the run's computer through the executor.

A browser tool runs under an agent lease acquired for the step and released
after it. A person's takeover makes the call fail cleanly; a run that once
held a lease never takes control back after a person released it: it pauses
and waits for an explicit continuation. Tool results are secret-free.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from executor.client import ExecutorClient, ExecutorError, HumanHasControl
from executor.wire import BROWSER_LOGIN_MARGIN_SECONDS
from runs.contracts import ToolResult
from runs.models import Run
from runs.tools import ToolCall

logger = logging.getLogger(__name__)


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
    """Run one browser tool's executor action under a fresh lease; raises NeedsPerson on human control.

    A tool with an end-to-end budget (``browser_login``) counts it from here: the lease and the
    run's context come out of it, the executor gets what is left, and every call to the executor
    ends within the budget plus ``BROWSER_LOGIN_MARGIN_SECONDS``.
    """
    started = time.monotonic()
    tool = call.spec
    if tool.action is None:
        raise ValueError(f"{tool.name} does not drive the browser.")
    if run.computer is None:
        return ToolResult(content="The run has no computer assigned.", isError=True, category="invalid")
    arguments = call.parsed().model_dump(mode="json", exclude_none=True)
    budget = tool.budget_seconds() if tool.budget_seconds is not None else None
    deadline = started + budget + BROWSER_LOGIN_MARGIN_SECONDS if budget is not None else None
    try:
        client = ExecutorClient(run.computer, timeout=tool.timeout_seconds(), deadline=deadline)
        if has_leased and client.status().get("control") == "released":
            raise NeedsPerson("A person handed control back; the run waits for an explicit continuation.")
        lease_id = client.lease_acquire()
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        if tool.executor_failure is not None:
            return tool.executor_failure(exc.message)
        # Never an availability category: nothing may re-run a tool on its own.
        return ToolResult(content=f"The computer is not available: {exc.message}", isError=True, category="unprocessable")
    try:
        context = tool.context(run)
        if budget is not None:
            left = budget - (time.monotonic() - started)
            if left <= 0:
                raise ExecutorError("the time budget was spent before the call reached the computer", "timeout")
            context = {**(context or {}), "budget_seconds": left}
        reply = client.action(lease_id, tool.action, context=context, **arguments)
    except HumanHasControl as exc:
        raise NeedsPerson(exc.message) from None
    except ExecutorError as exc:
        if exc.reason in ("lease_invalid",):
            raise NeedsPerson("The agent's control of the computer was taken away.") from None
        if exc.reason == "egress_refused":
            # The browser's egress policy refused the destination: a normal tool error naming it.
            return ToolResult(content=exc.message, isError=True, code="browser.egress_refused", category="unprocessable")
        if tool.executor_failure is not None:
            return tool.executor_failure(exc.message)
        return ToolResult(content=exc.message, isError=True, category="unprocessable")
    finally:
        try:
            client.lease_release(lease_id)
        except ExecutorError:
            pass
    return tool.result(reply)
