"""Named errors of accounts: authentication, keys, delegation, credits."""

from core.errors import Forbidden, InvalidInput, NotAuthenticated, NotFound


class KeyMissing(NotAuthenticated):
    code = "auth.key_missing"
    message_default = "Authentication required: send Authorization: Bearer <API key>."


class KeyInvalid(NotAuthenticated):
    code = "auth.key_invalid"
    message_default = "The API key is invalid or revoked."


class KeyKindRefused(Forbidden):
    code = "auth.key_kind_refused"


class AccountInactive(Forbidden):
    code = "account.inactive"
    message_default = "The account is inactive."


class PasswordSessionRequired(Forbidden):
    code = "auth.password_session_required"


class UnknownKeyKind(InvalidInput):
    code = "key.unknown_kind"


class TopUpInvalid(InvalidInput):
    code = "credits.top_up_invalid"


class UserNotFound(NotFound):
    code = "account.user_not_found"
    message_default = "No active user with that username in this account."


class StaffDelegationRefused(Forbidden):
    code = "delegation.staff_refused"
    message_default = "Sign-in links cannot be made for staff users."


class SignInLinkInvalid(Forbidden):
    code = "delegation.link_invalid"
    message_default = "This sign-in link is invalid, expired or already used."
