"""Reads of runs: lookups scoped to an account, ``required_action`` and the
intervention descriptor, both derived from the persisted result and the
current state of the run, its computer and its request."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from accounts.models import Account
from ramsite.errors import ServiceError
from runs.contracts import (
    RUN_RESULT,
    Budget,
    ConnectionAction,
    ContinueAction,
    CredentialAction,
    Credits,
    CreditsAction,
    HumanAction,
    InterventionDescriptor,
    InterventionEnvelope,
    NeedsInputResult,
    RunOut,
    TakeoverAction,
    Viewer,
)
from runs.models import ConnectionRequest, CredentialRequest, Run
from runs.texts import intervention_texts

# Pause kinds a person resolves through an intervention page, and its kind there.
DESCRIPTOR_KIND = {"takeover": "human_control", "credential": "credential", "connection": "google_connection"}


def parse_uuid(value: str, *, what: str = "run") -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise ServiceError(404, f"No such {what}.") from None


def run_for_account(*, account: Account, run_id: str | uuid.UUID) -> Run:
    """The account's run, or 404 whether it does not exist or belongs to another account."""
    run = (
        Run.objects.select_related("computer", "account")
        .filter(pk=parse_uuid(str(run_id)), account=account)
        .first()
    )
    if run is None:
        raise ServiceError(404, "No such run.")
    return run


def runs_for_account(
    *,
    account: Account,
    status: str | None = None,
    kind: str | None = None,
    computer_id: str | None = None,
) -> QuerySet[Run]:
    qs = Run.objects.filter(account=account).select_related("computer", "account", "continuation")
    if status:
        if status not in Run.Status.values:
            raise ServiceError(400, f"Invalid request: status must be one of {', '.join(Run.Status.values)}.")
        qs = qs.filter(status=status)
    if kind:
        if kind not in ("takeover", "credential", "connection", "continue", "credits"):
            raise ServiceError(400, "Invalid request: kind must be takeover, credential, connection, continue or credits.")
        qs = qs.filter(status=Run.Status.WAITING_FOR_INPUT, pause_kind=kind, continuation__isnull=True)
    if computer_id:
        qs = qs.filter(computer_id=computer_id)
    return qs


def runs_page(
    *,
    account: Account,
    status: str | None = None,
    kind: str | None = None,
    computer_id: str | None = None,
    limit: int = 20,
    offset: int = 0,
    observer: bool = False,
) -> dict[str, Any]:
    """A page ``{runs, count, next_offset}`` of the account's runs, newest first (``RunList`` on the wire)."""
    qs = runs_for_account(account=account, status=status, kind=kind, computer_id=computer_id)
    count = qs.count()
    page = [run_to_wire(run, observer=observer) for run in qs[offset : offset + limit]]
    next_offset = offset + limit if offset + limit < count else None
    return {"runs": page, "count": count, "next_offset": next_offset}


def continuation_id(run: Run) -> uuid.UUID | None:
    try:
        return run.continuation.id
    except Run.continuation.RelatedObjectDoesNotExist:
        return None


def intervention_url(run: Run) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/tasks/{run.id}/intervention"


def viewer_url(computer_id: str) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/view?{urlencode({'computer_id': computer_id})}"


BINDING_CHANGED = (
    "The run's computer binding changed (the computer was moved, revoked or removed); "
    "the run cannot use it any more."
)


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


def run_viewer(run: Run) -> Viewer | None:
    """The viewer of the run's computer, only while the binding holds (no link is made up)."""
    if not run_binding_holds(run) or run.computer_id is None:
        return None
    return Viewer(computer_id=run.computer_id, url=viewer_url(run.computer_id), requires_login=True)


def current_pause(run: Run) -> NeedsInputResult | None:
    """The run's pause while it waits for input and has not been continued."""
    if run.status != Run.Status.WAITING_FOR_INPUT or run.result is None:
        return None
    if continuation_id(run) is not None:
        return None
    result = RUN_RESULT.validate_python(run.result)
    return result if isinstance(result, NeedsInputResult) else None


