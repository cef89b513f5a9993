"""Every state transition of a run: create, pause, finish, continue, cancel,
and the credential and connection requests behind a pause."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts.models import Account, ApiKey
from executor.models import Computer
from ramsite.api import json_bytes
from ramsite.errors import ServiceError
from runs.contracts import (
    RUN_RESULT,
    CancelledResult,
    ConnectionPause,
    ContinueOut,
    CredentialPause,
    NeedsInputResult,
    Pause,
    RunOut,
)
from runs.models import ConnectionRequest, CredentialRequest, IdempotencyRecord, Run, RunEvent
from runs.selectors import continuation_id, current_pause, run_to_wire

# Sent after commit when a run is queued (created or continued); the run loop listens.
run_queued = Signal()
# Sent after commit when a run is cancelled or continued: open intervention
# resources (invites, human grants) for it must end.
run_intervention_closed = Signal()

_SECRET_WORDS = ("password", "secret", "token", "invite", "ticket", "authorization", "api_key", "totp")


def _assert_secret_free(data: Any, path: str = "") -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if any(word in str(key).lower() for word in _SECRET_WORDS):
                raise ValueError(f"Run events are secret-free; refusing field {path}{key!r}.")
            _assert_secret_free(value, f"{path}{key}.")
    elif isinstance(data, list):
        for item in data:
            _assert_secret_free(item, path)


def run_event_append(*, run: Run, kind: str, data: dict[str, Any] | None = None) -> RunEvent:
    """Append one secret-free event to the run's log."""
    payload = data or {}
    _assert_secret_free(payload)
    return RunEvent.objects.create(run=run, kind=kind, data=payload)


def _on_commit_send(signal: Signal, run_id: uuid.UUID) -> None:
    def send() -> None:
        signal.send(sender=Run, run_id=run_id)

    transaction.on_commit(send)


def run_create(
    *,
    account: Account,
    computer: Computer | None,
    task: dict[str, Any],
    max_model_calls: int,
    agent_config: dict[str, Any] | None = None,
) -> Run:
    if computer is not None and (computer.account_id != account.pk or not computer.is_active):
        raise ServiceError(404, "No such computer in this account.")
    with transaction.atomic():
        run = Run.objects.create(
            account=account,
            computer=computer,
            task=task,
            agent_config=agent_config or {},
            max_model_calls=max_model_calls,
        )
        run_event_append(run=run, kind="run_created", data={"max_model_calls": max_model_calls})
        _on_commit_send(run_queued, run.id)
    return run


def _set_result(run: Run, result: Any, status: str) -> None:
    validated = RUN_RESULT.validate_python(result)
    run.result = validated.model_dump(mode="json")
    run.status = status
    run.pause_kind = validated.pause.kind if isinstance(validated, NeedsInputResult) else ""
    if status in Run.TERMINAL:
        run.finished_at = timezone.now()
    run.save(update_fields=["result", "status", "pause_kind", "finished_at", "updated_at"])


def run_pause(*, run: Run, pause: Pause) -> Run:
    """Persist a validated pause; the run waits for an explicit continuation."""
    with transaction.atomic():
        _set_result(run, {"outcome": "needs_input", "pause": pause.model_dump(mode="json")}, Run.Status.WAITING_FOR_INPUT)
        run_event_append(run=run, kind="run_paused", data={"kind": pause.kind, "reason": pause.reason})
    return run


def run_finish(*, run: Run, output: Any = None, error: str | None = None) -> Run:
    with transaction.atomic():
        if error is None:
            _set_result(run, {"outcome": "succeeded", "output": output}, Run.Status.SUCCEEDED)
            run_event_append(run=run, kind="run_succeeded")
        else:
            _set_result(run, {"outcome": "failed", "error": error}, Run.Status.FAILED)
            run_event_append(run=run, kind="run_failed")
    return run


def credential_request_pause(
    *, run: Run, portal_origin: str, label: str, reason: str = "authentication", ttl_seconds: int | None = None
) -> CredentialRequest:
    """Create a credential request with its deadline and pause the run on it."""
    ttl = ttl_seconds if ttl_seconds is not None else settings.RAM_CREDENTIAL_REQUEST_TTL_SECONDS
    with transaction.atomic():
        request = CredentialRequest.objects.create(
            run=run,
            portal_origin=portal_origin,
            label=label,
            expires_at=timezone.now() + timedelta(seconds=ttl),
        )
        run_event_append(
            run=run,
            kind="credential_requested",
            data={"request_id": str(request.id), "portal_origin": portal_origin, "label": label},
        )
        run_pause(run=run, pause=CredentialPause(kind="credential", reason=reason, request_id=request.id))  # type: ignore[arg-type]
    return request


def connection_request_pause(*, run: Run, capabilities: list[str]) -> ConnectionRequest:
    """Create a Google connection request and pause the run on it."""
    with transaction.atomic():
        request = ConnectionRequest.objects.create(run=run, provider="google", capabilities=capabilities)
        run_event_append(run=run, kind="connection_requested", data={"provider": "google", "capabilities": capabilities})
        run_pause(
            run=run,
            pause=ConnectionPause(kind="connection", reason="authorization_required", request_id=request.id),
        )
    return request


