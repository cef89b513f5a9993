"""Every state transition of a run: create, pause, finish, continue, cancel,
and the person's side of a pause (open, save a credential, authorize a connection).

The pause kinds' own transitions live in ``runs/pauses/`` and the low-level
writes in ``runs.state``; both are re-exported here under their usual names."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts.errors import AccountInactive, PasswordSessionRequired
from accounts.models import Account, ApiKey
from accounts.services import PASSWORD, account_of_user
from computers.models import Computer
from core.errors import DomainError
from core.json import json_bytes
from executor.contracts import PROVIDER_OF_BACKEND
from runs.contracts import CancelledResult, ContinueOut
from runs.errors import (
    AgentUnavailable,
    BrowserProviderMismatch,
    ComputerNotFound,
    ConnectionRequestConflict,
    ConnectionRequestNotFound,
    ContinuationConflict,
    CredentialReplaceUnconfirmed,
    CredentialRequestConflict,
    IdempotencyKeyReused,
    InterventionNotFound,
    InviteInvalid,
    NothingToDo,
    RunBindingChanged,
    RunCancelled,
    RunFinished,
    RunNotFound,
    RunNotPaused,
    VaultDown,
    VaultRefusedForm,
)
from runs.models import ConnectionRequest, CredentialRequest, IdempotencyRecord, Run, StoredCredential
from runs.oauth import authorization_start, code_exchange, scope_of
from runs.pauses import PAUSE_KINDS, OpenIntervention, pause_kind, run_pause
from runs.pauses.connection import connection_request_pause
from runs.pauses.credential import credential_request_pause, invite_revoke_quietly
from runs.queue import hold_passed_on, queue_enter
from runs.selectors import (
    BINDING_CHANGED,
    continuation_id,
    credential_replaced_by,
    current_pause,
    intervention_current,
    parse_uuid,
    run_binding_holds,
    run_for_account,
    run_out,
)
from runs.state import (
    run_event_append,
    run_fail_tool_error,
    run_finish,
    run_mark_continued,
    run_result_set,
)
from runs.tool_calls import RunCreateIn
from vault_bridge.credentials import (
    PortalCredential,
    VaultRefused,
    VaultUnavailable,
    connection_tokens_write,
    mask_username,
    portal_credential_save,
)

# Kept here so callers find every transition of a run in one module.
__all__ = [
    "connection_request_pause",
    "credential_request_pause",
    "run_event_append",
    "run_fail_tool_error",
    "run_finish",
    "run_pause",
]

# Sent after commit when a run is queued (created or continued); the run queue dispatches.
run_queued = Signal()
# Sent after commit when a run is cancelled or continued: open intervention
# resources (invites, human grants) for it must end.
run_intervention_closed = Signal()

def _on_commit_send(signal: Signal, run_id: uuid.UUID) -> None:
    def send() -> None:
        signal.send(sender=Run, run_id=run_id)

    transaction.on_commit(send)


def run_create(
    *,
    account: Account,
    computer: Computer,
    task: dict[str, Any],
    max_model_calls: int,
    agent_config: dict[str, Any] | None = None,
    microcredits_per_model_call: int | None = None,
    recording: bool = True,
) -> Run:
    if computer is None or computer.account_id != account.pk or not computer.is_active:
        raise ComputerNotFound()
    with transaction.atomic():
        # The binding is read under the computer's row lock: a concurrent move cannot slip between.
        locked = Computer.objects.select_for_update().filter(pk=computer.pk, account=account, is_active=True).first()
        if locked is None:
            raise ComputerNotFound()
        agent_config = _browser_of_computer(agent_config or {}, locked)
        run = Run.objects.create(
            account=account,
            computer=locked,
            computer_binding=locked.binding,
            task=task,
            agent_config=agent_config or {},
            max_model_calls=max_model_calls,
            recording=recording,
            microcredits_per_model_call=(
                settings.RAM_MICROCREDITS_PER_MODEL_CALL
                if microcredits_per_model_call is None
                else microcredits_per_model_call
            ),
        )
        run_event_append(run=run, kind="run_created", data={"max_model_calls": max_model_calls})
        queue_enter(run=run)
        _on_commit_send(run_queued, run.id)
    return run


def _browser_of_computer(agent_config: dict[str, Any], computer: Computer) -> dict[str, Any]:
    """The run's ``agent.browser`` with the computer's provider: a different one is refused."""
    browser = dict(agent_config.get("browser") or {})
    expected = PROVIDER_OF_BACKEND[computer.browser_backend]
    provider = browser.get("provider")
    if provider is not None and provider != expected:
        raise BrowserProviderMismatch(
            f"agent.browser.provider is {provider!r}, but computer {computer.handle!r} runs the "
            f"{computer.browser_backend!r} browser backend, whose provider is {expected!r}. "
            "Omit provider, or choose another computer."
        )
    browser["provider"] = expected
    return {**agent_config, "browser": browser}


def run_submit(*, account: Account, body: RunCreateIn) -> Run:
    """Create a run from a ``POST /api/runs`` (or MCP ``run_create``) body on one of the account's computers."""
    if body.agent.type == "scripted" and not body.task.steps:
        raise NothingToDo()
    if body.agent.type == "openai_compatible" and not settings.RAM_LLM_BASE_URL:
        raise AgentUnavailable()
    computer = Computer.objects.filter(handle=body.computer_id, account=account, is_active=True).first()
    if computer is None:
        raise ComputerNotFound()
    run = run_create(
        account=account,
        computer=computer,
        task=body.task.stored(),
        agent_config=body.agent.model_dump(mode="json"),
        max_model_calls=body.max_model_calls,
        recording=body.recording,
    )
    # As it is after the queue's dispatch: running if it started at once, else queued with its position.
    return run_for_account(account=account, run_id=run.id)


