"""REST endpoints of accounts: delegated sign-in links for embedding."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from accounts import services
from accounts.auth import RUNNER_KEY
from accounts.contracts import DelegateIn, DelegateOut
from accounts.models import ApiKey
from core.api import Router, json_response, operation

router = Router()


@operation(
    summary="Mint a one-time sign-in link for a user of the account (a delegated web session)",
    auth=RUNNER_KEY,
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


router.route("/api/sessions/delegate", post=session_delegate)
