"""The links a run hands out: locators on this server's origin, never capabilities, and the
one binding check every link to a computer (and every step, continue and credential read) uses."""

from urllib.parse import urlencode

from django.conf import settings

from runs.contracts import Viewer
from runs.errors import RunBindingChanged
from runs.models import Run

BINDING_CHANGED = RunBindingChanged.message_default


def intervention_url(run: Run) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/tasks/{run.id}/intervention"


def viewer_url(computer_id: str) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/view?{urlencode({'computer_id': computer_id})}"


def run_binding_holds(run: Run) -> bool:
    """The run's binding (account, computer, computer binding) is the computer's current one.

    The one check behind every step, continue, credential read, descriptor and viewer link.
    """
    computer = run.computer
    return (
        computer is not None
        and computer.is_active
        and computer.account_id == run.account_id
        and run.computer_binding is not None
        and run.computer_binding == computer.binding
    )


def bound_viewer(run: Run) -> Viewer | None:
    """The viewer of the run's computer, only while the binding holds (no link is made up)."""
    if not run_binding_holds(run) or run.computer_id is None:
        return None
    handle = run.computer_handle or ""
    return Viewer(computer_id=handle, url=viewer_url(handle), requires_login=True)
