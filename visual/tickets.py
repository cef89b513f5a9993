"""The tickets a screen socket's handshake presents: where a ticket may be, and using up the rest.

A ticket is offered only as the subprotocol ``ram-ticket.<ticket>`` beside ``ram-jpeg-v1``
(``ticket_from``); a ticket-shaped word anywhere else in the handshake (its path, query string,
another subprotocol) may have reached a log, a proxy or a browser's history, so the handshake is
refused and every ticket it presented is used up (``presented_tickets_burn``). The consumer
(``visual/consumers.py``) decides; ``visual/services.py`` consumes and burns.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_plus

from visual import services
from visual.contracts import SUBPROTOCOL, TICKET_PROTOCOL_PREFIX

_TICKET = re.compile(r"^[A-Za-z0-9_-]{43}$")
# A ticket-shaped word (a run of the ticket's alphabet exactly as long as a ticket) anywhere else.
_TICKET_WORD = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")
# At most this many misplaced words are looked up (and used up) per handshake.
_MISPLACED_MAX = 16


def offered_tickets(subprotocols: list[str]) -> list[str]:
    """Every well-formed ticket among the offered subprotocols."""
    tickets = [p[len(TICKET_PROTOCOL_PREFIX) :] for p in subprotocols if p.startswith(TICKET_PROTOCOL_PREFIX)]
    return [t for t in tickets if _TICKET.match(t)]


def ticket_from(subprotocols: list[str]) -> str | None:
    """The ticket when the client offered exactly ``ram-jpeg-v1`` and one well-formed ticket protocol."""
    if SUBPROTOCOL not in subprotocols:
        return None
    tickets = [p[len(TICKET_PROTOCOL_PREFIX) :] for p in subprotocols if p.startswith(TICKET_PROTOCOL_PREFIX)]
    if len(tickets) != 1 or not _TICKET.match(tickets[0]):
        return None
    return tickets[0]


def misplaced_tickets(scope: dict[str, Any]) -> list[str]:
    """Every ticket-shaped word a handshake carries outside a ``ram-ticket.`` subprotocol: in its
    path, its query string (percent-decoded, twice encoded too) or another subprotocol.

    A ticket there may have reached a log, a proxy or a browser's history: the handshake is
    refused and each such ticket is used up like any ticket a refused handshake offered.
    """
    query = scope.get("query_string", b"").decode("latin-1")
    places = [str(scope.get("path", "")), scope.get("raw_path", b"").decode("latin-1"), query]
    for _ in range(2):
        query = unquote_plus(query)
        places.append(query)
    places += [p for p in scope.get("subprotocols", []) if not p.startswith(TICKET_PROTOCOL_PREFIX)]
    words = dict.fromkeys(word for place in places for word in _TICKET_WORD.findall(place))
    return list(words)[:_MISPLACED_MAX]


def presented_tickets_burn(scope: dict[str, Any], reason: str) -> int:
    """Use up every ticket a refused handshake presented, wherever it was (sync: the ORM)."""
    offered = offered_tickets(list(scope.get("subprotocols", [])))
    return services.visual_tickets_burn(raw_tickets=offered + misplaced_tickets(scope), reason=reason)
