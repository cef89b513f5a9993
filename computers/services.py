"""State transitions of computers as their executor reports them."""

from __future__ import annotations

import dataclasses
import hmac
import uuid

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts.models import Account
from computers.errors import ComputerIdUsed, ComputerLimit, ExecutorTokenForeign, ExecutorTokenInvalid
from computers.models import Computer
from computers.profiles import profile_store_forget_on_commit
from computers.selectors import computer_browser_config, computer_launch_settings
from computers.tokens import executor_token_digest, executor_token_new, private_interface_token
from executor.contracts import BROWSER_BACKENDS, ComputerSettings, ProxySettings, browser_options, computer_settings
from executor.server_link import (
    HEARTBEAT_CURRENT,
    HEARTBEAT_ENDED,
    HEARTBEAT_REPLACED,
    TOKEN_PREFIX,
    BrowserConfig,
    LaunchConfig,
)
from vault_bridge.credentials import (
    VaultRefused,
    VaultUnavailable,
    browser_vendor_read_grant,
    browser_vendor_secret_write,
    computer_proxy_credentials_destroy,
    computer_proxy_credentials_read_grant,
    computer_proxy_credentials_write,
)


def executor_token_issue(*, computer_id: str) -> str:
    """A new executor token for the computer (shown once).

    The previous one stops working at once, and so does the executor that holds it: its
    generation ends here (the computer is offline until an executor registers with the new
    token), and its next heartbeat, refused, stops it.
    """
    raw, digest = executor_token_new()
    updated = Computer.objects.filter(pk=computer_id).update(
        executor_token_digest=digest, generation=None, status=Computer.Status.OFFLINE, executor_address=""
    )
    if updated != 1:
        raise Computer.DoesNotExist(computer_id)
    return raw


def executor_authenticate(*, computer_id: str, raw_token: str) -> None:
    """The token is ``computer_id``'s own executor token, else ExecutorTokenInvalid (no such token)
    or ExecutorTokenForeign (another computer's): a token reaches its own computer only."""
    if not raw_token.startswith(TOKEN_PREFIX):
        raise ExecutorTokenInvalid()
    digest = executor_token_digest(raw_token)
    own = Computer.objects.filter(pk=computer_id).values_list("executor_token_digest", flat=True).first()
    if own and hmac.compare_digest(own, digest):
        return
    if Computer.objects.filter(executor_token_digest=digest).exists():
        raise ExecutorTokenForeign()
    raise ExecutorTokenInvalid()


# Sent after commit when a computer's executor registered a new generation: runs waiting for it move.
computer_started = Signal()
# A computer no longer wanted has stopped: its host reported its executor gone (computers/placement.py).
computer_stopped = Signal()


def executor_register(*, computer_id: str, generation: uuid.UUID, address: str) -> bool:
    """Record a freshly started executor: its new generation, address, ``ready``.

    A deleted computer's executor registers only after it wiped the profile (its renewal after
    ``ended``, or its start, which deletes every profile but the current, new one): it is refused,
    its token ends here, and its next heartbeat, refused, stops it.
    """
    close_old_connections()
    updated = Computer.objects.filter(pk=computer_id, deleted_at__isnull=True).update(
        generation=generation,
        executor_address=address,
        status=Computer.Status.READY,
        last_heartbeat_at=timezone.now(),
        draining=False,
    )
    if updated != 1:
        Computer.objects.filter(pk=computer_id, deleted_at__isnull=False).update(executor_token_digest="")
    else:
        # The runs that wait for it (a start on demand) may start now.
        transaction.on_commit(lambda: computer_started.send(sender=Computer, computer_id=computer_id))
    return updated == 1


def executor_browser_config(*, computer_id: str) -> BrowserConfig | None:
    """What the computer's executor needs to obtain its browser at start, with a one-use grant
    that reads only its own account's secret of its backend (none for ``local``)."""
    config = computer_browser_config(computer_id)
    if config is None or not BROWSER_BACKENDS[config.backend].vault_secret:
        return config
    try:
        grant = browser_vendor_read_grant(account_id=config.account_id, vendor=config.backend)
    except (VaultRefused, VaultUnavailable):
        grant = ""  # the executor's read then fails with its own clear message; nothing is started
    return dataclasses.replace(config, vendor_grant=grant)


