"""What a step is recorded with: its secret-free summary, checked against the secrets the run's
computer's browser holds before anything is recorded (``step_checked``), for the run loop and for
external runs alike."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from computers.client import ExecutorClient, ExecutorError
from runs.contracts import ToolResult
from runs.models import Run
from runs.tool_calls import ToolCall
from runs.tools import tool_named


def step_summary(call: ToolCall) -> dict[str, Any]:
    """A secret-free description of a tool call for the step record and events (the tool's own)."""
    return call.spec.summary(call.tool, call.parsed())


# The summary check runs before the step is recorded: it answers at once or the summary is withheld.
SUMMARY_CHECK_SECONDS = 5.0


def _strings_in(value: Any) -> bool:
    """Whether ``value`` holds a string among its values (a summary's keys are the tool's own)."""
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(_strings_in(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_strings_in(v) for v in value)
    return False


@dataclass(frozen=True)
class StepChecked:
    """What a step is recorded with: its summary (withheld when it carried a secret), and for a
    tool that does not drive the browser, the refusal it answers instead of running (``None``: it runs)."""

    summary: dict[str, Any]
    refused: ToolResult | None = None


# A call of a tool that does not drive the browser whose arguments carry a secret the computer's
# browser holds: nothing is done (the executor answers a browser tool's call so itself).
SECRET_IN_ARGUMENTS = ToolResult(
    content=(
        "This action was refused and nothing was done: its arguments carry a secret this computer's browser holds "
        "(a credential browser_login, auth_answer or a person typed). Secrets are never supplied by the agent."
    ),
    isError=True,
    code="browser.secret_in_arguments",
    category="invalid",
)
CHECK_UNANSWERED = ToolResult(
    content=(
        "This action was not done: the computer did not answer whether its arguments carry a secret its browser "
        "holds. Call the tool again."
    ),
    isError=True,
    category="unprocessable",
)


def _as_text(value: Any) -> Any:
    """``value`` with its numbers as their text: a number in a ``finish`` output may spell a secret (a code)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_text(v) for v in value]
    return value


@functools.cache
def _fixed_choices(tool: str) -> frozenset[str]:
    """The argument fields of ``tool`` whose values are the tool's own fixed choices (an enum such as
    ``request_takeover``'s ``reason``): they spell nothing of the agent's, so they are not asked
    about (a call made of them alone — a takeover while the computer hangs — waits for no check)."""
    properties = tool_named(tool).args.model_json_schema().get("properties", {})
    return frozenset(name for name, schema in properties.items() if "enum" in schema or "const" in schema)


def _carries_secret(run: Run, values: dict[str, Any]) -> bool | None:
    """Whether ``values`` carry a secret the run's computer's browser holds; ``None``: the question
    went unanswered (no answer in time, the connection lost after it). A computer whose executor
    cannot be reached (none running, not listening, another generation) holds none: False."""
    computer = run.computer
    if computer is None:
        return False
    try:
        return ExecutorClient(computer, timeout=SUMMARY_CHECK_SECONDS).arguments_check(values)
    except ExecutorError as exc:
        return None if exc.answer_lost or exc.reason == "timeout" else False


def step_checked(run: Run, call: ToolCall) -> StepChecked:
    """The summary a step is recorded (and its ``step_started`` event published) with, and for a
    tool that does not drive the browser, whether it runs.

    The agent's own strings are checked by the run's computer against the secrets its browser
    holds, before anything is recorded (``executor/taint.py``): for a browser tool the summary's
    (a URL, a selector: one that carries a secret — a right guess, which the executor then refuses
    as ``browser.secret_in_arguments`` — is withheld whole, ``{"tool": …, "withheld": true}``,
    never redacted in place, so no record or event holds the secret or says where it was); for
    every other tool (``finish``, ``fail``, the ``request_*`` tools) all its arguments, whose
    strings would be stored and shown (the run's output or error, a request's label): one that
    carries a secret is withheld the same way and refused with ``browser.secret_in_arguments``,
    nothing done. A check that went unanswered withholds too (and refuses a tool that does not
    drive the browser, nothing done); a computer with no executor that can be reached holds no
    browser, and the call is recorded as it is. Call it outside any transaction: it waits for the computer.
    """
    summary = step_summary(call)
    withheld = {"tool": call.tool, "withheld": True}
    if call.spec.browser:
        values = {k: v for k, v in summary.items() if k != "tool"}
        if not _strings_in(values):
            return StepChecked(summary)
        carries = _carries_secret(run, values)
        return StepChecked(withheld if carries is not False else summary)
    values = _as_text({k: v for k, v in call.arguments.items() if k not in _fixed_choices(call.tool)})
    if not _strings_in(values):
        return StepChecked(summary)
    carries = _carries_secret(run, values)
    if carries is False:
        return StepChecked(summary)
    return StepChecked(withheld, SECRET_IN_ARGUMENTS if carries else CHECK_UNANSWERED)
