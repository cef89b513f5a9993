"""The pause-kind registry: one module per kind, one ``PauseKind`` each.

Every place that depends on a pause's kind reads this registry:
``required_action``, the descriptor and its texts, the intervention page and
what opening does, cancel's cleanup, the agent's ``request_*`` tools, the
list filter and the demo. An unknown kind is impossible to open: it has no
entry, and ``pause_kind`` refuses it.

Adding a kind is one module here (a ``PauseKind`` subclass and its ``KIND``),
its pause and ``required_action`` models in ``runs/contracts.py``, one line
below, and its tests.
"""

from runs.pauses import connection, continue_, credential, credits, takeover
from runs.pauses.base import DemoPlan, InterventionTexts, OpenIntervention, OpenState, PauseKind

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


__all__ = [
    "PAUSE_KINDS",
    "DemoPlan",
    "InterventionTexts",
    "OpenIntervention",
    "OpenState",
    "PauseKind",
    "UnknownPauseKind",
    "pause_kind",
]
