"""A signed-in user of an inactive account (or of none) reaches no page and no API.

API keys are checked where they are authenticated; this covers web sessions.
Sign-in and sign-out stay reachable, and staff keep the admin (they administer
the installation, including reactivating accounts).
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.services import account_of_user
from core.api import error_response

INACTIVE = "Your account is inactive: nothing can be done with it. Ask your administrator."
_OPEN_PATHS = ("/static/", "/accounts/login/", "/accounts/logout/")


class ActiveAccountMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._refused(request):
            if request.path.startswith("/api/"):
                return error_response(403, INACTIVE)
            return render(request, "accounts/inactive.html", {"title": "Account inactive", "message": INACTIVE}, status=403)
        return self.get_response(request)

    @staticmethod
    def _refused(request: HttpRequest) -> bool:
        user = request.user
        if not user.is_authenticated or request.path.startswith(_OPEN_PATHS):
            return False
        if request.path.startswith("/api/") and "Authorization" in request.headers:
            return False  # the key's own account is checked by the API
        if request.path.startswith("/admin/") and user.is_staff:
            return False
        account = account_of_user(user)  # type: ignore[arg-type]
        return account is None or not account.is_active
