"""Reads of runs: lookups scoped to an account, ``required_action`` and the
intervention descriptor, both derived from the persisted result and the
current state of the run, its computer and its request."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from django.db.models import Count, QuerySet, Window, prefetch_related_objects
from pydantic import ValidationError

from accounts.errors import AccountInactive
from accounts.models import Account
from computers.models import Computer, DiagnosticArtifact
from core.contracts import COMPUTER_ID_RE
from core.errors import DomainError, NotFound
from core.prepared import Prepared
from runs.contracts import (
    RUN_RESULT,
    ArtifactOut,
    EventList,
    EventOut,
    HumanAction,
    InterventionDescriptor,
    InterventionEnvelope,
    NeedsInputResult,
    RequiredActionModel,
    RunList,
    RunOut,
    StepList,
    StepOut,
    ToolResult,
    ViewerOut,
)
from runs.errors import (
    ArtifactNotFound,
    InterventionUnavailable,
    InvalidFilter,
    NoInterventionPage,
    NoViewer,
    RunNotFound,
)
from runs.links import BINDING_CHANGED, bound_viewer, intervention_url, run_binding_holds  # noqa: F401 - re-exported
from runs.models import ConnectionRequest, CredentialRequest, Run, RunEvent, RunStep
from runs.pauses import PAUSE_KINDS, OpenIntervention, pause_kind
from runs.queue import queue_ahead, queue_position, queue_reason
from runs.tools import TOOLS


def parse_uuid(value: str, *, not_found: type[NotFound] = RunNotFound) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise not_found() from None


def _runs(
    shape: tuple[Any, ...],
    *,
    account: uuid.UUID,
    pk: uuid.UUID | None = None,
    status: str | None = None,
    kind: str | None = None,
    computer_id: str | None = None,
) -> QuerySet[Run, Any]:
    """The account's runs, filtered; ``shape`` says which query: ``("get",)`` one run with its
    computer, continuation and queue position, ``("count",)`` their number, ``("page", offset,
    limit)`` a page of them like ``get``'s, newest first."""
    qs = Run.objects.filter(account_id=account)
    if pk is not None:
        qs = qs.filter(pk=pk)
    if status is not None:
        qs = qs.filter(status=status)
    if kind is not None:
        qs = qs.filter(status=Run.Status.WAITING_FOR_INPUT, pause_kind=kind, continuation__isnull=True)
    if computer_id is not None:  # the computer's id within the account
        qs = qs.filter(computer__handle=computer_id)
    if shape[0] == "count":
        # One group (the account's): its size. ``count()`` would compile outside the prepared query.
        return qs.order_by().values("account_id").annotate(n=Count("id")).values_list("n", flat=True)
    qs = qs.select_related("computer", "continuation").annotate(queue_ahead=queue_ahead())
    if shape[0] == "page":
        _, offset, limit = shape
        # The page's total comes with its rows (one query, not two): the count of every matching row.
        qs = qs.only(*PAGE_FIELDS).annotate(page_total=Window(Count("id")))[offset : offset + limit]
    return qs


# The columns a page's ``run_out`` reads (its pause's required_action and queue position
# included), of the run, its computer and its continuation: most of a page's time was Django
# turning the other columns of 20 runs, their computers and continuations into Python values
# (timestamps, UUIDs, JSON the answer never shows). A field left out here would be read with a
# query of its own per run, which ``tests/runs/test_queries.py`` would count. The account is the
# caller's (``runs_page`` sets it).
PAGE_FIELDS = (
    "id",
    "computer_id",
    "computer_binding",
    "status",
    "task",
    "model_calls",
    "max_model_calls",
    "result",
    "pause_kind",
    "holds_computer",
    "continued_from_id",
    "created_at",
    "updated_at",
    "computer__id",
    "computer__handle",
    "computer__account_id",
    "computer__is_active",
    "computer__binding",
    "continuation__id",
)


# Compiled once per database connection and shape (core/prepared.py): most of a run read's time,
# and 2 ms of a page's, was the ORM building and compiling these queries (``make bench``'s api
# profile). A read by primary key has no ORDER BY: it does not need one.
_RUNS = Prepared(
    _runs,
    lambda: {
        "account": Account._meta.pk,
        "pk": Run._meta.pk,
        "status": Run._meta.get_field("status"),
        "kind": Run._meta.get_field("pause_kind"),
        "computer_id": Computer._meta.get_field("handle"),
    },  # type: ignore[dict-item]
)


