"""Headers every response carries: private pages are never cached, and never
refer to another origin (see ``SECURE_REFERRER_POLICY``)."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class PrivatePageHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/static/"):
            response["Cache-Control"] = "no-store"
        # A view may tighten it (no_referrer below); nothing loosens it.
        response.headers.setdefault("Referrer-Policy", settings.SECURE_REFERRER_POLICY)
        return response


def no_referrer(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """For pages whose own address holds a one-time value: they never send a Referer, even to us."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Referrer-Policy"] = "no-referrer"
        return response

    return wrapped
