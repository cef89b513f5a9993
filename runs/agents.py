"""The agent interface: observe, decide, call a tool.

An agent is asked for one decision at a time; each decision is one model call,
counted on the run. It sees an ``Observation`` (the step number, the current
page as the executor reports it, and the last tool result, all secret-free)
and returns a ``Decision``: one tool call plus the agent's own resumable state.

To plug in an LLM agent, implement ``Agent.decide`` and register it in
``AGENTS`` under a name that a run's ``agent.type`` selects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from django.conf import settings
from pydantic import ValidationError

from runs.page_words import dialogs_summary, tabs_summary
from runs.tool_calls import ScriptedStep, ToolCall, tool_schemas


@dataclass(frozen=True)
class Observation:
    step: int
    page: dict[str, Any]
    last_result: dict[str, Any] | None


@dataclass(frozen=True)
class Decision:
    call: ToolCall
    state: dict[str, Any] = field(default_factory=dict)
    # A tool error (``isError``) ends the run ``failed`` (a scripted step without ``on_error: continue``).
    stop_on_error: bool = False


class Agent(Protocol):
    # Whether ``decide`` reads ``observation.page``: the loop asks the executor for it only then.
    observes_page: bool

    def decide(self, *, task: dict[str, Any], state: dict[str, Any], observation: Observation) -> Decision: ...


class ScriptedAgent:
    """Plays ``task.steps`` in order, one tool call per decision.

    Its cursor lives in the run's agent state, so a continuation resumes after
    the step that paused instead of replaying the earlier sequence. With no
    steps left it finishes with the last extracted text as output. A step whose
    tool answers an error (``isError``) fails the run with that error, unless
    the step says ``"on_error": "continue"``. It never reads the page: ``observation.page``
    stays empty and the loop spends no call to the executor on it.
    """

    observes_page = False

    def decide(self, *, task: dict[str, Any], state: dict[str, Any], observation: Observation) -> Decision:
        steps = task.get("steps") or []
        cursor = int(state.get("cursor", 0))
        if cursor >= len(steps):
            output = (observation.last_result or {}).get("content", "")
            return Decision(ToolCall(tool="finish", arguments={"output": output}), {**state, "cursor": cursor})
        try:
            step = ScriptedStep.model_validate(steps[cursor])
        except ValidationError:
            # A run stored before its tool's arguments were tightened: it stops cleanly, never half-runs.
            call = ToolCall(
                tool="fail",
                arguments={"error": f"Step {cursor + 1} does not fit its tool's arguments; create a new run."},
            )
            return Decision(call, {**state, "cursor": cursor + 1})
        return Decision(step.call(), {**state, "cursor": cursor + 1}, stop_on_error=step.on_error == "fail")


AGENTS: dict[str, Callable[[], Agent]] = {"scripted": ScriptedAgent}


def agent_for(config: dict[str, Any]) -> Agent:
    return AGENTS[config.get("type", "scripted")]()


SYSTEM_PROMPT = (
    "You operate a web browser for a task. Each turn, call exactly one tool. "
    "Use browser_login to sign in to a portal with a stored credential id; never ask for or type passwords. "
    "When a person is needed (a CAPTCHA, MFA, a missing credential, an authorization), call the matching "
    "request_* tool and stop. Call finish with the answer when the task is done, or fail when it cannot be done. "
    "Each tool result is JSON: content, isError, and for errors a code and a category. isError means the tool "
    "did not complete (for browser_login: nothing is known about the credential); a portal refusing a "
    "credential is a normal result (isError false)."
)
HISTORY_LIMIT = 20


class OpenAICompatibleAgent:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint with tool calling.

    Enabled only by settings (``RAM_LLM_BASE_URL``, ``RAM_LLM_API_KEY``,
    ``RAM_LLM_MODEL``). The model sees the goal, the page's address and the last
    tool results, never a secret; its reply must be exactly one tool call.
    """

    observes_page = True

    def decide(self, *, task: dict[str, Any], state: dict[str, Any], observation: Observation) -> Decision:
        history = list(state.get("history", []))
        if observation.last_result is not None and history:
            history[-1] = {**history[-1], "result": model_visible_result(observation.last_result)}
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Task: {task.get('goal', '')}"},
        ]
        for entry in history[-HISTORY_LIMIT:]:
            messages.append({"role": "assistant", "content": f"Called {entry['tool']} with {entry['arguments']}"})
            result = entry.get("result")
            shown = json.dumps(result, ensure_ascii=False) if isinstance(result, dict) else str(result or "(none)")
            messages.append({"role": "user", "content": f"Result: {shown}"})
        where = f"The browser is at {observation.page.get('url') or 'an unknown page'}."
        tabs = observation.page.get("tabs") or []
        if len(tabs) > 1:  # a popup or a new tab opened: the model sees it and can switch
            where += f" Open tabs: {tabs_summary(tabs)}."
        dialogs = observation.page.get("dialogs") or []
        if dialogs:  # a dialog blocks its page: the model answers it (dialog_answer) or a person does
            where += (
                " Dialogs waiting for an answer (use dialog_answer; a site's sign-in prompt: auth_answer): "
                f"{dialogs_summary(dialogs)}."
            )
        messages.append({"role": "user", "content": where})
        tools = tool_schemas()
        response = httpx.post(
            f"{settings.RAM_LLM_BASE_URL.rstrip('/')}/chat/completions",
            headers={"Authorization": f"Bearer {settings.RAM_LLM_API_KEY}"},
            json={"model": settings.RAM_LLM_MODEL, "messages": messages, "tools": tools, "tool_choice": "required"},
            timeout=60,
        )
        try:
            response.raise_for_status()
            function = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
            call = ToolCall(tool=function["name"], arguments=json.loads(function["arguments"] or "{}"))
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError, ValidationError):
            call = ToolCall(tool="fail", arguments={"error": "The model did not return one valid tool call."})
        history.append({"tool": call.tool, "arguments": _safe_arguments(call)})
        return Decision(call, {**state, "history": history[-HISTORY_LIMIT:]})


def state_withheld(state: dict[str, Any]) -> dict[str, Any]:
    """The agent's state with its record of the call just decided withheld, as its step's summary is
    (the call carried a secret the computer's browser holds): a model's history keeps only the tool."""
    history = list(state.get("history") or [])
    if not history:
        return state
    history[-1] = {**history[-1], "arguments": {"withheld": True}}
    return {**state, "history": history}


def model_visible_result(result: dict[str, Any]) -> dict[str, Any]:
    """The structured tool result a model sees: its text (bounded), ``isError``, and ``code`` and
    ``category`` when the tool gave them, so "refused" and "did not finish" never hang on wording."""
    shown: dict[str, Any] = {"content": str(result.get("content", ""))[:2000], "isError": bool(result.get("isError"))}
    for name in ("code", "category"):
        if result.get(name):
            shown[name] = str(result[name])
    return shown


def _safe_arguments(call: ToolCall) -> dict[str, Any]:
    """What the history keeps of a call: the tool's secret-free summary (typed text only as its length)."""
    return {k: v for k, v in call.spec.summary(call.tool, call.parsed()).items() if k != "tool"}


AGENTS["openai_compatible"] = OpenAICompatibleAgent
