"""State transitions of visual sessions: create (with its ticket), consume the
ticket at the handshake, end."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, ApiKey
from executor.selectors import computer_is_ready, ready_computer
from visual import selectors
from visual.contracts import CONNECT_EXPIRES_IN_SECONDS
from visual.errors import ComputerNotReady, TicketRefused, TooManySockets, TooManyTickets
from visual.limits import TICKET_BYTES
from visual.models import VisualSession, VisualTicket


def ticket_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def visual_session_create(
    *, account: Account, computer_id: str, mode: str, api_key: ApiKey | None = None, user: User | None = None
) -> tuple[VisualSession, str]:
    """A session on the account's own ready computer and its ticket (returned once, stored as a digest)."""
    computer = ready_computer(account=account, computer_id=computer_id)
    if computer is None:
        raise ComputerNotReady()
    now = timezone.now()
    with transaction.atomic():
        if selectors.open_socket_count(now=now) >= settings.RAM_VISUAL_MAX_SOCKETS:
            raise TooManySockets()
        if selectors.pending_ticket_count(now=now) >= settings.RAM_VISUAL_MAX_PENDING_TICKETS:
            raise TooManyTickets()
        session = VisualSession.objects.create(
            account=account, computer=computer, api_key=api_key, user=user, mode=mode
        )
        raw = secrets.token_urlsafe(TICKET_BYTES)
        VisualTicket.objects.create(
            session=session,
            digest=ticket_digest(raw),
            expires_at=now + timedelta(seconds=CONNECT_EXPIRES_IN_SECONDS),
        )
    return session, raw


@dataclass(frozen=True)
class Binding:
    """What an accepted socket is bound to; nothing of it comes from the client."""

    session_id: str
    account_id: str
    computer_id: str
    mode: str
    generation: str
    executor_address: str
    api_key_id: str | None


def visual_ticket_consume(*, raw_ticket: str) -> Binding:
    """Use a ticket once, within 60 s, and bind the socket to the computer's current generation."""
    now = timezone.now()
    with transaction.atomic():
        claimed = VisualTicket.objects.filter(
            digest=ticket_digest(raw_ticket), consumed_at__isnull=True, expires_at__gt=now
        ).update(consumed_at=now)
        if claimed != 1:
            raise TicketRefused()
        # The conditional update above is the single-use guarantee; this only reads.
        session = VisualSession.objects.select_related("computer", "api_key__account", "user", "account").get(
            ticket__digest=ticket_digest(raw_ticket)
        )
        problem = selectors.binding_problem(session=session, generation=None)
        if problem is not None or not computer_is_ready(session.computer):
            _end(session, "refused at handshake", now)
            raise TicketRefused(problem or "The computer is not ready; create a new session later.")
        if selectors.open_socket_count(now=now) >= settings.RAM_VISUAL_MAX_SOCKETS:
            _end(session, "socket limit", now)
            raise TooManySockets("Too many open visual sessions on this server.")
        session.connected_at = now
        session.generation = session.computer.generation
        session.save(update_fields=["connected_at", "generation"])
    return Binding(
        session_id=str(session.id),
        account_id=str(session.account_id),
        computer_id=session.computer_id,
        mode=session.mode,
        generation=str(session.generation),
        executor_address=session.computer.executor_address,
        api_key_id=str(session.api_key_id) if session.api_key_id else None,
    )


def _end(session: VisualSession, reason: str, now: object) -> None:
    VisualSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(ended_at=now, end_reason=reason[:100])


def visual_session_end(*, session_id: str, reason: str) -> None:
    VisualSession.objects.filter(pk=session_id, ended_at__isnull=True).update(
        ended_at=timezone.now(), end_reason=reason[:100]
    )