def run_required_action(*, run: Run) -> dict[str, Any] | None:
    """``required_action`` per the spec, or None when the run has no open pause."""
    paused = current_pause(run)
    if paused is None:
        return None
    pause = paused.pause
    human_action = HumanAction(url=intervention_url(run), requires_login=True)
    common: dict[str, Any] = {"version": 1, "resume": "explicit_continue", "reason": pause.reason}
    action: Any
    if pause.kind == "takeover":
        action = TakeoverAction(
            kind="takeover",
            viewer=run_viewer(run),
            human_action=human_action,
            **common,
        )
    elif pause.kind == "credential":
        request = CredentialRequest.objects.get(pk=pause.request_id)
        action = CredentialAction(
            kind="credential", request_id=request.id, expires_at=request.expires_at, human_action=human_action, **common
        )
    elif pause.kind == "connection":
        connection = ConnectionRequest.objects.get(pk=pause.request_id)
        action = ConnectionAction(
            kind="connection",
            provider="google",
            capabilities=connection.capabilities,
            human_action=human_action,
            **common,
        )
    elif pause.kind == "continue":
        action = ContinueAction(
            kind="continue",
            budget=Budget(
                model_calls=run.model_calls,
                max_model_calls=run.max_model_calls,
                remaining_model_calls=max(0, run.max_model_calls - run.model_calls),
            ),
            **common,
        )
    else:
        required, available = pause.required_microcredits, run.account.microcredit_balance
        action = CreditsAction(
            kind="credits",
            credits=Credits(
                required_microcredits=str(required),
                available_microcredits=str(available),
                missing_microcredits=str(max(0, required - available)),
            ),
            **common,
        )
    return action.model_dump(mode="json")


LABEL_SHOWN_MAX = 60
_LINKISH = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)\S*|\S+\.(?:com|net|org|io|dev|app|co|me|info|biz)\b\S*")


def label_from_task(label: str) -> str:
    """The agent's label as a person may see it: one line, at most 60 characters, without links.

    It is always shown quoted, as the task's words, never as the server's.
    """
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in label).split())
    text = _LINKISH.sub("[link removed]", text)
    return text if len(text) <= LABEL_SHOWN_MAX else text[: LABEL_SHOWN_MAX - 1].rstrip() + "…"


def credential_replaced_by(request: CredentialRequest) -> CredentialRequest | None:
    """Another request of the same account whose credential is stored under the same id, if any:
    saving this one would overwrite it."""
    if not request.credential_id:
        return None
    return (
        CredentialRequest.objects.filter(
            run__account_id=request.run.account_id,
            credential_id=request.credential_id,
            state=CredentialRequest.State.CREDENTIAL_SAVED,
        )
        .exclude(pk=request.pk)
        .order_by("-saved_at")
        .first()
    )


def task_redacted(task: dict[str, Any], *, upto: int | None = None) -> dict[str, Any]:
    """The task with the text of its scripted ``type`` steps emptied (all of them, or those before ``upto``).

    What a ``type`` step types may be private: it exists only until its step runs.
    """
    steps = task.get("steps")
    if not isinstance(steps, list):
        return task
    redacted = []
    for index, step in enumerate(steps):
        if (
            isinstance(step, dict)
            and step.get("tool") == "type"
            and isinstance(step.get("arguments"), dict)
            and (upto is None or index < upto)
        ):
            step = {**step, "arguments": {**step["arguments"], "text": ""}}
        redacted.append(step)
    return {**task, "steps": redacted}


def typed_lengths(task: dict[str, Any]) -> list[int]:
    """The length of each scripted ``type`` step's text (what staff may see of it)."""
    steps = task.get("steps") if isinstance(task.get("steps"), list) else []
    return [
        len(str(step["arguments"].get("text", "")))
        for step in steps or []
        if isinstance(step, dict) and step.get("tool") == "type" and isinstance(step.get("arguments"), dict)
    ]


def run_to_wire(run: Run, *, observer: bool = False) -> dict[str, Any]:
    """The run on the wire; a ``task_observer`` key never sees what a ``type`` step types."""
    return RunOut(
        id=run.id,
        status=run.status,  # type: ignore[arg-type]
        computer_id=run.computer_id,
        task=task_redacted(run.task) if observer else run.task,
        model_calls=run.model_calls,
        max_model_calls=run.max_model_calls,
        result=run.result,
        required_action=run_required_action(run=run),  # type: ignore[arg-type]
        continued_from=run.continued_from_id,
        continued_run_id=continuation_id(run),
        created_at=run.created_at,
        updated_at=run.updated_at,
    ).to_wire()