def _continue_digest(run_id: uuid.UUID | str, idempotency_key: str) -> str:
    """What a continue request is, for its key's record: the run and the key. Its canonical form is
    frozen (it names the REST path, as every stored record's digest does), so records stored before
    keep matching whichever edge retries them."""
    canonical = json_bytes({"path": f"/api/runs/{run_id}/continue", "body": {"idempotency_key": idempotency_key}})
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class Continued:
    """What continuing a run answered: ``answer``, the first answer's frozen snapshot (a
    ``ContinueOut`` in its JSON form: the continuation as it was then), and whether this is a
    replay of it for the same key. REST renders it (201, byte for byte the first answer) and MCP
    gives it as the tool's result."""

    answer: dict[str, Any]
    replayed: bool


def run_continue(*, key: ApiKey, run_id: uuid.UUID, idempotency_key: str) -> Continued:
    """Create the run's continuation once; replay the first answer for the same key and request."""
    account = key.account
    request_digest = _continue_digest(run_id, idempotency_key)
    _fail_if_unbound(account=account, run_id=run_id)
    for _attempt in range(3):
        try:
            return _run_continue_once(account, run_id, idempotency_key, request_digest)
        except IntegrityError:
            # A concurrent request won the race; the next pass reads its record.
            continue
    raise ContinuationConflict("The run is being continued by another request; check the run.")


def run_fail_if_unbound(*, run: Run) -> bool:
    """Fail a run whose computer binding changed (locked by the caller); True when it was failed."""
    if run.status in Run.TERMINAL or run_binding_holds(run):
        return False
    run_finish(run=run, error=BINDING_CHANGED)
    run_event_append(run=run, kind="run_binding_changed")
    _on_commit_send(run_intervention_closed, run.id)
    return True


def _fail_if_unbound(*, account: Account, run_id: uuid.UUID) -> None:
    """A paused run whose binding changed fails (and says so) instead of being continued."""
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("computer").filter(pk=run_id, account=account).first()
        if run is None or current_pause(run) is None:
            return
        failed = run_fail_if_unbound(run=run)
    if failed:
        raise RunBindingChanged()


