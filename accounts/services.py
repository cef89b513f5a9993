"""State transitions of accounts: API keys, web-session marking, credits, delegation."""

from __future__ import annotations

import copy
import hashlib
import hmac
import math
import secrets
import threading
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.models import User
from django.core import signing
from django.db import transaction
from django.db.models import F
from django.dispatch import Signal
from django.http import HttpRequest
from django.utils import timezone

from accounts.errors import SignInLinkInvalid, StaffDelegationRefused, TopUpInvalid, UnknownKeyKind, UserNotFound
from accounts.models import Account, AccountEvent, ApiKey, DelegatedSignIn, Membership, SignInGuessing
from core.clock import SYSTEM_CLOCK, Clock

SESSION_AUTH_METHOD = "ram_auth_method"
PASSWORD = "password"
DELEGATED = "delegated"

_KIND_TAG = {ApiKey.Kind.RUNNER: "rk", ApiKey.Kind.TASK_OBSERVER: "ok"}
DELEGATED_SIGN_IN_TTL = timedelta(seconds=120)

# Sent after a key is revoked: visual sessions opened with it end.
api_key_revoked = Signal()
# Sent after an account is deactivated: its open visual sessions end.
account_deactivated = Signal()


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


# Keys that authenticated recently, per process: SHA-256 of the raw key -> (when read, the key with
# its account). A hit skips the lookup query (about half of a small request's CPU, make bench's api
# profile) for at most RAM_API_KEY_CACHE_SECONDS: revoking a key or deactivating an account through
# the services below takes effect at once in this process, and in every other process within that
# bound. Only keys that passed every check are kept; a refused key is read again every time.
# The bound is measured on this clock (tests move a ManualClock).
CLOCK: Clock = SYSTEM_CLOCK
_KEY_CACHE: dict[str, tuple[float, ApiKey]] = {}
_KEY_CACHE_LOCK = threading.Lock()
_KEY_CACHE_MAX = 4096


def api_key_cache_clear() -> None:
    with _KEY_CACHE_LOCK:
        _KEY_CACHE.clear()


def _key_cache_get(key_digest: str) -> ApiKey | None:
    seconds = float(settings.RAM_API_KEY_CACHE_SECONDS)
    if seconds <= 0:
        return None
    with _KEY_CACHE_LOCK:
        hit = _KEY_CACHE.get(key_digest)
    if hit is None or CLOCK.monotonic() - hit[0] >= seconds:
        return None
    # A copy per request: no request sees another's changes to the key or its account.
    key = copy.copy(hit[1])
    key.account = copy.copy(hit[1].account)
    return key


def _key_cache_put(key_digest: str, key: ApiKey) -> None:
    if float(settings.RAM_API_KEY_CACHE_SECONDS) <= 0:
        return
    kept = copy.copy(key)
    kept.account = copy.copy(key.account)
    with _KEY_CACHE_LOCK:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        _KEY_CACHE[key_digest] = (CLOCK.monotonic(), kept)


def _key_cache_forget(*, key_digest: str | None = None, account_id: Any = None) -> None:
    with _KEY_CACHE_LOCK:
        for cached, (_, key) in list(_KEY_CACHE.items()):
            if cached == key_digest or (account_id is not None and key.account_id == account_id):
                del _KEY_CACHE[cached]


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The live key for ``raw_key`` (constant-time digest comparison), else None."""
    parts = raw_key.split("_", 3)
    if len(parts) != 4 or parts[0] != "ram":
        return None
    key_digest = digest(raw_key)
    cached = _key_cache_get(key_digest)
    if cached is not None:
        _record_use(cached)
        return cached
    try:
        key = ApiKey.objects.select_related("account").get(prefix=parts[2])  # unique: no ORDER BY to compile
    except ApiKey.DoesNotExist:
        return None
    if not hmac.compare_digest(key.digest, key_digest) or key.is_revoked:
        return None
    _record_use(key)
    if key.account.is_active:
        _key_cache_put(key_digest, key)
    return key


def _record_use(key: ApiKey) -> None:
    """The key's last use, written at most once a minute."""
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > timedelta(seconds=60):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
        with _KEY_CACHE_LOCK:
            hit = _KEY_CACHE.get(key.digest)
            if hit is not None:
                hit[1].last_used_at = now


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _key_cache_forget(key_digest=key.digest)
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
    """Log ``user`` in with a new session id and CSRF token, and mark how they authenticated.

    Django's ``login`` keeps the session id when the same user signs in again, so a
    delegated session (whose cookie a runner-key holder may have planted) would
    become a password session under the same id. Every sign-in therefore starts
    from an empty session under a new id: nothing of the earlier session carries over.
    """
    request.session.flush()
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")  # cycles the id, rotates CSRF
    request.session[SESSION_AUTH_METHOD] = method


