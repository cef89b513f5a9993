"""State transitions of visual sessions: create (with its ticket), consume the
ticket at the handshake, end; and recording a person's control in the runs it concerns."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Account, ApiKey
from computers.selectors import computer_is_ready, ready_computer
from core.errors import DomainError, TooMany
from visual import selectors
from visual.contracts import CONNECT_EXPIRES_IN_SECONDS
from visual.errors import (
    ComputerNotReady,
    TicketRefused,
    TooManyAccountSockets,
    TooManyAccountTickets,
    TooManySockets,
    TooManyTickets,
)
from visual.limits import TICKET_BYTES
from visual.models import VisualSession, VisualTicket


def ticket_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


# Any 64-bit number unique among the installation's advisory locks.
_ADMISSION_LOCK = 0x52414D5649535541  # "RAMVISUA"


def _serialise_admissions() -> None:
    """Hold the gateway's admission lock until the transaction ends.

    Counting sessions and then inserting one is only safe when no other
    admission runs in between. PostgreSQL gets a transaction-scoped advisory
    lock; SQLite's transactions already begin IMMEDIATE (one writer at a time).
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_ADMISSION_LOCK])


def _check_socket_limits(*, account_id: UUID, now: datetime) -> None:
    if selectors.open_socket_count(now=now, account_id=account_id) >= settings.RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT:
        raise TooManyAccountSockets(
            f"Your account has {settings.RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT} open visual sessions, its limit; "
            "close one and try again."
        )
    if selectors.open_socket_count(now=now) >= settings.RAM_VISUAL_MAX_SOCKETS:
        raise TooManySockets()


def visual_session_create(
    *, account: Account, computer_id: str, mode: str, api_key: ApiKey | None = None, user: User | None = None
) -> tuple[VisualSession, str]:
    """A session on the account's own ready computer and its ticket (returned once, stored as a digest).

    The per-account limits sit below the gateway's; both are counted and the
    session inserted under one lock, so concurrent creates never overshoot them.
    """
    computer = ready_computer(account=account, computer_id=computer_id)
    if computer is None:
        raise ComputerNotReady()
    with transaction.atomic():
        _serialise_admissions()
        now = timezone.now()
        _check_socket_limits(account_id=account.pk, now=now)
        if (
            selectors.pending_ticket_count(now=now, account_id=account.pk)
            >= settings.RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT
        ):
            raise TooManyAccountTickets(
                f"Your account has {settings.RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT} unused visual session "
                "tickets, its limit; use them or wait a minute and try again."
            )
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


def visual_origin_possible(*, origin: str | None) -> bool:
    """Whether a handshake's ``Origin`` could be allowed for some ticket: none (a native app), the
    public origin, or one of ``RAM_VISUAL_TICKET_ORIGINS``. ``null`` never is."""
    return origin is None or origin == settings.RAM_PUBLIC_ORIGIN or origin in settings.RAM_VISUAL_TICKET_ORIGINS


def _origin_refused(*, origin: str | None, made_by_key: bool) -> bool:
    if not made_by_key:
        return origin != settings.RAM_PUBLIC_ORIGIN
    return not visual_origin_possible(origin=origin)


def visual_ticket_consume(*, raw_ticket: str, origin: str | None) -> Binding:
    """Use a ticket once, within 60 s, and bind the socket to the computer's current generation.

    ``origin`` is the handshake's ``Origin`` (``None`` when it sent none): a ticket a cookie session
    made needs the exact public origin, one a runner key made also a listed app origin or none.

    A refused handshake still uses the ticket up and ends its session: the refusal is raised
    only after that is committed (raising inside the transaction would roll it back and leave
    the ticket usable for a second attempt).
    """
    refusal: DomainError | None = None
    with transaction.atomic():
        _serialise_admissions()
        now = timezone.now()
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
        if _origin_refused(origin=origin, made_by_key=session.api_key_id is not None):
            _end(session, "refused at handshake", now)
            refusal = TicketRefused("Origin not allowed.")
        elif problem is not None or not computer_is_ready(session.computer):
            _end(session, "refused at handshake", now)
            refusal = TicketRefused(problem or "The computer is not ready; create a new session later.")
        else:
            try:
                _check_socket_limits(account_id=session.account_id, now=now)
            except TooMany as exc:
                _end(session, "socket limit", now)
                refusal = exc
            else:
                session.connected_at = now
                session.generation = session.computer.generation
                session.save(update_fields=["connected_at", "generation"])
    if refusal is not None:
        raise refusal
    return Binding(
        session_id=str(session.id),
        account_id=str(session.account_id),
        computer_id=session.computer_id,
        mode=session.mode,
        generation=str(session.generation),
        executor_address=session.computer.executor_address,
        api_key_id=str(session.api_key_id) if session.api_key_id else None,
    )


def visual_tickets_burn(*, raw_tickets: list[str], reason: str) -> int:
    """Consume tickets offered in a refused handshake: the spec allows one connection attempt per ticket."""
    if not raw_tickets:
        return 0
    now = timezone.now()
    digests = [ticket_digest(raw) for raw in raw_tickets]
    with transaction.atomic():
        burned = list(
            VisualTicket.objects.select_for_update()
            .filter(digest__in=digests, consumed_at__isnull=True)
            .values_list("session_id", flat=True)
        )
        VisualTicket.objects.filter(session_id__in=burned).update(consumed_at=now)
        VisualSession.objects.filter(pk__in=burned, ended_at__isnull=True).update(ended_at=now, end_reason=reason[:100])
    return len(burned)


def visual_sessions_expire_unused(*, now: datetime | None = None) -> int:
    """End the sessions whose ticket expired unused: nothing can connect to them any more.

    Each one is ended once (``ticket_expired``); its ticket stays as it is, unconsumed and expired,
    so it can never be used. Returns how many sessions were ended.
    """
    now = now or timezone.now()
    return VisualSession.objects.filter(
        ended_at__isnull=True,
        connected_at__isnull=True,
        ticket__consumed_at__isnull=True,
        ticket__expires_at__lte=now,
    ).update(ended_at=now, end_reason="ticket_expired")


def _end(session: VisualSession, reason: str, now: object) -> None:
    VisualSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(ended_at=now, end_reason=reason[:100])


def visual_session_end(*, session_id: str, reason: str) -> None:
    VisualSession.objects.filter(pk=session_id, ended_at__isnull=True).update(
        ended_at=timezone.now(), end_reason=reason[:100]
    )


