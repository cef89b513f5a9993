"""Headers every response carries: private pages are never cached or referred."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse


class PrivatePageHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/static/"):
            response["Cache-Control"] = "no-store"
        response["Referrer-Policy"] = "no-referrer"
        return response