def executor_launch_settings(*, computer_id: str, proxy_grant: bool) -> LaunchConfig | None:
    """The computer's browser settings as its browser starts (None for an unknown computer), with,
    when asked and the proxy has credentials, a one-use grant that reads only this computer's
    upstream proxy credentials."""
    try:
        launch = computer_launch_settings(computer_id)
    except ValueError:  # stored settings that no longer pass the checks: the executor refuses to start
        return LaunchConfig(settings={}, account_id="", valid=False)
    if launch is None:
        return None
    grant = ""
    proxy = launch.settings.proxy
    if proxy_grant and proxy is not None and proxy.credentials:
        try:
            grant = computer_proxy_credentials_read_grant(account_id=launch.account_id, computer_id=computer_id)
        except (VaultRefused, VaultUnavailable):
            grant = ""  # the executor then refuses to start the browser without its proxy
    return LaunchConfig(
        settings=launch.settings.model_dump(mode="json", exclude_none=True),
        account_id=launch.account_id,
        proxy_grant=grant,
    )


def executor_private_token(*, computer_id: str, generation: uuid.UUID) -> str:
    """The token the gateway and workers present to this generation's private interface."""
    return private_interface_token(computer_id=computer_id, generation=generation)


def executor_heartbeat(*, computer_id: str, generation: uuid.UUID) -> str:
    """``current``; ``ended`` when the generation was ended (the computer moved to another
    account: wipe the browser and register a new one); ``replaced`` when another generation
    registered (stop)."""
    close_old_connections()
    updated = Computer.objects.filter(pk=computer_id, generation=generation).update(last_heartbeat_at=timezone.now())
    if updated == 1:
        return HEARTBEAT_CURRENT
    if Computer.objects.filter(pk=computer_id, generation__isnull=True).exists():
        return HEARTBEAT_ENDED
    return HEARTBEAT_REPLACED


# Sent after commit when a computer moved to another account: the old owner's open runs end.
computer_reassigned = Signal()
# Sent inside the transaction that deletes a computer: its account's open runs on it end with it.
computer_deleted = Signal()


def computer_create(*, account: Account, handle: str, name: str = "") -> Computer:
    """A new computer of the account, named ``handle`` there (``POST /api/computers``).

    Under the account's row lock: an id the account's computers have or had (a deleted computer
    keeps its row, so its id is never given again in that account) is refused, and so is a
    computer above ``RAM_ACCOUNT_MAX_COMPUTERS``. Another account's ids are not looked at: the same
    id may name a computer in each account. The global key the executor side knows is new and
    opaque (``c-`` and 32 hex digits); nothing starts the computer yet: it is ``stopped``.
    """
    with transaction.atomic():
        Account.objects.select_for_update().only("pk").get(pk=account.pk)
        if Computer.objects.filter(account=account, handle=handle).exists():
            raise ComputerIdUsed()
        if (
            Computer.objects.filter(account=account, deleted_at__isnull=True).count()
            >= settings.RAM_ACCOUNT_MAX_COMPUTERS
        ):
            raise ComputerLimit()
        return Computer.objects.create(id=f"c-{uuid.uuid4().hex}", handle=handle, account=account, name=name)


def computer_delete(*, computer: Computer) -> None:
    """Delete the account's computer (``DELETE /api/computers/{id}``).

    Its binding is revoked and a new one drawn (every run on it stops holding it: their links become
    unavailable), its generation ends (every visual session ends; a running executor wipes the
    browser profile at its next heartbeat, then is refused and stops), its profile is renamed (an
    executor offline now deletes the old one if it ever starts), its upstream proxy's credentials
    leave Vault, and its account's open runs on it are cancelled (``computer_deleted``, in the same
    transaction). The row stays, marked
    deleted: its id is never given again in the account, and its runs' history keeps its name.
    """
    with transaction.atomic():
        locked = Computer.objects.select_for_update().get(pk=computer.pk)
        if locked.deleted_at is not None:
            return
        account_id = locked.account_id
        old_settings = dict(locked.browser_settings or {})
        fields = _generation_end(locked)
        locked.deleted_at = timezone.now()
        locked.is_active = False
        locked.binding = uuid.uuid4()
        locked.draining = False
        locked.wanted_running = False  # its host stops its executor; the slot frees once it is gone
        locked.browser_settings = {k: v for k, v in old_settings.items() if k != "proxy"}
        locked.save(
            update_fields=[
                *fields, "deleted_at", "is_active", "binding", "draining", "wanted_running", "browser_settings"
            ]
        )
        computer_id = locked.pk
        transaction.on_commit(
            lambda: _forget_proxy_of_previous_owner(computer_id=computer_id, account_id=account_id, stored=old_settings)
        )
        # In the same transaction: the deletion and the end of its runs are one change.
        computer_deleted.send(sender=Computer, computer_id=computer_id, account_id=account_id)