def _run_continue_once(account: Account, run_id: uuid.UUID, idempotency_key: str, request_digest: str) -> Continued:
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, account=account).first()
        if run is None:
            raise RunNotFound()
        record = IdempotencyRecord.objects.filter(account=account, key=idempotency_key).first()
        if record is not None:
            if record.request_digest != request_digest:
                raise IdempotencyKeyReused()
            # Rows stored before the snapshot (REST's bytes, with a status) hold the same JSON.
            return Continued(answer=json.loads(bytes(record.response_body)), replayed=True)
        next_id = continuation_id(run)
        if next_id is not None:
            raise ContinuationConflict(f"The run was already continued as {next_id}.", continued_run_id=str(next_id))
        if run.status == Run.Status.CANCELLED:
            raise RunCancelled()
        paused = current_pause(run)
        if paused is None:
            raise RunNotPaused()
        if not account.is_active:
            raise AccountInactive()
        pause = paused.pause
        pause_kind(pause.kind).continue_check(account=account, pause=pause)
        # After a takeover of the computer the continuation holds it (first in line); else it queues.
        inherited = hold_passed_on(run=run)
        continuation = Run.objects.create(
            account=account,
            computer=run.computer,
            computer_binding=run.computer_binding,
            task=run.task,
            agent_config=run.agent_config,
            max_model_calls=run.max_model_calls,
            microcredits_per_model_call=run.microcredits_per_model_call,
            recording=run.recording,
            # The agent resumes where it paused (its cursor), observing the page as
            # it is now: nothing of the earlier sequence is replayed. A fresh run
            # may take the computer's lease after a person released it.
            agent_state={k: v for k, v in (run.agent_state or {}).items() if k != "has_leased"},
            continued_from=run,
            **inherited,
        )
        run_mark_continued(run=run, continuation=continuation)
        run_event_append(run=continuation, kind="run_created", data={"continued_from": str(run.id)})
        queue_enter(run=continuation)
        run.refresh_from_db()
        answer = ContinueOut(continued_from=run.id, run=run_out(continuation)).to_wire()
        IdempotencyRecord.objects.create(
            account=account, key=idempotency_key, request_digest=request_digest, response_body=json_bytes(answer)
        )
        _on_commit_send(run_intervention_closed, run.id)
        _on_commit_send(run_queued, continuation.id)
    return Continued(answer=answer, replayed=False)


def computer_control_recorded(
    *, computer_id: str, account_id: str | uuid.UUID, taken: bool, by: str = ""
) -> Run | None:
    """A person took control of a computer (or handed it back): recorded in the events of the
    account's open run on it (``control_taken`` / ``control_released``), if there is one: the run
    that holds the computer first, else the newest (runs waiting in the queue behind it come after)."""
    run = (
        Run.objects.filter(
            computer_id=computer_id,
            account_id=account_id,
            status__in=[Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_FOR_INPUT],
            continuation__isnull=True,
        )
        .order_by("-holds_computer", "-created_at", "-id")
        .first()
    )
    if run is not None:
        data = {"computer_id": run.computer_handle, **({"by": by[:200]} if by else {})}
        run_event_append(run=run, kind="control_taken" if taken else "control_released", data=data)
    return run


def run_cancel(*, run: Run) -> Run:
    """Cancel a run that has not finished; its intervention becomes unavailable."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.CANCELLED:
            return run
        next_id = continuation_id(run)
        if next_id is not None:
            raise ContinuationConflict(
                f"The run was continued as {next_id}; cancel that run instead.", continued_run_id=str(next_id)
            )
        if run.status in Run.TERMINAL:
            raise RunFinished(f"The run already {run.status}; it cannot be cancelled.")
        run_result_set(run, CancelledResult(outcome="cancelled").model_dump(mode="json"), Run.Status.CANCELLED)
        for kind in PAUSE_KINDS.values():
            kind.cancel(run=run)
        run_event_append(run=run, kind="run_cancelled")
        _on_commit_send(run_intervention_closed, run.id)
    return run


def runs_cancel_for_reassigned_computer(*, computer_id: str, previous_account_id: Any) -> int:
    """Cancel the previous owner's open runs on a computer that moved to another account."""
    cancelled = 0
    open_runs = Run.objects.filter(computer_id=computer_id, account_id=previous_account_id).exclude(status__in=Run.TERMINAL)
    for run in open_runs:
        try:
            run_cancel(run=run)
        except DomainError:
            continue  # continued meanwhile: its continuation is in the list too
        run_event_append(run=run, kind="run_binding_changed")
        cancelled += 1
    return cancelled


