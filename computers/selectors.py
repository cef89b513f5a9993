"""Reads about computers: which ones an account has and whether they are ready."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from accounts.models import Account
from computers.contracts import ComputerBrowserOut, ComputerOut, ComputerProxyOut, ComputerSettingsOut, ComputerState
from computers.models import Computer
from executor.contracts import PROVIDER_OF_BACKEND, ComputerSettings, computer_settings
from executor.server_link import BrowserConfig


def heartbeat_stale_after() -> timedelta:
    """An executor heartbeats every ``HEARTBEAT_SECONDS`` (5 s) from a thread of its own; one silent
    for ``RAM_EXECUTOR_STALE_SECONDS`` (default 10 s: two heartbeats) is dead to the server."""
    return timedelta(seconds=float(settings.RAM_EXECUTOR_STALE_SECONDS))


def computer_is_ready(computer: Computer) -> bool:
    return (
        computer.is_active
        and computer.status == Computer.Status.READY
        and computer.generation is not None
        and bool(computer.executor_address)
        and computer.last_heartbeat_at is not None
        and timezone.now() - computer.last_heartbeat_at < heartbeat_stale_after()
    )


# A run holds its computer (running, or paused at a takeover: ``Run.holds_computer``), or a person has
# a control session of the screen open on it.
_HELD = Q(runs__holds_computer=True) | Q(
    visual_sessions__mode="control", visual_sessions__connected_at__isnull=False, visual_sessions__ended_at__isnull=True
)


def _held() -> Exists:
    return Exists(Computer.objects.filter(_HELD, pk=OuterRef("pk")))


def computers_for_account(*, account: Account) -> QuerySet[Computer]:
    """The account's active computers, each with ``held`` (see ``computer_state``), in one query."""
    return Computer.objects.filter(account=account, is_active=True).annotate(held=_held()).order_by("handle")


FAILED_STATE_TEXT = "Its browser failed; the computer's executor must start again (a new generation)."


def computer_state(computer: Computer) -> tuple[ComputerState, str | None]:
    """``(state, reason)``: ``ready`` (``available``: a visual session can be created now) or ``busy``
    (the same, while a run or a person's control session holds it), ``stopped`` (no executor
    serves it), or ``failed`` with a reason a person can read (its browser failed, or its executor
    stopped answering without stopping)."""
    if computer.status == Computer.Status.FAILED:
        return "failed", FAILED_STATE_TEXT
    if computer.status != Computer.Status.READY or computer.generation is None or not computer.executor_address:
        # On demand (computers.placement): wanted and not ready yet, or no longer wanted and still on its host.
        if computer.wanted_running:
            return "starting", None
        return ("stopping", None) if computer.host_id is not None else ("stopped", None)
    if not computer.wanted_running and computer.host_id is not None:
        return "stopping", None
    if not computer_is_ready(computer):
        seconds = int(heartbeat_stale_after().total_seconds())
        return "failed", f"Its executor has not been heard from for over {seconds} s (RAM_EXECUTOR_STALE_SECONDS)."
    held = getattr(computer, "held", None)
    if held is None:
        held = Computer.objects.filter(_HELD, pk=computer.pk).exists()
    return ("busy", None) if held else ("ready", None)


def ready_computer(*, account: Account, computer_id: str) -> Computer | None:
    """The account's own computer if it is active and its executor is ready."""
    computer = Computer.objects.filter(handle=computer_id, account=account).first()
    if computer is None or not computer_is_ready(computer):
        return None
    return computer


def computer_binding_holds(*, computer_id: str, account_id: str, binding: str) -> bool:
    """The computer still belongs to ``account_id`` under ``binding`` (a run's binding, checked now).

    Called from the executor's worker threads, which keep no connection open.
    """
    try:
        uuid.UUID(account_id)
        uuid.UUID(binding)
    except ValueError:
        return False
    try:
        return Computer.objects.filter(pk=computer_id, account_id=account_id, binding=binding, is_active=True).exists()
    finally:
        connection.close()


def computer_is_draining(computer_id: str | None) -> bool:
    return computer_id is not None and Computer.objects.filter(pk=computer_id, draining=True).exists()


def computer_browser_config(computer_id: str) -> BrowserConfig | None:
    """What the executor needs to obtain its computer's browser (None for an unknown computer)."""
    try:
        computer = Computer.objects.filter(pk=computer_id).first()
        if computer is None:
            return None
        return BrowserConfig(
            backend=computer.browser_backend,
            options=dict(computer.browser_options or {}),
            account_id=str(computer.account_id),
            leftover_session_id=computer.browser_session_id,
        )
    finally:
        connection.close()


def computer_profile_generation(*, computer_id: str) -> uuid.UUID | None:
    """The name of the computer's current browser profile (None for an unknown computer).

    Called from the executor's worker threads, which keep no connection open.
    """
    try:
        return Computer.objects.filter(pk=computer_id).values_list("profile_generation", flat=True).first()
    finally:
        connection.close()


@dataclass(frozen=True)
class LaunchSettings:
    settings: ComputerSettings
    account_id: str


def computer_launch_settings(computer_id: str) -> LaunchSettings | None:
    """The computer's browser settings as its browser starts (None for an unknown computer;
    ValueError for stored settings that no longer pass the checks).

    Called from the executor's worker threads, which keep no connection open.
    """
    try:
        row = Computer.objects.filter(pk=computer_id).values_list("browser_settings", "account_id").first()
        if row is None:
            return None
        return LaunchSettings(settings=computer_settings(row[0]), account_id=str(row[1]))
    finally:
        connection.close()


def computer_out(computer: Computer) -> ComputerOut:
    """The computer as its account sees it (REST and MCP)."""
    state, reason = computer_state(computer)
    return ComputerOut(
        id=computer.handle,
        name=computer.name,
        available=computer_is_ready(computer),
        status=computer.status,  # type: ignore[arg-type]
        state=state,
        state_reason=reason,
        browser=ComputerBrowserOut(
            backend=computer.browser_backend,  # type: ignore[arg-type]
            provider=PROVIDER_OF_BACKEND[computer.browser_backend],  # type: ignore[arg-type]
            options=dict(computer.browser_options or {}),
            ready_ms=computer.browser_ready_ms,
        ),
        settings=_settings_out(computer),
    )


def _settings_out(computer: Computer) -> ComputerSettingsOut:
    stored = computer_settings(computer.browser_settings)
    return ComputerSettingsOut(
        locale=stored.locale,
        timezone=stored.timezone,
        user_agent=stored.user_agent,
        viewport=stored.viewport,
        proxy=None
        if stored.proxy is None
        else ComputerProxyOut(server=stored.proxy.server, credentials=stored.proxy.credentials),
    )