@dataclass(frozen=True)
class OpenIntervention:
    """An intervention that a person may act on right now."""

    run: Run
    kind: str  # descriptor kind
    state: str
    reason: str
    credential_request: CredentialRequest | None
    connection_request: ConnectionRequest | None


def intervention_current(*, run: Run) -> OpenIntervention:
    """Check the account, the run, the computer binding and the request; 409 when unavailable."""
    if not run.account.is_active:
        raise ServiceError(403, "The account is inactive.")
    if run.status == Run.Status.CANCELLED:
        raise ServiceError(409, "The run was cancelled; this intervention is no longer available.")
    next_id = continuation_id(run)
    if next_id is not None:
        raise ServiceError(
            409, "The run was already continued; this intervention is no longer available.", continued_run_id=str(next_id)
        )
    paused = current_pause(run)
    if paused is None:
        raise ServiceError(409, "The run is not waiting for a person.")
    pause = paused.pause
    if pause.kind not in DESCRIPTOR_KIND:
        raise ServiceError(
            409,
            f"A {pause.kind} pause needs no intervention page: "
            + ("top up the account, then continue the run." if pause.kind == "credits" else "continue the run explicitly."),
        )
    if not run_binding_holds(run):
        raise ServiceError(409, "The run's computer binding was revoked; this intervention is no longer available.")
    credential_request = connection_request = None
    state = "pending"
    if pause.kind == "credential":
        credential_request = CredentialRequest.objects.filter(pk=pause.request_id, run=run).first()
        if credential_request is None or credential_request.state in (
            CredentialRequest.State.CANCELLED,
            CredentialRequest.State.EXPIRED,
        ):
            raise ServiceError(409, "The credential request is no longer valid; ask for a new request.")
        if credential_request.state == CredentialRequest.State.PENDING and credential_request.expires_at <= timezone.now():
            raise ServiceError(409, "The credential request expired; cancel the run or ask for a new request.")
        state = credential_request.state
    elif pause.kind == "connection":
        connection_request = ConnectionRequest.objects.filter(pk=pause.request_id, run=run).first()
        if connection_request is None or connection_request.state != ConnectionRequest.State.PENDING:
            raise ServiceError(409, "The connection request is no longer pending; check the run and continue it.")
    return OpenIntervention(
        run=run,
        kind=DESCRIPTOR_KIND[pause.kind],
        state=state,
        reason=pause.reason,
        credential_request=credential_request,
        connection_request=connection_request,
    )


def intervention_descriptor(*, run: Run) -> InterventionEnvelope:
    """The safe descriptor: validated by its contract model before it leaves."""
    current = intervention_current(run=run)
    texts = intervention_texts(kind=current.kind, reason=current.reason, state=current.state)
    request = current.credential_request
    return InterventionEnvelope(
        intervention=InterventionDescriptor(
            version=1,
            run_id=run.id,
            computer_id=run.computer_id or "",
            kind=current.kind,  # type: ignore[arg-type]
            state=current.state,  # type: ignore[arg-type]
            reason=current.reason,  # type: ignore[arg-type]
            progress=texts.progress,
            user_action=texts.user_action,
            next_step=texts.next_step,
            request_id=request.id if request else (run.id if current.kind == "google_connection" else None),
            expires_at=request.expires_at if request else None,
            human_action=HumanAction(url=intervention_url(run), requires_login=True),
        )
    )


def connections_for_account(*, account: Account) -> tuple[list[ConnectionRequest], list[ConnectionRequest]]:
    """The account's Google requests still waiting on an open intervention, and its authorized connections."""
    pending = []
    for request in (
        ConnectionRequest.objects.filter(run__account=account, state=ConnectionRequest.State.PENDING)
        .select_related("run__account", "run__computer")
        .order_by("-created_at")[:50]
    ):
        try:
            current = intervention_current(run=request.run)
        except ServiceError:
            continue
        if current.connection_request is not None and current.connection_request.pk == request.pk:
            pending.append(request)
    authorized = list(
        ConnectionRequest.objects.filter(run__account=account, state=ConnectionRequest.State.AUTHORIZED).order_by(
            "-completed_at"
        )[:50]
    )
    return pending, authorized