def run_for_account(*, account: Account, run_id: str | uuid.UUID) -> Run:
    """The account's run, or 404 whether it does not exist or belongs to another account."""
    try:
        run: Run = _RUNS.get(account=account.pk, pk=parse_uuid(str(run_id)))
    except Run.DoesNotExist:
        raise RunNotFound() from None
    _caller_account(run, account)
    return run


def _caller_account(run: Run, account: Account) -> None:
    """``run.account = account`` for a run read with the filter ``account_id=account.pk`` (the caller's
    own row, no join for it) without the descriptor's type and router checks, once per run of a page:
    the id (which a page does not read, ``PAGE_FIELDS``) and the relation's cache."""
    run.account_id = account.pk
    Run.account.field.set_cached_value(run, account)


def runs_page(
    *,
    account: Account,
    status: str | None = None,
    kind: str | None = None,
    computer_id: str | None = None,
    limit: int = 20,
    offset: int = 0,
    observer: bool = False,
) -> RunList:
    """A page of the account's runs, newest first; a ``task_observer`` key never sees typed text.

    Each run comes with its computer and continuation, and its place in its computer's queue;
    its account is the caller's own row.
    """
    # A filter that is sent is checked, empty or not (the OpenAPI document gives each one's values).
    if status is not None and status not in Run.Status.values:
        raise InvalidFilter(f"Invalid request: status must be one of {', '.join(Run.Status.values)}.")
    if kind is not None and kind not in PAUSE_KINDS:
        raise InvalidFilter(f"Invalid request: kind must be one of {', '.join(PAUSE_KINDS)}.")
    if computer_id is not None and not re.fullmatch(COMPUTER_ID_RE, computer_id):
        raise InvalidFilter("Invalid request: computer_id is not a computer id.")
    filters = {"account": account.pk, "status": status, "kind": kind, "computer_id": computer_id}
    runs: list[Run] = _RUNS.rows(("page", offset, limit), **filters)
    if runs:
        count = int(runs[0].page_total)  # type: ignore[attr-defined]
    else:  # past the end (or nothing): a page has no row to carry the total
        count = next(iter(_RUNS.rows(("count",), **filters)), 0) if offset else 0
    for run in runs:
        _caller_account(run, account)
    _prefetch_pause_requests(runs)
    page = [run_out(run, observer=observer) for run in runs]
    next_offset = offset + limit if offset + limit < count else None
    return RunList(runs=page, count=count, next_offset=next_offset)


def _prefetch_pause_requests(runs: list[Run]) -> None:
    """Everything required_action reads (each kind's ``request_relation``), in one query per request
    kind present on the page, whatever the page's length; a page with no such pause reads none."""
    for name, kind in PAUSE_KINDS.items():
        if kind.request_relation is None:
            continue
        paused = [r for r in runs if r.status == Run.Status.WAITING_FOR_INPUT and r.pause_kind == name]
        if paused:
            prefetch_related_objects(paused, kind.request_relation)


def continuation_id(run: Run) -> uuid.UUID | None:
    try:
        return run.continuation.id
    except Run.continuation.RelatedObjectDoesNotExist:
        return None


def current_pause(run: Run) -> NeedsInputResult | None:
    """The run's pause while it waits for input and has not been continued."""
    if run.status != Run.Status.WAITING_FOR_INPUT or run.result is None:
        return None
    if continuation_id(run) is not None:
        return None
    try:
        result = RUN_RESULT.validate_python(run.result)
    except ValidationError:
        # A pause no registered kind knows (or a result of a newer version): nothing can open it.
        return None
    return result if isinstance(result, NeedsInputResult) else None


def run_required_action(*, run: Run) -> RequiredActionModel | None:
    """``required_action`` per the spec, or None when the run has no open pause."""
    paused = current_pause(run)
    if paused is None:
        return None
    pause = paused.pause
    human_action = HumanAction(url=intervention_url(run), requires_login=True)
    return pause_kind(pause.kind).required_action(run=run, pause=pause, human_action=human_action)  # type: ignore[return-value]


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


