"""A URLconf for tests of core/asgi_handler.py: a streaming answer, one that fails, and who a request
is to a view under /api/ and to a page (the middleware chain it went through)."""

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path


def _parts() -> Iterator[bytes]:
    yield b"first,"
    yield b"second"


def streaming(request: HttpRequest) -> StreamingHttpResponse:
    return StreamingHttpResponse(_parts(), content_type="text/plain")


def failing(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("boom")


def who(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"user": request.user.is_authenticated, "session": hasattr(request, "session")})


urlpatterns = [path("stream", streaming), path("fail", failing), path("api/who", who), path("page/who", who)]
