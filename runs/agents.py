"""The agent interface: observe, decide, call a tool.

An agent is asked for one decision at a time; each decision is one model call,
counted on the run. It sees an ``Observation`` (the step number, the current
page as the executor reports it, and the last tool result, all secret-free)
and returns a ``Decision``: one tool call plus the agent's own resumable state.

To plug in an LLM agent, implement ``Agent.decide`` and register it in
``AGENTS`` under a name that a run's ``agent.type`` selects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from runs.contracts import ToolCall


@dataclass(frozen=True)
class Observation:
    step: int
    page: dict[str, Any]
    last_result: dict[str, Any] | None


@dataclass(frozen=True)
class Decision:
    call: ToolCall
    state: dict[str, Any] = field(default_factory=dict)


class Agent(Protocol):
    def decide(self, *, task: dict[str, Any], state: dict[str, Any], observation: Observation) -> Decision: ...


class ScriptedAgent:
    """Plays ``task.steps`` in order, one tool call per decision.

    Its cursor lives in the run's agent state, so a continuation resumes after
    the step that paused instead of replaying the earlier sequence. With no
    steps left it finishes with the last extracted text as output.
    """

    def decide(self, *, task: dict[str, Any], state: dict[str, Any], observation: Observation) -> Decision:
        steps = task.get("steps") or []
        cursor = int(state.get("cursor", 0))
        if cursor >= len(steps):
            output = (observation.last_result or {}).get("content", "")
            return Decision(ToolCall(tool="finish", arguments={"output": output}), {**state, "cursor": cursor})
        return Decision(ToolCall.model_validate(steps[cursor]), {**state, "cursor": cursor + 1})


AGENTS: dict[str, Callable[[], Agent]] = {"scripted": ScriptedAgent}


def agent_for(config: dict[str, Any]) -> Agent:
    return AGENTS[config.get("type", "scripted")]()
