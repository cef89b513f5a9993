"""``connection``: a person authorizes a Google connection on the Connections page."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from runs.contracts import ConnectionAction, ConnectionPause, HumanAction
from runs.errors import InterventionUnavailable
from runs.models import ConnectionRequest, Run, RunStep
from runs.pauses.base import DemoPlan, OpenIntervention, OpenState, PauseKind, Recheck, Unavailable
from runs.state import run_event_append

CONNECTIONS_PAGE = "/connections"


def connection_request_pause(*, run: Run, capabilities: list[str]) -> ConnectionRequest:
    """Create a Google connection request and pause the run on it."""
    with transaction.atomic():
        request = ConnectionRequest.objects.create(run=run, provider="google", capabilities=capabilities)
        run_event_append(run=run, kind="connection_requested", data={"provider": "google", "capabilities": capabilities})
        KIND.pause(
            run=run,
            pause=ConnectionPause(kind="connection", reason="authorization_required", request_id=request.id),
        )
    return request


class Connection(PauseKind):
    name = "connection"
    model = ConnectionPause
    request_relation = "connection_requests"
    descriptor_kind = "google_connection"
    words = "Authorize a Google connection"
    opened_note = "Once Google authorized the connection, the task's operator continues the task explicitly."
    what_opening_does = (
        "Opening takes you to Connections, where you can review the Google permissions the task asks for "
        "and authorize them."
    )
    open_label = "Open Connections"
    action_texts = (
        "Open Connections, review the requested Google permissions and authorize them if you agree.",
        "Check the connection is authorized, then ask for an explicit continuation of the task.",
    )

    def required_action(self, *, run: Run, pause: ConnectionPause, human_action: HumanAction) -> ConnectionAction:
        # From the run's requests, which a list prefetches: no query per run.
        connection = next(r for r in run.connection_requests.all() if r.pk == pause.request_id)
        return ConnectionAction(
            version=1,
            resume="explicit_continue",
            kind="connection",
            reason=pause.reason,
            provider="google",
            capabilities=connection.capabilities,
            human_action=human_action,
        )

    def intervention(self, *, run: Run, pause: ConnectionPause) -> OpenState:
        request = ConnectionRequest.objects.filter(pk=pause.request_id, run=run).first()
        if request is None or request.state != ConnectionRequest.State.PENDING:
            raise InterventionUnavailable("The connection request is no longer pending; check the run and continue it.")
        return OpenState(connection_request=request)

    def unavailable(self, *, run: Run, pause: ConnectionPause) -> Unavailable | None:
        connection = ConnectionRequest.objects.filter(pk=pause.request_id, run=run).first()
        if connection is not None and connection.state == ConnectionRequest.State.AUTHORIZED:
            return Unavailable(
                "Google already authorized",
                "The connection is authorized. The task continues when its operator asks for it explicitly.",
            )
        return None

    def descriptor_request(self, *, current: OpenIntervention) -> dict[str, Any]:
        # The spec's google_connection descriptor names the run as its request.
        return {"request_id": current.run.id}

    def open(self, *, current: OpenIntervention, recheck: Recheck) -> str:
        run_event_append(run=current.run, kind="intervention_opened", data={"kind": self.descriptor_kind})
        recheck()
        return CONNECTIONS_PAGE

    def request(self, *, run: Run, step: RunStep, arguments: Any) -> str | None:
        connection_request_pause(run=run, capabilities=arguments.capabilities)
        return None

    def cancel(self, *, run: Run) -> None:
        ConnectionRequest.objects.filter(run=run, state=ConnectionRequest.State.PENDING).update(
            state=ConnectionRequest.State.CANCELLED
        )

    def demo(self, *, origin: str, account: Any) -> DemoPlan:
        step = {"tool": "request_connection", "arguments": {"capabilities": ["gmail.readonly", "calendar.readonly"]}}
        return DemoPlan([step])


KIND = Connection()
