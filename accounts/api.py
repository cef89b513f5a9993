"""REST endpoints of accounts: delegated sign-in links for embedding."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from accounts import services
from accounts.models import ApiKey
from ramsite.api import json_response, operation, route
from runs.contracts import DelegateIn, DelegateOut


@operation(
    summary="Mint a one-time sign-in link for a user of the account (a delegated web session)",
    body=DelegateIn,
    responses={201: DelegateOut, 404: "No such active user in the account."},
)
def session_delegate(request: HttpRequest, *, key: ApiKey, body: DelegateIn) -> HttpResponse:
    raw = services.delegated_sign_in_create(key=key, username=body.username)
    # The secret travels in the fragment: never sent to a server, never in a log.
    out = DelegateOut(
        url=f"{settings.RAM_PUBLIC_ORIGIN}/accounts/delegated#token={raw}",
        expires_in_seconds=int(services.DELEGATED_SIGN_IN_TTL.total_seconds()),
    )
    return json_response(out.model_dump(mode="json"), status=201)


delegate_view = route("/api/sessions/delegate", post=session_delegate)
