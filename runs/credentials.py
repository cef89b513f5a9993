"""Stored portal credentials the person manages: what is shown of them, replacing
one through a new one-time Vault form, deleting one from the vault.

The web processes' Vault role can never read a credential, so everything shown
comes from ``StoredCredential``, written when a credential is saved. A
replacement is a person-initiated request (``CredentialReplacement``) under the
same invite rules as a run's request: one form, opened once, written by Vault
with the invite itself, dead at the deadline. A deletion destroys every version
and the metadata in Vault (a KV v2 soft delete could be undone) and is recorded
as an account event.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, AccountEvent
from runs.contracts import StoredCredentialList, StoredCredentialOut
from runs.errors import (
    InviteInvalid,
    ReplacementFormConflict,
    ReplacementFormNotFound,
    StoredCredentialNotFound,
    VaultDown,
    VaultRefusedForm,
)
from runs.models import CredentialReplacement, StoredCredential
from runs.pauses.credential import invite_revoke_quietly
from runs.selectors import parse_uuid
from runs.services import INVITE_SHAPE, stored_credential_record
from runs.tools import stored_credential_used as stored_credential_used  # where the tool records it
from vault_bridge.credentials import (
    PortalCredential,
    VaultRefused,
    VaultUnavailable,
    invite_create,
    portal_credential_destroy,
    portal_credential_save,
)

logger = logging.getLogger(__name__)

# --- reads -------------------------------------------------------------------


def stored_credentials_for_account(*, account: Account) -> list[StoredCredential]:
    return list(StoredCredential.objects.filter(account=account).select_related("last_used_run"))


def stored_credentials_wire(*, account: Account) -> dict[str, object]:
    """``StoredCredentialList`` on the wire: ids, labels, origins and dates; no secret, no username."""
    return StoredCredentialList(
        credentials=[
            StoredCredentialOut(
                credential_id=row.credential_id,
                label=row.label,
                origins=list(row.origins),
                saved_at=row.saved_at,
                last_used_at=row.last_used_at,
                last_used_run_id=row.last_used_run_id,
            )
            for row in StoredCredential.objects.filter(account=account)
        ]
    ).model_dump(mode="json")


def stored_credential_get(*, account: Account, credential_id: str) -> StoredCredential:
    row = StoredCredential.objects.filter(account=account, credential_id=credential_id).first()
    if row is None:
        raise StoredCredentialNotFound()
    return row


@dataclass(frozen=True)
class ReplacementForm:
    replacement: CredentialReplacement
    stored: StoredCredential | None


def credential_replacement_get(*, account: Account, replacement_id: str) -> ReplacementForm:
    row = CredentialReplacement.objects.filter(
        pk=parse_uuid(replacement_id, not_found=ReplacementFormNotFound), account=account
    ).first()
    if row is None:
        raise ReplacementFormNotFound()
    stored = StoredCredential.objects.filter(account=account, credential_id=row.credential_id).first()
    return ReplacementForm(replacement=row, stored=stored)


# --- transitions ---------------------------------------------------------------


def credential_replacement_open(*, account: Account, credential_id: str) -> str:
    """A new one-time Vault form for a stored credential; returns where to send the person.

    The request is committed before the invite exists, so a lost response never
    authorises minting a second invite for it.
    """
    stored = stored_credential_get(account=account, credential_id=credential_id)
    now = timezone.now()
    replacement = CredentialReplacement.objects.create(
        account=account,
        credential_id=stored.credential_id,
        expires_at=now + timedelta(seconds=settings.RAM_CREDENTIAL_REQUEST_TTL_SECONDS),
        opened_at=now,
    )
    try:
        invite = invite_create(
            request_id=replacement.id,
            account_id=account.id,
            credential_id=stored.credential_id,
            expires_at=replacement.expires_at,
        )
    except (VaultRefused, VaultUnavailable):
        CredentialReplacement.objects.filter(pk=replacement.pk).update(state=CredentialReplacement.State.EXPIRED)
        raise VaultDown("The vault could not issue the form; nothing was changed. Try again later.") from None
    return f"/credentials/forms/{replacement.id}#invite={invite}"


def credential_replacement_save(
    *, account: Account, replacement_id: str, invite: str, username: str, password: str, totp_secret: str | None
) -> CredentialReplacement:
    """Write the new version with the invite itself; the credential keeps its id and origins."""
    form = credential_replacement_get(account=account, replacement_id=replacement_id)
    replacement, stored = form.replacement, form.stored
    if replacement.state == CredentialReplacement.State.CREDENTIAL_SAVED:
        raise ReplacementFormConflict("This form was already used; the credential was replaced.")
    if replacement.state != CredentialReplacement.State.PENDING or replacement.expires_at <= timezone.now():
        raise ReplacementFormConflict("This form expired. Use Replace on the stored credentials page again.")
    if stored is None:
        raise ReplacementFormConflict("This credential was deleted meanwhile; nothing was saved.")
    if not INVITE_SHAPE.match(invite):
        raise InviteInvalid("This form has no valid invite; use Replace on the stored credentials page again.")
    credential = PortalCredential(
        username=username, password=password, origins=tuple(stored.origins), totp_secret=totp_secret
    )
    try:
        portal_credential_save(
            invite=invite, account_id=account.id, credential_id=stored.credential_id, credential=credential
        )
    except VaultRefused:
        raise VaultRefusedForm(
            "The vault refused this form: it was already used, expired or was withdrawn. Nothing was changed."
        ) from None
    except VaultUnavailable:
        raise VaultDown("The vault could not be reached. Check the stored credential before trying again.") from None
    now = timezone.now()
    with transaction.atomic():
        done = CredentialReplacement.objects.filter(
            pk=replacement.pk, state=CredentialReplacement.State.PENDING
        ).update(state=CredentialReplacement.State.CREDENTIAL_SAVED, saved_at=now)
        if done != 1:
            raise ReplacementFormConflict("This form changed while saving; check the stored credential.")
        stored_credential_record(
            account=account,
            credential_id=stored.credential_id,
            label=stored.label,
            origins=list(stored.origins),
            username=username,
            saved_at=now,
        )
        AccountEvent.objects.create(
            account=account,
            kind="credential_replaced",
            data={"credential_id": stored.credential_id, "replacement_id": str(replacement.id)},
            actor="person",
        )
        transaction.on_commit(lambda: invite_revoke_quietly(replacement.id))
    replacement.refresh_from_db()
    return replacement


def stored_credential_delete(*, account: Account, credential_id: str, actor: str) -> None:
    """Destroy every version and the metadata in Vault, then forget what was shown; recorded as an event."""
    stored = stored_credential_get(account=account, credential_id=credential_id)
    try:
        portal_credential_destroy(account_id=account.id, credential_id=stored.credential_id)
    except (VaultRefused, VaultUnavailable):
        raise VaultDown("The vault could not delete the credential; it is still stored. Try again later.") from None
    with transaction.atomic():
        deleted, _ = StoredCredential.objects.filter(pk=stored.pk).delete()
        if deleted:
            AccountEvent.objects.create(
                account=account,
                kind="credential_deleted",
                data={"credential_id": stored.credential_id, "label": stored.label},
                actor=actor,
            )
    # An outstanding form for it can no longer write anything.
    for replacement_id in CredentialReplacement.objects.filter(
        account=account, credential_id=stored.credential_id, state=CredentialReplacement.State.PENDING
    ).values_list("id", flat=True):
        _withdraw(replacement_id)


def _withdraw(replacement_id: uuid.UUID) -> None:
    CredentialReplacement.objects.filter(pk=replacement_id, state=CredentialReplacement.State.PENDING).update(
        state=CredentialReplacement.State.EXPIRED
    )
    invite_revoke_quietly(replacement_id)


def credential_replacements_expire() -> int:
    """Mark replacement forms past their deadline expired and delete their invites' policies."""
    ids = list(
        CredentialReplacement.objects.filter(
            state=CredentialReplacement.State.PENDING, expires_at__lte=timezone.now()
        ).values_list("id", flat=True)
    )
    for replacement_id in ids:
        _withdraw(replacement_id)
    return len(ids)
