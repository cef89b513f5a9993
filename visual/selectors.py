"""Reads of visual sessions: limits and whether a socket's binding still holds."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from uuid import UUID

from accounts.models import Membership
from runs.models import Run
from visual.contracts import SESSION_MAX_SECONDS
from visual.models import VisualSession, VisualTicket


def open_socket_count(*, now: datetime, account_id: UUID | None = None) -> int:
    """Open sockets of the installation, or of one account."""
    # A socket never outlives 900 s, so older rows left by a crashed process do not count.
    sockets = VisualSession.objects.filter(
        connected_at__gt=now - timedelta(seconds=SESSION_MAX_SECONDS), ended_at__isnull=True
    )
    if account_id is not None:
        sockets = sockets.filter(account_id=account_id)
    return sockets.count()


def pending_ticket_count(*, now: datetime, account_id: UUID | None = None) -> int:
    """Tickets not yet used and not expired, of the installation or of one account."""
    tickets = VisualTicket.objects.filter(consumed_at__isnull=True, expires_at__gt=now)
    if account_id is not None:
        tickets = tickets.filter(session__account_id=account_id)
    return tickets.count()


def computer_current_task(*, account_id: uuid.UUID | str, computer_id: str) -> Run | None:
    """The task the person most likely came from: the computer's newest unfinished run
    of that account, one waiting for a person first."""
    runs = Run.objects.filter(account_id=account_id, computer_id=computer_id).exclude(status__in=Run.TERMINAL)
    return (
        runs.filter(status=Run.Status.WAITING_FOR_INPUT).order_by("-created_at").first()
        or runs.order_by("-created_at").first()
    )


def binding_problem(*, session: VisualSession, generation: str | None) -> str | None:
    """Why the socket may no longer show this computer, or None while it may."""
    computer = session.computer
    if session.ended_at is not None:
        return "The session has ended; reconnect with a new session."
    if computer.account_id != session.account_id or not computer.is_active:
        return "This computer is no longer assigned to your account."
    if generation is not None and str(computer.generation) != generation:
        return "Computer restarted; reconnect."
    if session.api_key is not None and (session.api_key.is_revoked or not session.api_key.account.is_active):
        return "The API key that opened this session was revoked."
    if session.api_key is None:
        user = session.user
        if (
            user is None
            or not user.is_active
            or not Membership.objects.filter(user=user, account_id=session.account_id).exists()
        ):
            return "Your access to this account ended."
    if not session.account.is_active:
        return "The account is inactive."
    return None


def session_problem(*, session_id: str, generation: str) -> str | None:
    session = (
        VisualSession.objects.select_related("computer", "api_key__account", "user", "account")
        .filter(pk=session_id)
        .first()
    )
    if session is None:
        return "The session no longer exists."
    return binding_problem(session=session, generation=generation)


def session_holder(*, session_id: str) -> str:
    """Who a visual session is for, as a run's timeline names them: the person's username, or
    the API key's name for a session a harness created (never the key itself)."""
    session = VisualSession.objects.select_related("user", "api_key").filter(pk=session_id).first()
    if session is None:
        return ""
    if session.user is not None:
        return str(session.user.get_username())
    if session.api_key is not None:
        return f"API key {session.api_key.name or session.api_key.pk}"
    return ""
