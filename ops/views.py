"""The operators' endpoints: ``/healthz``, ``/readyz`` and ``/metrics``.

The probes are answered by ``ProbeMiddleware`` before host validation and the
HTTPS redirect, because load balancers and orchestrators call them by a
host's private address over plain HTTP. Without the operators' token
(``RAM_OPS_TOKEN``) ``/readyz`` says only ``ready`` or ``not_ready``; with it,
each check's status and latency and each computer's executor. ``/metrics`` on
the public origin exists only with that token; ``manage.py serve_metrics``
serves the same scrape on a private address.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST

from core.api import error_response, json_response
from ops.health import computer_readiness, readiness
from ops.metrics import scrape

HEALTHZ = "/healthz"
READYZ = "/readyz"


def has_ops_token(request: HttpRequest) -> bool:
    expected = str(settings.RAM_OPS_TOKEN)
    header = request.headers.get("Authorization", "")
    if not expected or not header.startswith("Bearer "):
        return False
    return secrets.compare_digest(header.removeprefix("Bearer ").encode(), expected.encode())


def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers; no dependency is touched."""
    return json_response({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    detailed = has_ops_token(request)
    computer_id = request.GET.get("computer")
    if computer_id is not None:
        if not detailed:
            return error_response(401, "A computer's readiness needs the operators' token.")
        one = computer_readiness(computer_id)
        if one is None:
            return error_response(404, "No such active computer.")
        return json_response(one.to_wire(), status=200 if one.ready else 503)
    result = readiness()
    body: dict[str, object] = {"status": "ready" if result.ready else "not_ready"}
    if detailed:
        body["checks"] = {c.name: c.to_wire() for c in result.checks}
        body["computers"] = [e.to_wire() for e in result.executors]
    return json_response(body, status=200 if result.ready else 503)


def metrics(request: HttpRequest) -> HttpResponse:
    if not has_ops_token(request):
        # Off the public origin unless the operators' token is configured and sent.
        return error_response(404, "Not found.")
    return HttpResponse(scrape(), content_type=CONTENT_TYPE_LATEST)


PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {HEALTHZ: healthz, READYZ: readyz}


class ProbeMiddleware:
    """Answer the probes first: no host check, no HTTPS redirect, no session."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path)
        if probe is None:
            return self.get_response(request)
        request.metrics_route = request.path  # type: ignore[attr-defined]
        if request.method not in ("GET", "HEAD"):
            response = error_response(405, f"Method {request.method} is not allowed here.")
            response["Allow"] = "GET, HEAD"
        else:
            response = probe(request)
        response["Cache-Control"] = "no-store"
        return response