def _hidden(value: Any) -> str:
    return ""


def task_redacted(
    task: dict[str, Any], *, upto: int | None = None, shown: Callable[[Any], str] = _hidden
) -> dict[str, Any]:
    """The task with the private fields of its scripted steps (``Tool.private``: what ``type`` types, a
    prompt's answer) emptied, or replaced by ``shown(value)``, in all steps or those before ``upto``.

    A private field exists only until its step runs.
    """
    steps = task.get("steps")
    if not isinstance(steps, list):
        return task
    redacted = []
    for index, step in enumerate(steps):
        tool = TOOLS.get(str(step.get("tool"))) if isinstance(step, dict) else None
        if tool is not None and tool.private and isinstance(step.get("arguments"), dict) and (upto is None or index < upto):
            arguments = step["arguments"]
            hidden = {name: shown(arguments[name]) for name in tool.private if arguments.get(name) is not None}
            step = {**step, "arguments": {**arguments, **hidden}}
        redacted.append(step)
    return {**task, "steps": redacted}


def run_out(run: Run, *, observer: bool = False) -> RunOut:
    """The run as its contract model (``.to_wire()`` at the edge); a ``task_observer`` key never
    sees a scripted step's private fields (what ``type`` types, a prompt's answer)."""
    return RunOut(
        id=run.id,
        status=run.status,  # type: ignore[arg-type]
        computer_id=run.computer_handle,
        task=task_redacted(run.task) if observer else run.task,
        model_calls=run.model_calls,
        max_model_calls=run.max_model_calls,
        result=run.result,
        required_action=run_required_action(run=run),
        continued_from=run.continued_from_id,
        continued_run_id=continuation_id(run),
        queue_position=queue_position(run),
        queue_reason=queue_reason(run),
        created_at=run.created_at,
        updated_at=run.updated_at,
    )


def run_to_wire(run: Run, *, observer: bool = False) -> dict[str, Any]:
    """``run_out(run).to_wire()``, for edges that answer a run."""
    return run_out(run, observer=observer).to_wire()


def run_viewer(*, run: Run) -> ViewerOut:
    """The clean-screen link of the run's computer, from the same binding check as the descriptor."""
    viewer = bound_viewer(run)
    if viewer is None:
        raise NoViewer()
    return ViewerOut(available=True, computer_id=viewer.computer_id, url=viewer.url, requires_login=True)


def intervention_current(*, run: Run) -> OpenIntervention:
    """Check the account, the run, the computer binding and the kind's request; 409 when unavailable."""
    if not run.account.is_active:
        raise AccountInactive()
    if run.status == Run.Status.CANCELLED:
        raise InterventionUnavailable("The run was cancelled; this intervention is no longer available.")
    next_id = continuation_id(run)
    if next_id is not None:
        raise InterventionUnavailable(
            "The run was already continued; this intervention is no longer available.", continued_run_id=str(next_id)
        )
    paused = current_pause(run)
    if paused is None:
        raise InterventionUnavailable("The run is not waiting for a person.")
    pause = paused.pause
    kind = pause_kind(pause.kind)
    if kind.descriptor_kind is None:
        raise NoInterventionPage(kind.no_page_message)
    if not run_binding_holds(run):
        raise InterventionUnavailable("The run's computer binding was revoked; this intervention is no longer available.")
    state = kind.intervention(run=run, pause=pause)
    return OpenIntervention(
        run=run,
        pause=kind.name,
        kind=kind.descriptor_kind,
        state=state.state,
        reason=pause.reason,
        credential_request=state.credential_request,
        connection_request=state.connection_request,
    )


