"""What a pause kind is: everything about one kind in one class.

A kind says whether a run paused on it keeps its computer, which request rows
its ``required_action`` reads and how that is built, whether a person resolves
it on an intervention page (and then: the descriptor's kind, the page's words
for it and for its reasons, the checks that the intervention is still open,
what the page says when it no longer is, the server's texts for the person,
what opening does, where opening sends the person), what cancelling the run
cleans up, how an agent's tool call opens it, and how the demo reaches it.
No other module names a kind: they all read its record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from pydantic import BaseModel

from accounts.models import Account
from runs.contracts import HumanAction
from runs.models import ConnectionRequest, CredentialRequest, Run, RunStep
from runs.state import run_pause_write

# What the descriptor says of the reason a run paused, for every kind with a page.
REASON_PROGRESS = {
    "authentication": "The task paused at a sign-in step.",
    "captcha": "The task paused at a CAPTCHA challenge.",
    "verification": "The task paused at a verification step (for example a one-time code).",
    "missing_information": "The task paused because it needs information it does not have.",
    "authorization_required": "The task paused because it needs your authorization.",
    "other": "The task paused and needs a person.",
}


# What the task pages say of the reason a run paused (a reason of a kind's own adds to these).
REASON_WORDS = {
    "authentication": "a sign-in",
    "captcha": "a CAPTCHA",
    "verification": "a verification step",
    "missing_information": "missing information",
    "authorization_required": "an authorization",
    "other": "something only a person can do",
}


class Unavailable(NamedTuple):
    """Why an intervention cannot be acted on now: a title and what to do instead."""

    title: str
    message: str


class WaitingFacts(NamedTuple):
    """What the home page and notifications show of a run waiting on this kind besides its words."""

    portal_origin: str | None = None
    deadline: datetime | None = None


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
    # Whether a run paused on this kind keeps its computer (a takeover of that computer does);
    # any other pause lets the computer go to the next run in its queue.
    keeps_computer: ClassVar[bool] = False
    # The run's related request rows (``Run.<relation>``) that ``required_action`` reads, if any:
    # a list of runs prefetches them once per kind present on the page.
    request_relation: ClassVar[str | None] = None
    # The descriptor's kind, or None when no person's page resolves this pause.
    descriptor_kind: ClassVar[str | None] = None
    # What the task pages call this kind of intervention ("Take over the computer").
    words: ClassVar[str] = ""
    # Words for the reasons of this kind's own (the shared ones are ``REASON_WORDS``).
    own_reason_words: ClassVar[dict[str, str]] = {}
    # Whether the intervention page says when it was opened and what then follows (``opened_note``);
    # a kind whose request row records its one opening says so from the row instead.
    notes_opening: ClassVar[bool] = True
    opened_note: ClassVar[str] = ""
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

    def reason_words(self, reason: str) -> str:
        """What the task pages say of ``reason``; ``other``'s words for one they do not know."""
        return {**REASON_WORDS, **self.own_reason_words}.get(reason, REASON_WORDS["other"])

    # --- the intervention page (kinds with a descriptor_kind) ----------------------
    def intervention(self, *, run: Run, pause: Any) -> OpenState:
        """Check the kind's own request is still open; raise ``InterventionUnavailable`` when not."""
        return OpenState()

    def texts(self, *, reason: str, state: str) -> InterventionTexts:
        user_action, next_step = self.action_texts
        return InterventionTexts(REASON_PROGRESS.get(reason, REASON_PROGRESS["other"]), user_action, next_step)

    def unavailable(self, *, run: Run, pause: Any) -> Unavailable | None:
        """The page's own words when this kind's request can no longer be acted on (expired,
        withdrawn, already done), or None to say the generic ones."""
        return None

    def waiting(self, *, run: Run, pause: Any) -> WaitingFacts:
        """What is shown of a run waiting on this kind (its portal, its deadline)."""
        return WaitingFacts()

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
    def pause(self, *, run: Run, pause: Any) -> Run:
        """Persist ``pause`` (of this kind): the run waits for an explicit continuation, keeping
        its computer only when this kind does."""
        return run_pause_write(run=run, pause=pause, keeps_computer=self.keeps_computer)

    def request(self, *, run: Run, step: RunStep, arguments: Any) -> str | None:
        """Pause ``run`` on this kind from an agent's tool call; returns a note for the agent, if any."""
        raise NotImplementedError

    def continue_check(self, *, account: Account, pause: Any) -> None:
        """Refuse continuing while this kind's condition still holds (row locks are held by the caller)."""

    def cancel(self, *, run: Run) -> None:
        """What cancelling the run ends of this kind (its open requests)."""

    def demo(self, *, origin: str, account: Account) -> DemoPlan:
        raise NotImplementedError
