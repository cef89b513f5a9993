"""The human pages' edge: the exact Origin check every state-changing browser
request passes, where a page sends the browser next, and the status each
error category gets on a page.

Django's CSRF middleware already requires the token; this adds an exact match
of ``Origin`` against ``RAM_PUBLIC_ORIGIN``: a missing Origin, ``null`` or any
other origin is refused, whatever the scheme.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from core.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    TooMany,
    Unavailable,
    Unprocessable,
    UpstreamFailed,
    status_for,
)

# The human pages' edge: the status of each error category. A page about a
# thing that is not found never says whether it exists in another account.
PAGE_STATUS: dict[type[DomainError], int] = {
    InvalidInput: 400,
    NotAuthenticated: 403,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Unprocessable: 409,
    TooMany: 429,
    UpstreamFailed: 502,
    Unavailable: 503,
}


def page_status(exc: DomainError) -> int:
    return status_for(exc, PAGE_STATUS)


def origin_is_public(request: HttpRequest) -> bool:
    return request.headers.get("Origin", "") == settings.RAM_PUBLIC_ORIGIN


def require_public_origin(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Refuse (403, nothing changed) a request whose Origin is not exactly this server's."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not origin_is_public(request):
            return render(
                request,
                "runs/unavailable.html",
                {
                    "title": "Request refused",
                    "message": "This request did not come from this site's own pages, so nothing was done. "
                    "Go back to the page and use its button.",
                },
                status=403,
            )
        return view(request, *args, **kwargs)

    return wrapped


def navigate(request: HttpRequest, target: str, status: int = 303) -> HttpResponse:
    """Send the browser on after a plain form post (a fragment in ``target``, the invite, stays in the browser)."""
    return HttpResponseRedirect(target, status=status)