def intervention_descriptor(*, run: Run) -> InterventionEnvelope:
    """The safe descriptor: validated by its contract model before it leaves."""
    current = intervention_current(run=run)
    kind = pause_kind(current.pause)
    texts = kind.texts(reason=current.reason, state=current.state)
    return InterventionEnvelope(
        intervention=InterventionDescriptor(
            version=1,
            run_id=run.id,
            computer_id=run.computer_handle or "",
            kind=current.kind,  # type: ignore[arg-type]
            state=current.state,  # type: ignore[arg-type]
            reason=current.reason,  # type: ignore[arg-type]
            progress=texts.progress,
            user_action=texts.user_action,
            next_step=texts.next_step,
            human_action=HumanAction(url=intervention_url(run), requires_login=True),
            **kind.descriptor_request(current=current),
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
        except DomainError:
            continue
        if current.connection_request is not None and current.connection_request.pk == request.pk:
            pending.append(request)
    authorized = list(
        ConnectionRequest.objects.filter(run__account=account, state=ConnectionRequest.State.AUTHORIZED).order_by(
            "-completed_at"
        )[:50]
    )
    return pending, authorized


def steps_in_flight(*, computer_id: str) -> int:
    """Steps of runs on the computer that started and have not settled (a tool call under way)."""
    return RunStep.objects.filter(run__computer_id=computer_id, state=RunStep.State.STARTED).count()


# --- What happened: steps and events ------------------------------------------------------

# The summary's own bookkeeping, not an argument.
_NOT_ARGUMENTS = ("tool", "isError")


def step_out(step: RunStep) -> StepOut:
    summary = step.summary if isinstance(step.summary, dict) else {}
    result = ToolResult.model_validate(step.result) if step.result is not None else None
    return StepOut(
        step_id=step.pk,
        index=step.index,
        tool=step.tool,
        arguments={k: v for k, v in summary.items() if k not in _NOT_ARGUMENTS},
        state=step.state,  # type: ignore[arg-type]
        result=result,
        started_at=step.started_at,
        finished_at=step.finished_at,
        artifact_ids=_step_artifacts(result),
    )


def _step_artifacts(result: ToolResult | None) -> list[str]:
    """A step's masked screenshot, then the downloads it stored."""
    if result is None:
        return []
    ids = [result.artifact_id] if result.artifact_id else []
    return ids + [d.artifact_id for d in result.downloads or () if d.artifact_id]


def steps_page(*, run: Run, after: int | None, limit: int) -> StepList:
    """The run's steps in order, those after index ``after``."""
    qs = RunStep.objects.filter(run=run).order_by("index")
    if after is not None:
        qs = qs.filter(index__gt=after)
    steps = list(qs[:limit])
    return StepList(
        steps=[step_out(step) for step in steps], next_after=steps[-1].index if len(steps) == limit else None
    )


def events_page(*, run: Run, after: int | None, limit: int) -> EventList:
    """The run's events, oldest first, those after id ``after``."""
    qs = RunEvent.objects.filter(run=run).order_by("id")
    if after is not None:
        qs = qs.filter(id__gt=after)
    events = list(qs[:limit])
    return EventList(
        events=[EventOut(id=e.pk, kind=e.kind, data=e.data or {}, created_at=e.created_at) for e in events],
        next_after=events[-1].pk if len(events) == limit else None,
    )


def run_latest_screenshot_id(*, run: Run) -> str | None:
    """The newest masked screenshot a step or a pause of the run recorded (still stored, of its account)."""
    candidates = RunEvent.objects.filter(run=run, data__has_key="artifact_id").exclude(kind="download_stored").order_by("-id").values_list(
        "data", flat=True
    )[:10]
    for data in candidates:
        try:
            key = uuid.UUID(str(data.get("artifact_id")))
        except ValueError:
            continue
        if DiagnosticArtifact.objects.filter(
            pk=key, account_id=run.account_id, kind=DiagnosticArtifact.Kind.SCREENSHOT
        ).exists():
            return str(key)
    return None


def artifact_for_account(*, account: Account, artifact_id: str) -> DiagnosticArtifact:
    """The account's stored capture, or 404 whether it does not exist or belongs to another account."""
    artifact = DiagnosticArtifact.objects.filter(pk=parse_uuid(artifact_id, not_found=ArtifactNotFound), account=account).first()
    if artifact is None:
        raise ArtifactNotFound()
    return artifact


def artifact_out(artifact: DiagnosticArtifact) -> ArtifactOut:
    return ArtifactOut(
        id=artifact.pk,
        kind=artifact.kind,  # type: ignore[arg-type]
        filename=artifact.filename,
        content_type=artifact.content_type,
        size=artifact.size,
        sha256=artifact.sha256,
        created_at=artifact.created_at,
    )
