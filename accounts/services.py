"""State transitions of accounts: API keys, web-session marking, credits, delegation."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.contrib.auth import login
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.http import HttpRequest
from django.utils import timezone

from accounts.errors import SignInLinkInvalid, StaffDelegationRefused, TopUpInvalid, UnknownKeyKind, UserNotFound
from accounts.models import Account, AccountEvent, ApiKey, DelegatedSignIn, Membership

SESSION_AUTH_METHOD = "ram_auth_method"
PASSWORD = "password"
DELEGATED = "delegated"

_KIND_TAG = {ApiKey.Kind.RUNNER: "rk", ApiKey.Kind.TASK_OBSERVER: "ok"}
DELEGATED_SIGN_IN_TTL = timedelta(seconds=120)

# Sent after a key is revoked: visual sessions opened with it end.
api_key_revoked = Signal()


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_key_create(*, account: Account, kind: str, name: str = "") -> tuple[ApiKey, str]:
    """Mint a key; the raw value is returned once and only its SHA-256 digest is kept."""
    if kind not in _KIND_TAG:
        raise UnknownKeyKind(f"Unknown API key kind {kind!r}.")
    prefix = secrets.token_hex(6)
    raw = f"ram_{_KIND_TAG[ApiKey.Kind(kind)]}_{prefix}_{secrets.token_urlsafe(32)}"
    key = ApiKey.objects.create(account=account, kind=kind, name=name, prefix=prefix, digest=digest(raw))
    return key, raw


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The live key for ``raw_key`` (constant-time digest comparison), else None."""
    parts = raw_key.split("_", 3)
    if len(parts) != 4 or parts[0] != "ram":
        return None
    key = ApiKey.objects.select_related("account").filter(prefix=parts[2]).first()
    if key is None or not hmac.compare_digest(key.digest, digest(raw_key)) or key.is_revoked:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > timedelta(seconds=60):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _on_key_revoked(key)
    return key


def _on_key_revoked(key: ApiKey) -> None:
    # Visual sessions opened with this key end; the gateway listens for this.
    api_key_revoked.send(sender=ApiKey, key=key)


def account_of_user(user: User | None) -> Account | None:
    if user is None or not user.is_authenticated:
        return None
    membership = Membership.objects.select_related("account").filter(user=user).first()
    return membership.account if membership else None


def session_login(*, request: HttpRequest, user: User, method: str) -> None:
    """Log ``user`` in (Django rotates the session id) and mark how they authenticated."""
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[SESSION_AUTH_METHOD] = method


def session_auth_method(request: HttpRequest) -> str | None:
    if not request.user.is_authenticated:
        return None
    return request.session.get(SESSION_AUTH_METHOD)


def account_top_up(*, account: Account, microcredits: int, actor: str) -> Account:
    if microcredits <= 0:
        raise TopUpInvalid("A top-up must be a positive number of microcredits.")
    with transaction.atomic():
        Account.objects.filter(pk=account.pk).update(microcredit_balance=F("microcredit_balance") + microcredits)
        account.refresh_from_db(fields=["microcredit_balance"])
        AccountEvent.objects.create(
            account=account,
            kind="credits_topped_up",
            data={"microcredits": str(microcredits), "balance": str(account.microcredit_balance)},
            actor=actor,
        )
    return account


def delegated_sign_in_create(*, key: ApiKey, username: str) -> str:
    """A one-time sign-in secret for a user of the key's account (for embedding)."""
    membership = (
        Membership.objects.select_related("user")
        .filter(account=key.account, user__username=username, user__is_active=True)
        .first()
    )
    if membership is None:
        raise UserNotFound()
    if membership.user.is_staff or membership.user.is_superuser:
        # A key must never mint a session for staff: they sign in with their password.
        raise StaffDelegationRefused()
    raw = secrets.token_urlsafe(32)
    DelegatedSignIn.objects.create(
        user=membership.user, digest=digest(raw), expires_at=timezone.now() + DELEGATED_SIGN_IN_TTL
    )
    return raw


def delegated_sign_in_consume(*, request: HttpRequest, raw: str) -> User:
    """Use a sign-in secret once; the resulting web session is marked ``delegated``."""
    now = timezone.now()
    with transaction.atomic():
        claimed = DelegatedSignIn.objects.filter(
            digest=digest(raw), used_at__isnull=True, expires_at__gt=now
        ).update(used_at=now)
        if claimed != 1:
            raise SignInLinkInvalid()
        user = DelegatedSignIn.objects.select_related("user").get(digest=digest(raw)).user
    session_login(request=request, user=user, method=DELEGATED)
    return user