def idempotency_records_expire() -> int:
    """Forget continuation keys older than the retention (at least 24 h)."""
    hours = max(24, settings.RAM_IDEMPOTENCY_RETENTION_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - timedelta(hours=hours)).delete()
    return deleted


def credential_requests_expire() -> int:
    """Mark pending credential requests past their deadline as expired, and delete
    the policies of their invites (the tokens themselves died at the deadline)."""
    expired = CredentialRequest.objects.filter(state=CredentialRequest.State.PENDING, expires_at__lte=timezone.now())
    opened = list(expired.filter(opened_at__isnull=False).values_list("id", flat=True))
    count = expired.update(state=CredentialRequest.State.EXPIRED)
    for request_id in opened:
        invite_revoke_quietly(request_id)
    return count


# --- The human intervention flow: open, save a credential, authorize a connection ---

logger = logging.getLogger(__name__)

INVITE_SHAPE = re.compile(r"^[A-Za-z0-9._-]{8,256}$")


def _person_account(*, user: User, auth_method: str | None) -> Account:
    """The account of a durable password session; delegated sessions are refused."""
    if auth_method != PASSWORD:
        raise PasswordSessionRequired("This needs a password sign-in of the task's account; a delegated sign-in cannot.")
    account = account_of_user(user)
    if account is None:
        raise InterventionNotFound()
    return account


def intervention_open(*, run_id: str, user: User, auth_method: str | None) -> str:
    """Open the intervention's resource for the person; returns where to send them.

    The binding is checked before and after; what opening does belongs to the
    pause kind (``runs/pauses/``): a credential form is claimed once before its
    invite exists, a takeover goes to the clean screen, a connection to Connections.
    """
    account = _person_account(user=user, auth_method=auth_method)
    run = run_for_account(account=account, run_id=run_id)
    current = intervention_current(run=run)

    def recheck() -> OpenIntervention:
        return intervention_current(run=run_for_account(account=account, run_id=run.id))

    return pause_kind(current.pause).open(current=current, recheck=recheck)


def credential_request_save(
    *,
    run_id: str,
    user: User,
    auth_method: str | None,
    invite: str,
    username: str,
    password: str,
    totp_secret: str | None,
    replace_existing: bool = False,
) -> CredentialRequest:
    """Store the credential in Vault with the invite itself, then mark the request ``credential_saved``."""
    account = _person_account(user=user, auth_method=auth_method)
    run = run_for_account(account=account, run_id=run_id)
    current = intervention_current(run=run)
    request = current.credential_request
    if request is None:
        raise CredentialRequestConflict("This task is not waiting for a credential.")
    if request.state != CredentialRequest.State.PENDING:
        raise CredentialRequestConflict("The credential for this request was already saved.")
    if request.opened_at is None:
        raise CredentialRequestConflict("Open the form from the task's intervention page first.")
    if not INVITE_SHAPE.match(invite):
        raise InviteInvalid()
    if not replace_existing and credential_replaced_by(request) is not None:
        # Checked before the invite is used, so the person can confirm and save with the same form.
        raise CredentialReplaceUnconfirmed()
    credential = PortalCredential(
        username=username, password=password, origins=(request.portal_origin,), totp_secret=totp_secret
    )
    try:
        portal_credential_save(
            invite=invite, account_id=run.account_id, credential_id=request.credential_id, credential=credential
        )
    except VaultRefused:
        raise VaultRefusedForm() from None
    except VaultUnavailable:
        raise VaultDown("The vault could not be reached. Check the task before trying again.") from None
    with transaction.atomic():
        saved = CredentialRequest.objects.filter(pk=request.pk, state=CredentialRequest.State.PENDING).update(
            state=CredentialRequest.State.CREDENTIAL_SAVED, saved_at=timezone.now()
        )
        if saved != 1:
            raise CredentialRequestConflict("The request changed while saving; check the task.")
        run_event_append(
            run=run,
            kind="credential_saved",
            data={"request_id": str(request.id), "credential_id": request.credential_id},
        )
        stored_credential_record(
            account=run.account,
            credential_id=request.credential_id,
            label=request.label,
            origins=[request.portal_origin],
            username=username,
            saved_at=timezone.now(),
        )
        request_id = request.id
        transaction.on_commit(lambda: invite_revoke_quietly(request_id))
    request.refresh_from_db()
    return request


