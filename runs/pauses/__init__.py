"""The pause-kind registry: one module per kind, one ``PauseKind`` each.

Every place that depends on a pause's kind reads this registry: writing the
pause (whether the run keeps its computer), ``required_action`` and the rows
a list prefetches for it, the descriptor and its texts, the task pages' words,
what they say when the intervention is no longer available, what opening does,
cancel's cleanup, the agent's ``request_*`` tools, notifications, the list
filter and the demo. No module outside this package compares a pause's kind
with a name (``tests/runs/test_pauses.py`` checks). An unknown kind is
impossible to open: it has no entry, and ``pause_kind`` refuses it.

Adding a kind is one module here (a ``PauseKind`` subclass and its ``KIND``)
and one line below, its pause and ``required_action`` models in the unions of
``runs/contracts.py`` (the persisted result and the API's schema are validated
with them before this registry loads), and its tests.
"""

from typing import Any

from runs.models import Run
from runs.pauses import connection, continue_, credential, credits, takeover
from runs.pauses.base import (
    REASON_WORDS,
    DemoPlan,
    InterventionTexts,
    OpenIntervention,
    OpenState,
    PauseKind,
    Unavailable,
    WaitingFacts,
)

PAUSE_KINDS: dict[str, PauseKind] = {
    kind.name: kind for kind in (takeover.KIND, credential.KIND, connection.KIND, continue_.KIND, credits.KIND)
}


class UnknownPauseKind(LookupError):
    """A pause kind with no module in the registry: nothing can open, list or build it."""


def pause_kind(name: str) -> PauseKind:
    try:
        return PAUSE_KINDS[name]
    except KeyError:
        raise UnknownPauseKind(f"No pause kind {name!r} is registered.") from None


def run_pause(*, run: Run, pause: Any) -> Run:
    """Persist a validated pause through its kind's record; the run waits for an explicit continuation."""
    return pause_kind(pause.kind).pause(run=run, pause=pause)


__all__ = [
    "PAUSE_KINDS",
    "REASON_WORDS",
    "DemoPlan",
    "InterventionTexts",
    "OpenIntervention",
    "OpenState",
    "PauseKind",
    "Unavailable",
    "UnknownPauseKind",
    "WaitingFacts",
    "pause_kind",
    "run_pause",
]
