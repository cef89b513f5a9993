"""Headers every response carries (private pages are never cached, and never refer to another
origin: see ``SECURE_REFERRER_POLICY``), and HTTP metrics."""

import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse

from core.metrics import HTTP_LATENCY, HTTP_REQUESTS


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

class HttpMetricsMiddleware:
    """Count and time every answer by its URL pattern (``api/runs/<str:run_id>``), never the raw path."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        # Answers given before URL resolution (the probes) name their route themselves.
        route = getattr(request, "metrics_route", None) or (
            ("/" + match.route) if match is not None and match.route else "unmatched"
        )
        if request.path.startswith("/static/"):
            route = "/static/"
        method = request.method if request.method in _METHODS else "OTHER"
        HTTP_REQUESTS.labels(route=route, method=method, status=str(response.status_code)).inc()
        HTTP_LATENCY.labels(route=route, method=method).observe(time.perf_counter() - started)
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class AnonymousUserMiddleware:
    """``request.user`` of an API-key request (``core.asgi_handler.KEY_REQUEST_SKIPS``): never the
    signed-in user, whatever cookies it carries, so nothing it reaches can act as one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.user = AnonymousUser()
        return self.get_response(request)
