"""Named errors of the screen: sessions, tickets and viewer links."""

from core.errors import Conflict, Forbidden, InvalidInput, NotAuthenticated, TooMany


class ComputerNotReady(Conflict):
    code = "computer.not_ready"
    message_default = "No ready computer of your account has that id; check GET /api/computers."


class TooManySockets(TooMany):
    code = "visual.too_many_sockets"
    message_default = "Too many open visual sessions on this server; close one and try again."


class TooManyTickets(TooMany):
    code = "visual.too_many_tickets"
    message_default = "Too many unused visual session tickets; wait a minute and try again."


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
