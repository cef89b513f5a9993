"""A URLconf for tests of core/asgi_handler.py: a streaming answer and one that fails."""

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import path


def _parts() -> Iterator[bytes]:
    yield b"first,"
    yield b"second"


def streaming(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(_parts(), content_type="text/plain")


def failing(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


urlpatterns = [path("stream", streaming), path("fail", failing)]
