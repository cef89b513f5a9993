"""What a pause kind is: everything about one kind in one class.

A kind says how its ``required_action`` is built, whether a person resolves it
on an intervention page (and then: the descriptor's kind, the checks that the
intervention is still open, the server's texts for the person, what opening
does, where opening sends the person), what cancelling the run cleans up, how
an agent's tool call opens it, and how the demo reaches it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from pydantic import BaseModel

from accounts.models import Account
from runs.contracts import HumanAction
from runs.models import ConnectionRequest, CredentialRequest, Run, RunStep

# What the descriptor says of the reason a run paused, for every kind with a page.
REASON_PROGRESS = {
    "authentication": "The task paused at a sign-in step.",
    "captcha": "The task paused at a CAPTCHA challenge.",
    "verification": "The task paused at a verification step (for example a one-time code).",
    "missing_information": "The task paused because it needs information it does not have.",
    "authorization_required": "The task paused because it needs your authorization.",
    "other": "The task paused and needs a person.",
}


class InterventionTexts(NamedTuple):
    """Server texts for the person, per kind and reason; never from model output."""

    progress: str
    user_action: str
    next_step: str


@dataclass(frozen=True)
class OpenState:
    """An open intervention's state and the request row behind it, if any."""

    state: str = "pending"
    credential_request: CredentialRequest | None = None
    connection_request: ConnectionRequest | None = None


@dataclass(frozen=True)
class OpenIntervention:
    """An intervention that a person may act on right now."""

    run: Run
    pause: str  # the pause kind (a key of the registry)
    kind: str  # the descriptor's kind
    state: str
    reason: str
    credential_request: CredentialRequest | None
    connection_request: ConnectionRequest | None


# Re-checks the intervention after a change (the run, its binding, its request), raising when it closed.
Recheck = Callable[[], OpenIntervention]


@dataclass(frozen=True)
class DemoPlan:
    """Scripted steps that bring a real run to this pause: steps, budget, price per model call."""

    steps: list[dict[str, Any]]
    max_model_calls: int = 5
    microcredits_per_model_call: int = 0


class PauseKind:
    """One pause kind. Subclasses set the class attributes and override what applies."""

    name: ClassVar[str]
    # The pause's persisted model (``runs.contracts``: TakeoverPause, ...).
    model: ClassVar[type[BaseModel]]
    # The descriptor's kind, or None when no person's page resolves this pause.
    descriptor_kind: ClassVar[str | None] = None
    # Why there is no intervention for a kind without a page (a 409 message).
    no_page_message: ClassVar[str] = ""
    # What the intervention page says opening does, and its button.
    what_opening_does: ClassVar[str] = ""
    open_label: ClassVar[str] = ""
    # Texts per descriptor state: (user_action, next_step).
    action_texts: ClassVar[tuple[str, str]] = ("", "")

    # --- required_action --------------------------------------------------------
    def required_action(self, *, run: Run, pause: Any, human_action: HumanAction) -> BaseModel:
        raise NotImplementedError

    # --- the intervention page (kinds with a descriptor_kind) ----------------------
    def intervention(self, *, run: Run, pause: Any) -> OpenState:
        """Check the kind's own request is still open; raise ``InterventionUnavailable`` when not."""
        return OpenState()

    def texts(self, *, reason: str, state: str) -> InterventionTexts:
        user_action, next_step = self.action_texts
        return InterventionTexts(REASON_PROGRESS.get(reason, REASON_PROGRESS["other"]), user_action, next_step)

    def descriptor_request(self, *, current: OpenIntervention) -> dict[str, Any]:
        """The descriptor's ``request_id`` and ``expires_at`` for this kind."""
        return {}

    def open(self, *, current: OpenIntervention, recheck: Recheck) -> str:
        """Do what opening does and return where the person's browser goes next.

        The intervention was checked just before; ``recheck`` checks it again
        after what opening changed, so a run cancelled meanwhile opens nothing.
        """
        raise NotImplementedError

    # --- the run's life -------------------------------------------------------------
    def request(self, *, run: Run, step: RunStep, arguments: Any) -> str | None:
        """Pause ``run`` on this kind from an agent's tool call; returns a note for the agent, if any."""
        raise NotImplementedError

    def continue_check(self, *, account: Account, pause: Any) -> None:
        """Refuse continuing while this kind's condition still holds (row locks are held by the caller)."""

    def cancel(self, *, run: Run) -> None:
        """What cancelling the run ends of this kind (its open requests)."""

    def demo(self, *, origin: str, account: Account) -> DemoPlan:
        raise NotImplementedError
