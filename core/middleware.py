"""Headers every response carries (private pages are never cached or referred), and HTTP metrics."""

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from core.metrics import HTTP_LATENCY, HTTP_REQUESTS


class PrivatePageHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/static/"):
            response["Cache-Control"] = "no-store"
        response["Referrer-Policy"] = "no-referrer"
        return response


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
