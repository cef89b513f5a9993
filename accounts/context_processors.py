"""What every page shows the signed-in person once (e.g. failed sign-ins for their username)."""

from typing import Any

from django.http import HttpRequest

from accounts.services import SIGN_IN_NOTICE


def sign_in_notice(request: HttpRequest) -> dict[str, Any]:
    session = getattr(request, "session", None)
    if session is None or not request.user.is_authenticated or SIGN_IN_NOTICE not in session:
        return {}
    return {"sign_in_notice": session.pop(SIGN_IN_NOTICE)}