def stored_credential_record(
    *, account: Account, credential_id: str, label: str, origins: list[str], username: str, saved_at: datetime
) -> StoredCredential:
    """Write what may be shown of a credential just saved in the vault (never the secret)."""
    row, _ = StoredCredential.objects.update_or_create(
        account=account,
        credential_id=credential_id,
        defaults={
            "label": label,
            "origins": origins,
            "username_masked": mask_username(username),
            "saved_at": saved_at,
        },
    )
    return row


def _revoke_open_invites(sender: Any, run_id: uuid.UUID, **kwargs: Any) -> None:
    """After a cancel or continue, outstanding invites of the run lose every capability."""
    for request_id in CredentialRequest.objects.filter(
        run_id=run_id, opened_at__isnull=False, state__in=[CredentialRequest.State.PENDING, CredentialRequest.State.CANCELLED]
    ).values_list("id", flat=True):
        invite_revoke_quietly(request_id)


run_intervention_closed.connect(_revoke_open_invites, dispatch_uid="runs.services.revoke_open_invites")


def _connection_request_current(*, account: Account, connection_request_id: str) -> ConnectionRequest:
    request = (
        ConnectionRequest.objects.select_related("run__account", "run__computer")
        .filter(pk=parse_uuid(connection_request_id, not_found=ConnectionRequestNotFound), run__account=account)
        .first()
    )
    if request is None:
        raise ConnectionRequestNotFound()
    current = intervention_current(run=request.run)
    if current.connection_request is None or current.connection_request.pk != request.pk:
        raise ConnectionRequestConflict("This connection request is no longer waiting for an authorization.")
    return request


def connection_authorization_begin(*, connection_request_id: str, user: User, auth_method: str | None) -> Any:
    """Start Google's authorization for a pending request; returns the URL, ``state`` and PKCE verifier."""
    account = _person_account(user=user, auth_method=auth_method)
    request = _connection_request_current(account=account, connection_request_id=connection_request_id)
    start = authorization_start(capabilities=list(request.capabilities))
    run_event_append(run=request.run, kind="connection_authorize_started", data={"provider": request.provider})
    return start


def connection_authorization_complete(
    *, connection_request_id: str, user: User, auth_method: str | None, code: str, code_verifier: str
) -> ConnectionRequest:
    """Exchange the code, store the tokens in Vault, and mark the request authorized."""
    account = _person_account(user=user, auth_method=auth_method)
    request = _connection_request_current(account=account, connection_request_id=connection_request_id)
    tokens = code_exchange(code=code, code_verifier=code_verifier)
    granted = str(tokens.get("scope") or "").split()
    missing = [c for c in request.capabilities if granted and scope_of(c) not in granted]
    if missing:
        raise ConnectionRequestConflict(
            "Google granted fewer permissions than the task asked for; authorize again and keep every "
            "requested permission selected.",
        )
    now = timezone.now()
    stored = {
        "provider": request.provider,
        "capabilities": list(request.capabilities),
        "access_token": tokens["access_token"],
        "token_type": str(tokens.get("token_type", "Bearer")),
        "scope": " ".join(granted) or " ".join(scope_of(c) for c in request.capabilities),
        "obtained_at": now.isoformat(),
    }
    if isinstance(tokens.get("refresh_token"), str):
        stored["refresh_token"] = tokens["refresh_token"]
    if isinstance(tokens.get("expires_in"), int):
        stored["expires_in"] = tokens["expires_in"]
    try:
        connection_tokens_write(account_id=account.id, connection_id=request.id, tokens=stored)
    except (VaultRefused, VaultUnavailable):
        raise VaultDown("The vault could not store the connection; authorize again later.") from None
    with transaction.atomic():
        updated = ConnectionRequest.objects.filter(pk=request.pk, state=ConnectionRequest.State.PENDING).update(
            state=ConnectionRequest.State.AUTHORIZED, completed_at=now
        )
        if updated != 1:
            raise ConnectionRequestConflict("This connection request changed meanwhile; check the task.")
        run_event_append(
            run=request.run,
            kind="connection_authorized",
            data={"provider": request.provider, "capabilities": list(request.capabilities)},
        )
    request.refresh_from_db()
    return request
