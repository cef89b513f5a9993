"""``credential``: a person saves a portal credential in the vault through a one-time form."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from runs.contracts import CredentialAction, CredentialPause, HumanAction
from runs.errors import (
    CredentialFormAlreadyOpened,
    CredentialIdUnstorable,
    CredentialRequestExpired,
    InterventionUnavailable,
    VaultDown,
)
from runs.models import CredentialRequest, Run, RunStep
from runs.pauses.base import (
    DemoPlan,
    InterventionTexts,
    OpenIntervention,
    OpenState,
    PauseKind,
    Recheck,
    Unavailable,
    WaitingFacts,
)
from runs.state import run_event_append
from vault_bridge.credentials import (
    VaultRefused,
    VaultUnavailable,
    invite_create,
    invite_revoke,
    portal_credential_path,
)

logger = logging.getLogger(__name__)

SAVED_TEXTS = InterventionTexts(
    progress="The credential was saved in the vault. Nobody has signed in with it yet.",
    user_action="Nothing more is needed in the form. Sign-in, CAPTCHA or MFA may still need you on the computer.",
    next_step="Check the task, then ask for an explicit continuation; the task does not resume by itself.",
)


def credential_request_deadline_extend(*, run: Run, seconds: int) -> int:
    """Give the run's credential requests still pending and not yet opened a deadline ``seconds``
    from now (the demo's, which a person may read the docs before answering); how many.

    Before it is opened a request has no invite, so nothing else carries the old deadline."""
    return CredentialRequest.objects.filter(
        run=run, state=CredentialRequest.State.PENDING, opened_at__isnull=True
    ).update(expires_at=timezone.now() + timedelta(seconds=seconds))


def credential_request_pause(
    *,
    run: Run,
    portal_origin: str,
    label: str,
    reason: str = "authentication",
    ttl_seconds: int | None = None,
    credential_id: str = "",
) -> CredentialRequest:
    """Create a credential request with its deadline and pause the run on it.

    ``credential_id`` names where the person's credential will be stored (the
    agent later passes it to ``browser_login``); by default the request's id.
    """
    ttl = ttl_seconds if ttl_seconds is not None else settings.RAM_CREDENTIAL_REQUEST_TTL_SECONDS
    with transaction.atomic():
        request = CredentialRequest.objects.create(
            run=run,
            portal_origin=portal_origin,
            label=label,
            expires_at=timezone.now() + timedelta(seconds=ttl),
        )
        request.credential_id = credential_id or str(request.id)
        request.save(update_fields=["credential_id"])
        run_event_append(
            run=run,
            kind="credential_requested",
            data={
                "request_id": str(request.id),
                "portal_origin": portal_origin,
                "label": label,
                "credential_id": request.credential_id,
            },
        )
        KIND.pause(run=run, pause=CredentialPause(kind="credential", reason=reason, request_id=request.id))  # type: ignore[arg-type]
    return request


def invite_revoke_quietly(request_id: uuid.UUID) -> None:
    """Delete the invite's policy; its token dies at the request's deadline anyway."""
    try:
        invite_revoke(request_id=request_id)
    except (VaultRefused, VaultUnavailable):
        logger.warning("Could not revoke the invite of credential request %s; it expires at its deadline.", request_id)


class Credential(PauseKind):
    name = "credential"
    model = CredentialPause
    request_relation = "credential_requests"
    descriptor_kind = "credential"
    words = "Save a credential"
    # Its request row records its one opening (``opened_at``): the page says so from the row.
    notes_opening = False
    what_opening_does = (
        "Opening issues a one-time form for this request. It opens once, must be used before the deadline, "
        "and stores the credential in the vault: nobody signs in with it yet."
    )
    open_label = "Open the credential form"
    action_texts = (
        "Open the protected form and save the credential for this portal.",
        "Saving stores the credential; it does not sign in. Check the task, then ask for an explicit continuation.",
    )

    def required_action(self, *, run: Run, pause: CredentialPause, human_action: HumanAction) -> CredentialAction:
        # From the run's requests, which a list prefetches: no query per run.
        request = next(r for r in run.credential_requests.all() if r.pk == pause.request_id)
        return CredentialAction(
            version=1,
            resume="explicit_continue",
            kind="credential",
            reason=pause.reason,
            request_id=request.id,
            expires_at=request.expires_at,
            human_action=human_action,
        )

    def intervention(self, *, run: Run, pause: CredentialPause) -> OpenState:
        request = CredentialRequest.objects.filter(pk=pause.request_id, run=run).first()
        if request is None or request.state in (CredentialRequest.State.CANCELLED, CredentialRequest.State.EXPIRED):
            raise InterventionUnavailable("The credential request is no longer valid; ask for a new request.")
        if request.state == CredentialRequest.State.PENDING and request.expires_at <= timezone.now():
            raise InterventionUnavailable("The credential request expired; cancel the run or ask for a new request.")
        return OpenState(state=request.state, credential_request=request)

    def texts(self, *, reason: str, state: str) -> InterventionTexts:
        if state == CredentialRequest.State.CREDENTIAL_SAVED:
            return SAVED_TEXTS
        return super().texts(reason=reason, state=state)

    def unavailable(self, *, run: Run, pause: CredentialPause) -> Unavailable | None:
        request = CredentialRequest.objects.filter(pk=pause.request_id, run=run).first()
        if request is not None and (
            request.state == CredentialRequest.State.EXPIRED
            or (request.state == CredentialRequest.State.PENDING and request.expires_at <= timezone.now())
        ):
            return Unavailable(
                "This credential request expired",
                "Its deadline passed before a credential was saved. Nothing was stored. "
                "The task's operator can cancel the task and ask for a new request.",
            )
        if request is not None and request.state == CredentialRequest.State.CANCELLED:
            return Unavailable("This credential request was withdrawn", "Nothing was stored; there is nothing to do here.")
        return None

    def waiting(self, *, run: Run, pause: CredentialPause) -> WaitingFacts:
        request = CredentialRequest.objects.filter(pk=pause.request_id, run=run).first()
        if request is None:
            return WaitingFacts()
        pending = request.state == CredentialRequest.State.PENDING
        return WaitingFacts(portal_origin=request.portal_origin, deadline=request.expires_at if pending else None)

    def descriptor_request(self, *, current: OpenIntervention) -> dict[str, Any]:
        request = current.credential_request
        assert request is not None  # noqa: S101 - intervention() always sets it for this kind
        return {"request_id": request.id, "expires_at": request.expires_at}

    def open(self, *, current: OpenIntervention, recheck: Recheck) -> str:
        """Claim the request once (conditional update of ``opened_at``), then mint the invite."""
        run, request = current.run, current.credential_request
        assert request is not None  # noqa: S101
        if request.state != CredentialRequest.State.PENDING or request.opened_at is not None:
            raise CredentialFormAlreadyOpened()
        now = timezone.now()
        if request.expires_at <= now:
            raise CredentialRequestExpired()
        credential_id = request.credential_id or str(request.id)
        try:
            # Everything that can be checked is checked before the one-time claim is consumed.
            portal_credential_path(account_id=run.account_id, credential_id=credential_id)
        except ValueError:
            raise CredentialIdUnstorable() from None
        with transaction.atomic():
            claimed = CredentialRequest.objects.filter(
                pk=request.pk, state=CredentialRequest.State.PENDING, opened_at__isnull=True, expires_at__gt=now
            ).update(opened_at=now, credential_id=credential_id)
            if claimed != 1:
                raise CredentialFormAlreadyOpened()
            run_event_append(run=run, kind="credential_form_opened", data={"request_id": str(request.id)})
        # The claim is committed first: a lost response never authorises a second invite.
        try:
            invite = invite_create(
                request_id=request.id, account_id=run.account_id, credential_id=credential_id, expires_at=request.expires_at
            )
        except (VaultRefused, VaultUnavailable):
            raise VaultDown(
                "The vault could not issue the form; nothing was stored. Cancel the task and ask for a new request."
            ) from None
        try:
            fresh = recheck().credential_request
            if fresh is None or fresh.pk != request.pk or fresh.opened_at != now:
                raise CredentialFormAlreadyOpened()
        except DomainError:
            invite_revoke_quietly(request.id)
            raise
        # The invite travels only in the fragment, which browsers never send to a server.
        return f"/tasks/{run.id}/credential#invite={invite}"

    def request(self, *, run: Run, step: RunStep, arguments: Any) -> str | None:
        request = credential_request_pause(
            run=run,
            portal_origin=arguments.portal_origin,
            label=arguments.label,
            reason=arguments.reason,
            credential_id=arguments.credential_id or "",
        )
        return (
            f"A person was asked to save the credential. After the run is continued, call browser_login "
            f"with credentialId {request.credential_id!r}."
        )

    def cancel(self, *, run: Run) -> None:
        CredentialRequest.objects.filter(
            run=run, state__in=[CredentialRequest.State.PENDING, CredentialRequest.State.CREDENTIAL_SAVED]
        ).update(state=CredentialRequest.State.CANCELLED)

    def demo(self, *, origin: str, account: Any) -> DemoPlan:
        return DemoPlan([{"tool": "request_credential", "arguments": {"portal_origin": origin, "label": "Demo portal"}}])


KIND = Credential()