def computer_reassign(*, computer_id: str, account: Account) -> Computer:
    """Move a computer to another account.

    A new binding (every run of the old owner stops holding it), the executor's generation
    ended (it wipes its browser profile — cookies, storage, cache, downloads — and registers a
    new generation before anyone can use it again), and the old owner's open runs cancelled.
    """
    with transaction.atomic():
        computer = Computer.objects.select_for_update().get(pk=computer_id)
        previous = computer.account_id
        if previous == account.pk:
            return computer
        computer.account = account
        computer.binding = uuid.uuid4()
        # The old owner's upstream proxy (and its credentials in the old owner's Vault path) goes.
        old_settings = dict(computer.browser_settings or {})
        computer.browser_settings = {k: v for k, v in old_settings.items() if k != "proxy"}
        # A new profile name: even an executor that is offline now never loads the old owner's.
        computer.profile_generation = uuid.uuid4()
        computer.generation = None
        computer.status = Computer.Status.OFFLINE
        computer.executor_address = ""
        computer.save(
            update_fields=[
                "account",
                "binding",
                "profile_generation",
                "generation",
                "status",
                "executor_address",
                "browser_settings",
            ]
        )
        transaction.on_commit(
            lambda: _forget_proxy_of_previous_owner(computer_id=computer_id, account_id=previous, stored=old_settings)
        )
        transaction.on_commit(
            lambda: computer_reassigned.send(sender=Computer, computer_id=computer_id, previous_account_id=previous)
        )
    return computer


def computer_profile_reset(*, computer: Computer) -> Computer:
    """Wipe the computer's browser profile and start a new generation.

    The same path as a move to another account, within the account: a new profile name
    (the executor deletes every other profile of the computer before its browser starts,
    also when it is offline now) and the executor's generation ended (a running executor
    closes its browser, deletes the profile and registers a new generation; every visual
    session of the old one ends). Runs keep their binding: a run's next step uses the new
    generation, signed out everywhere.
    """
    with transaction.atomic():
        locked = Computer.objects.select_for_update().get(pk=computer.pk)
        fields = _generation_end(locked)
        locked.save(update_fields=fields)
    return locked


def _generation_end(computer: Computer) -> list[str]:
    """End the computer's generation with a new browser profile (the fields to save).

    Its running executor sees ``ended`` at its next heartbeat: it closes its browser (a vendor
    session released, the profile on disk wiped), obtains a new one from the computer's backend
    as the row says it now, and registers a new generation.
    """
    computer.profile_generation = uuid.uuid4()
    # Every stored copy of the old profile goes once this commits (computers/profiles.py).
    profile_store_forget_on_commit(computer_id=computer.pk)
    computer.generation = None
    computer.status = Computer.Status.OFFLINE
    computer.executor_address = ""
    return ["profile_generation", "generation", "status", "executor_address"]


def executor_stopped(*, computer_id: str, generation: uuid.UUID, failed: bool = False) -> None:
    close_old_connections()
    Computer.objects.filter(pk=computer_id, generation=generation).update(
        status=Computer.Status.FAILED if failed else Computer.Status.OFFLINE, executor_address=""
    )


def executor_process_gone(*, computer_id: str) -> None:
    """The process that served the computer died (its supervisor saw it): offline now, not after stale heartbeats.

    Whatever generation it had registered ends with it; the restarted executor registers a new one.
    """
    close_old_connections()
    Computer.objects.filter(pk=computer_id).exclude(status=Computer.Status.OFFLINE).update(
        status=Computer.Status.OFFLINE, executor_address=""
    )


def executor_drain_start(*, computer_id: str) -> bool:
    """Stop new steps on the computer until its executor restarts; False for an unknown computer."""
    return Computer.objects.filter(pk=computer_id).update(draining=True) == 1


def computer_browser_session_record(*, computer_id: str, session_id: str, ready_ms: int | None) -> None:
    """The vendor session the starting generation holds (kept for release after a crash) and its cold start.

    Called from the executor's worker threads, which keep no connection open."""
    try:
        Computer.objects.filter(pk=computer_id).update(browser_session_id=session_id, browser_ready_ms=ready_ms)
    finally:
        connection.close()


