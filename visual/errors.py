"""Named errors of the screen: sessions, tickets and viewer links."""

from core.errors import Conflict, Forbidden, InvalidInput, NotAuthenticated, TooMany, Unavailable


class ComputerNotReady(Conflict):
    code = "computer.not_ready"
    message_default = "No ready computer of your account has that id; check GET /api/computers."


class TooManySockets(TooMany):
    code = "visual.too_many_sockets"
    message_default = "Too many open visual sessions on this server; close one and try again."


class TooManyTickets(TooMany):
    code = "visual.too_many_tickets"
    message_default = "Too many unused visual session tickets; wait a minute and try again."


class TooManyAccountSockets(TooMany):
    """The account's own share of the gateway's sockets (RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT)."""

    code = "visual.too_many_account_sockets"
    message_default = "Your account has reached its limit of open visual sessions; close one and try again."


class TooManyAccountTickets(TooMany):
    """The account's own share of the gateway's pending tickets (RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT)."""

    code = "visual.too_many_account_tickets"
    message_default = "Your account has reached its limit of unused visual session tickets; wait a minute."


class TicketRefused(NotAuthenticated):
    code = "visual.ticket_refused"
    message_default = "The ticket is invalid, expired or already used; create a new session."


class CallerRefused(Forbidden):
    code = "visual.caller_refused"


class SignInRequired(NotAuthenticated):
    code = "visual.sign_in_required"
    message_default = "Authentication required: a runner key or a password sign-in."


class IntentMissing(InvalidInput):
    code = "visual.intent_missing"




class ComputerUnreachable(Unavailable):
    """The handshake's computer did not answer (or restarted) while its session opened."""

    code = "visual.computer_unreachable"
    message_default = "The computer is not reachable right now; try again with a new session."
