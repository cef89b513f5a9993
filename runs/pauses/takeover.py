"""``takeover``: a person takes control of the run's computer on the clean screen."""

from __future__ import annotations

from typing import Any

from runs.contracts import HumanAction, TakeoverAction, TakeoverPause
from runs.errors import InterventionUnavailable
from runs.links import bound_viewer
from runs.models import Run, RunStep
from runs.pauses.base import DemoPlan, OpenIntervention, PauseKind, Recheck
from runs.state import run_event_append


class Takeover(PauseKind):
    name = "takeover"
    model = TakeoverPause
    keeps_computer = True
    descriptor_kind = "human_control"
    words = "Take over the computer"
    opened_note = (
        "Once you have finished and released control, the task's operator continues the task explicitly; "
        "the agent never takes the computer back by itself."
    )
    what_opening_does = (
        "Opening takes you to the clean screen of the task's computer, where you can take control, "
        "finish the step and release control."
    )
    open_label = "Open the computer's screen"
    action_texts = (
        "Open the task's computer screen, take control, complete the step yourself, then release control.",
        "Check the screen shows the step is done, then ask for an explicit continuation of the task.",
    )

    def required_action(self, *, run: Run, pause: TakeoverPause, human_action: HumanAction) -> TakeoverAction:
        return TakeoverAction(
            version=1,
            resume="explicit_continue",
            kind="takeover",
            reason=pause.reason,
            # The same binding check as the descriptor: no link to a computer the run lost.
            viewer=bound_viewer(run),
            human_action=human_action,
        )

    def open(self, *, current: OpenIntervention, recheck: Recheck) -> str:
        run = current.run
        run_event_append(run=run, kind="intervention_opened", data={"kind": self.descriptor_kind})
        recheck()
        viewer = bound_viewer(run)
        if viewer is None:
            raise InterventionUnavailable("The run's computer binding was revoked; this intervention is no longer available.")
        return viewer.url

    def request(self, *, run: Run, step: RunStep, arguments: Any) -> str | None:
        self.pause(run=run, pause=TakeoverPause(kind="takeover", reason=arguments.reason))
        return None

    def demo(self, *, origin: str, account: Any) -> DemoPlan:
        return DemoPlan([{"tool": "request_takeover", "arguments": {"reason": "captcha"}}])


KIND = Takeover()
