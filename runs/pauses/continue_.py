"""``continue``: the run spent its model-call budget; the harness continues it explicitly."""

from __future__ import annotations

from typing import Any

from runs.contracts import Budget, ContinueAction, ContinuePause, HumanAction
from runs.models import Run, RunStep
from runs.pauses.base import DemoPlan, PauseKind


class Continue(PauseKind):
    name = "continue"
    model = ContinuePause
    own_reason_words = {"max_model_calls_reached": "its model-call budget ran out"}
    no_page_message = "A continue pause needs no intervention page: continue the run explicitly."

    def required_action(self, *, run: Run, pause: ContinuePause, human_action: HumanAction) -> ContinueAction:
        return ContinueAction(
            version=1,
            resume="explicit_continue",
            kind="continue",
            reason=pause.reason,
            budget=Budget(
                model_calls=run.model_calls,
                max_model_calls=run.max_model_calls,
                remaining_model_calls=max(0, run.max_model_calls - run.model_calls),
            ),
        )

    def request(self, *, run: Run, step: RunStep | None, arguments: Any) -> str | None:
        self.pause(run=run, pause=ContinuePause(kind="continue", reason="max_model_calls_reached"))
        return None

    def demo(self, *, origin: str, account: Any) -> DemoPlan:
        # One model call allowed; the second decision finds the budget spent.
        # The pause is about the budget, not the page: a computer still starting does not end the run.
        step = {"tool": "navigate", "arguments": {"url": f"{origin}/accounts/login/"}, "on_error": "continue"}
        return DemoPlan([step] * 2, max_model_calls=1)


KIND = Continue()
