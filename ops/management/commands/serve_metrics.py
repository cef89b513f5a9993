"""Serve the Prometheus scrape on a private address (``RAM_METRICS_ADDRESS``)."""

from __future__ import annotations

from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections
from prometheus_client import CONTENT_TYPE_LATEST

from ops.metrics import scrape
from ops.supervisor import CANNOT_RUN


def metrics_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    if environ.get("PATH_INFO") != "/metrics":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"Not found; the scrape is at /metrics.\n"]
    try:
        body = scrape()
    finally:
        close_old_connections()
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
    return [body]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise CommandError(f"RAM_METRICS_ADDRESS must be host:port, not {address!r}.")
    return host.strip("[]") or "127.0.0.1", int(port)


class Command(BaseCommand):
    help = "Serve /metrics for Prometheus on RAM_METRICS_ADDRESS (a private address; default 127.0.0.1:9464)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--address", default=None, help="host:port (default: RAM_METRICS_ADDRESS)")

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_address(options["address"] or settings.RAM_METRICS_ADDRESS)
        try:
            server = make_server(host, port, metrics_app, handler_class=_Quiet)
        except OSError as exc:
            # Not worth a restart: the address stays taken (its supervisor stops, ops/supervisor.py).
            raise CommandError(
                f"The metrics server cannot listen on {host}:{port} ({exc.strerror}): set RAM_METRICS_ADDRESS "
                "to a free address.",
                returncode=CANNOT_RUN,
            ) from None
        with server:
            if options["verbosity"] > 0:
                self.stdout.write(f"Metrics on http://{host}:{port}/metrics")
            server.serve_forever()