def computer_browser_session_released(*, computer_id: str, session_id: str) -> None:
    """Forget a released session (only that one: a newer generation may hold another)."""
    try:
        Computer.objects.filter(pk=computer_id, browser_session_id=session_id).update(browser_session_id="")
    finally:
        connection.close()


def computer_browser_set(
    *, computer: Computer, backend: str, options: dict[str, object] | None, secret: str | None = None
) -> Computer:
    """Choose the computer's browser backend; a running executor changes to it at once.

    The options are checked against the backend's closed model; a secret (an API key, an
    endpoint token) goes to Vault under the account, never to the database. Vault is written
    first: when it fails (``VaultRefused``/``VaultUnavailable`` propagate), nothing changed.
    A change — another backend, other options, or a new secret — ends the computer's
    generation like a profile reset: its running executor reloads its backend within its
    heartbeat and serves a new generation, signed out everywhere; an offline one starts on it.
    """
    checked = browser_options(backend, options)
    if backend != Computer.Backend.LOCAL and computer_settings(computer.browser_settings).proxy is not None:
        raise ValueError(
            f"the computer has an upstream proxy, which applies to the local backend only; remove it "
            f"(PUT /api/computers/{computer.pk}/settings) before choosing {backend}"
        )
    if secret is not None:
        if not BROWSER_BACKENDS[backend].vault_secret:
            raise ValueError(f"the {backend} backend takes no secret")
        browser_vendor_secret_write(account_id=computer.account_id, vendor=backend, secret=secret)
    stored = checked.model_dump(mode="json")
    with transaction.atomic():
        locked = Computer.objects.select_for_update().get(pk=computer.pk)
        changed = secret is not None or locked.browser_backend != backend or locked.browser_options != stored
        locked.browser_backend = backend
        locked.browser_options = stored
        fields = ["browser_backend", "browser_options"]
        if changed:
            locked.browser_ready_ms = None  # the new backend's cold start is measured when it starts
            fields += ["browser_ready_ms", *_generation_end(locked)]
        locked.save(update_fields=fields)
    for field in fields:  # the caller's instance says what the row says
        setattr(computer, field, getattr(locked, field))
    return locked


def computer_settings_set(
    *,
    computer: Computer,
    settings: ComputerSettings,
    proxy_username: str | None = None,
    proxy_password: str | None = None,
) -> Computer:
    """Replace the computer's browser settings (they apply when its browser next starts).

    A proxy's username and password go to Vault under the account, never to the database;
    without them a proxy at the same address keeps the stored ones. No proxy, or one without
    credentials at another address, deletes them. Vault is written first: when it fails,
    nothing changed (``VaultRefused``/``VaultUnavailable`` propagate).
    """
    if (proxy_username is None) != (proxy_password is None):
        raise ValueError("give the proxy's username and password together")
    if proxy_username is not None and settings.proxy is None:
        raise ValueError("proxy credentials need a proxy server")
    if settings.proxy is not None and computer.browser_backend != Computer.Backend.LOCAL:
        raise ValueError(
            f"the {computer.browser_backend} backend's network is not RAM's: an upstream proxy applies to the "
            "local backend only (use the vendor's own proxy options)"
        )
    previous = computer_settings(computer.browser_settings).proxy
    proxy = settings.proxy
    if proxy is not None:
        if proxy_username is not None and proxy_password is not None:
            computer_proxy_credentials_write(
                account_id=computer.account_id,
                computer_id=computer.pk,
                username=proxy_username,
                password=proxy_password,
            )
            proxy = ProxySettings(server=proxy.server, credentials=True)
        else:
            kept = previous is not None and previous.credentials and previous.server == proxy.server
            proxy = ProxySettings(server=proxy.server, credentials=kept)
    if previous is not None and previous.credentials and (proxy is None or not proxy.credentials):
        computer_proxy_credentials_destroy(account_id=computer.account_id, computer_id=computer.pk)
    stored = settings.model_copy(update={"proxy": proxy})
    computer.browser_settings = stored.model_dump(mode="json", exclude_none=True)
    computer.save(update_fields=["browser_settings"])
    return computer


def _forget_proxy_of_previous_owner(*, computer_id: str, account_id: object, stored: dict[str, object]) -> None:
    """A moved computer does not use its old owner's proxy: the credentials are deleted (best effort)."""
    try:
        proxy = computer_settings(stored).proxy
        if proxy is not None and proxy.credentials:
            computer_proxy_credentials_destroy(account_id=str(account_id), computer_id=computer_id)
    except (VaultRefused, VaultUnavailable, ValueError):
        pass