def session_auth_method(request: HttpRequest) -> str | None:
    if not request.user.is_authenticated:
        return None
    return request.session.get(SESSION_AUTH_METHOD)


def account_activity_set(*, account: Account, is_active: bool, actor: str) -> Account:
    """Activate or deactivate an account; deactivation ends its open screen sockets at once."""
    with transaction.atomic():
        changed = Account.objects.filter(pk=account.pk).exclude(is_active=is_active).update(is_active=is_active)
        account.is_active = is_active
        if changed:
            AccountEvent.objects.create(
                account=account, kind="account_activated" if is_active else "account_deactivated", actor=actor
            )
            if not is_active:
                _key_cache_forget(account_id=account.pk)
                account_deactivated.send(sender=Account, account=account)
    return account


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


# --- guessing: failures per username across addresses ------------------------

KNOWN_DEVICE_COOKIE = "ram_known_device"
_KNOWN_DEVICE_SALT = "ram.accounts.known-device"
SIGN_IN_NOTICE = "ram_sign_in_notice"


def _guessing_key(username: str) -> str:
    return username.strip().casefold()[:150]


def known_device_token(*, username: str) -> str:
    """A signed marker that this browser signed in as ``username`` (set after a password sign-in)."""
    return signing.dumps(_guessing_key(username), salt=_KNOWN_DEVICE_SALT, compress=True)


def known_device_matches(*, token: str | None, username: str) -> bool:
    if not token or not username:
        return False
    try:
        signed = signing.loads(token, salt=_KNOWN_DEVICE_SALT, max_age=timedelta(days=settings.RAM_KNOWN_DEVICE_DAYS))
    except signing.BadSignature:
        return False
    return bool(signed == _guessing_key(username))


def sign_in_wait(*, username: str, known_device: bool) -> int:
    """Seconds before a password attempt for ``username`` is evaluated (0: now).

    The same for an existing and an unknown username. A browser that signed in
    as this user before is never delayed, so a stranger's guessing cannot keep
    the person out (the hard lock per username and address still applies to it).
    """
    if known_device or not username.strip():
        return 0
    next_attempt_at = (
        SignInGuessing.objects.filter(username=_guessing_key(username)).values_list("next_attempt_at", flat=True).first()
    )
    now = timezone.now()
    if next_attempt_at is None or next_attempt_at <= now:
        return 0
    return max(1, math.ceil((next_attempt_at - now).total_seconds()))


def sign_in_failure_record(*, username: str, known_device: bool) -> None:
    """Count a failed password for ``username`` across addresses; past the free failures, delay the next one."""
    if known_device or not username.strip():
        return
    key, now = _guessing_key(username), timezone.now()
    with transaction.atomic():
        SignInGuessing.objects.get_or_create(username=key)
        row = SignInGuessing.objects.select_for_update().get(username=key)
        if row.last_failure_at and now - row.last_failure_at > timedelta(hours=settings.RAM_SIGN_IN_FAILURE_WINDOW_HOURS):
            row.failures = 0
        row.failures += 1
        row.last_failure_at = now
        over = row.failures - settings.RAM_SIGN_IN_FREE_FAILURES
        row.next_attempt_at = (
            now + timedelta(seconds=min(2**over, settings.RAM_SIGN_IN_MAX_DELAY_SECONDS)) if over >= 0 else None
        )
        row.save()
        if row.failures == settings.RAM_SIGN_IN_FREE_FAILURES:
            _guessing_notice(key=key, failures=row.failures)


def _guessing_notice(*, key: str, failures: int) -> None:
    """Tell the person's account (its event log; the person sees it at the next sign-in)."""
    for membership in Membership.objects.select_related("user").filter(user__username__iexact=key):
        AccountEvent.objects.create(
            account_id=membership.account_id,
            kind="sign_in_guessing",
            data={"username": membership.user.get_username(), "failures": failures},
            actor="system",
        )


def sign_in_success_record(*, username: str) -> int:
    """Forget the username's failures after a correct password; returns how many there were."""
    key = _guessing_key(username)
    failures = SignInGuessing.objects.filter(username=key).values_list("failures", flat=True).first() or 0
    SignInGuessing.objects.filter(username=key).delete()
    return int(failures)