def _continue_digest(run_id: uuid.UUID | str, idempotency_key: str) -> str:
    canonical = json_bytes({"path": f"/api/runs/{run_id}/continue", "body": {"idempotency_key": idempotency_key}})
    return hashlib.sha256(canonical).hexdigest()


def run_continue(*, key: ApiKey, run_id: uuid.UUID, idempotency_key: str) -> tuple[int, bytes]:
    """Create the run's continuation once; replay the first response for the same key and body.

    Returns the HTTP status and the exact response bytes, so a replay is
    byte-for-byte the first answer.
    """
    account = key.account
    request_digest = _continue_digest(run_id, idempotency_key)
    for _attempt in range(3):
        try:
            return _run_continue_once(account, run_id, idempotency_key, request_digest)
        except IntegrityError:
            # A concurrent request won the race; the next pass reads its record.
            continue
    raise ServiceError(409, "The run is being continued by another request; check the run.")


def _run_continue_once(account: Account, run_id: uuid.UUID, idempotency_key: str, request_digest: str) -> tuple[int, bytes]:
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, account=account).first()
        if run is None:
            raise ServiceError(404, "No such run.")
        record = IdempotencyRecord.objects.filter(account=account, key=idempotency_key).first()
        if record is not None:
            if record.request_digest != request_digest:
                raise ServiceError(422, "This idempotency_key was already used with a different request.")
            return record.status_code, bytes(record.response_body)
        next_id = continuation_id(run)
        if next_id is not None:
            raise ServiceError(409, f"The run was already continued as {next_id}.", continued_run_id=str(next_id))
        if run.status == Run.Status.CANCELLED:
            raise ServiceError(409, "The run was cancelled and cannot be continued.")
        paused = current_pause(run)
        if paused is None:
            raise ServiceError(409, "The run is not paused waiting for input; there is nothing to continue.")
        if not account.is_active:
            raise ServiceError(403, "The account is inactive.")
        pause = paused.pause
        if pause.kind == "credits":
            balance = Account.objects.select_for_update().get(pk=account.pk).microcredit_balance
            if balance < pause.required_microcredits:
                missing = pause.required_microcredits - balance
                raise ServiceError(
                    409,
                    f"Insufficient credits: {missing} more microcredits are needed before continuing.",
                    missing_microcredits=str(missing),
                )
        continuation = Run.objects.create(
            account=account,
            computer=run.computer,
            task=run.task,
            agent_config=run.agent_config,
            max_model_calls=run.max_model_calls,
            continued_from=run,
        )
        run_event_append(run=run, kind="run_continued", data={"continued_run_id": str(continuation.id)})
        run_event_append(run=continuation, kind="run_created", data={"continued_from": str(run.id)})
        run.refresh_from_db()
        body = json_bytes(
            ContinueOut(continued_from=run.id, run=RunOut.model_validate(run_to_wire(continuation))).to_wire()
        )
        IdempotencyRecord.objects.create(
            account=account, key=idempotency_key, request_digest=request_digest, status_code=201, response_body=body
        )
        _on_commit_send(run_intervention_closed, run.id)
        _on_commit_send(run_queued, continuation.id)
    return 201, body


def run_cancel(*, run: Run) -> Run:
    """Cancel a run that has not finished; its intervention becomes unavailable."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.CANCELLED:
            return run
        if run.status in Run.TERMINAL:
            raise ServiceError(409, f"The run already {run.status}; it cannot be cancelled.")
        next_id = continuation_id(run)
        if next_id is not None:
            raise ServiceError(
                409, f"The run was continued as {next_id}; cancel that run instead.", continued_run_id=str(next_id)
            )
        _set_result(run, CancelledResult(outcome="cancelled").model_dump(mode="json"), Run.Status.CANCELLED)
        CredentialRequest.objects.filter(
            run=run, state__in=[CredentialRequest.State.PENDING, CredentialRequest.State.CREDENTIAL_SAVED]
        ).update(state=CredentialRequest.State.CANCELLED)
        ConnectionRequest.objects.filter(run=run, state=ConnectionRequest.State.PENDING).update(
            state=ConnectionRequest.State.CANCELLED
        )
        run_event_append(run=run, kind="run_cancelled")
        _on_commit_send(run_intervention_closed, run.id)
    return run


def idempotency_records_expire() -> int:
    """Forget continuation keys older than the retention (at least 24 h)."""
    hours = max(24, settings.RAM_IDEMPOTENCY_RETENTION_HOURS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - timedelta(hours=hours)).delete()
    return deleted


def credential_requests_expire() -> int:
    """Mark pending credential requests past their deadline as expired."""
    return CredentialRequest.objects.filter(
        state=CredentialRequest.State.PENDING, expires_at__lte=timezone.now()
    ).update(state=CredentialRequest.State.EXPIRED)
