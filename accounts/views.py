"""Human sign-in pages: password login (marks the session ``password``),
logout, and the delegated one-time sign-in (marks it ``delegated``)."""

from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts import services
from core.errors import DomainError
from core.pages import navigate, page_status


class PasswordLoginView(LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = False

    def _known_device(self, username: str) -> bool:
        token = self.request.COOKIES.get(services.KNOWN_DEVICE_COOKIE)
        return services.known_device_matches(token=token, username=username)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Guessing across addresses slows down per username; the password is not even checked meanwhile.
        username = request.POST.get("username", "")
        wait = services.sign_in_wait(username=username, known_device=self._known_device(username))
        if wait:
            form = self.get_form_class()(request, initial={"username": username[:150]})
            return self.render_to_response(self.get_context_data(form=form, wait_seconds=wait), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        username, password = form.data.get("username", ""), form.data.get("password", "")
        # A request the hard lock (per username and address) refused was no guess.
        if username and password and not getattr(self.request, "axes_locked_out", False):
            services.sign_in_failure_record(username=username, known_device=self._known_device(username))
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        user = form.get_user()
        failures = services.sign_in_success_record(username=user.get_username())
        services.session_login(request=self.request, user=user, method=services.PASSWORD)
        if failures:
            self.request.session[services.SIGN_IN_NOTICE] = (
                f"There were {failures} failed sign-in attempts for your username since your last sign-in. "
                "If they were not yours, someone is guessing your password: keep it long and unique."
            )
        response = navigate(self.request, self.get_success_url(), status=302)
        response.set_cookie(
            services.KNOWN_DEVICE_COOKIE,
            services.known_device_token(username=user.get_username()),
            max_age=settings.RAM_KNOWN_DEVICE_DAYS * 86400,
            secure=settings.SESSION_COOKIE_SECURE,
            httponly=True,
            samesite="Lax",
        )
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["title"] = "Sign in"
        return context


class StaffSignInForm(AdminAuthenticationForm):
    """The admin's form, with a refused non-staff user counted as a failed password.

    Django's admin answers a correct password of a user who is not staff with the same
    message as a wrong one, but the password did authenticate, so the hard lock never
    counted it: the lock arriving one attempt later would tell a guesser the password
    is right. Counting it as a failure (axes' signal, as ``authenticate`` sends for a
    wrong password) makes both answers and both counts identical.
    """

    def confirm_login_allowed(self, user: User) -> None:
        try:
            super().confirm_login_allowed(user)
        except ValidationError:
            user_login_failed.send(
                sender=__name__,
                # As Django's ``authenticate`` sends it: the username as typed, the password masked.
                credentials={"username": self.cleaned_data.get("username"), "password": "********************"},
                request=self.request,
            )
            raise


class StaffLoginView(PasswordLoginView):
    """``/admin/login/``: the same guessing delays, notice and hard lock as ``/accounts/login/``,
    for staff users only (``RamAdminSite.login`` adds the admin's context)."""

    template_name = "accounts/admin_login.html"
    authentication_form = StaffSignInForm

    def get_default_redirect_url(self) -> str:
        return reverse("admin:index")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["title"] = "Log in"
        return context


@require_http_methods(["GET", "POST"])
def delegated_sign_in(request: HttpRequest) -> HttpResponse:
    """GET renders a page whose script posts the fragment's token; GET consumes nothing."""
    if request.method == "POST":
        try:
            services.delegated_sign_in_consume(request=request, raw=request.POST.get("token", ""))
        except DomainError as exc:
            context = {"error": exc.message, "title": "Sign-in link"}
            return render(request, "accounts/delegated.html", context, status=page_status(exc))
        return navigate(request, "/", status=302)
    return render(request, "accounts/delegated.html", {"title": "Sign-in link"})
