"""Human sign-in pages: password login (marks the session ``password``),
logout, and the delegated one-time sign-in (marks it ``delegated``)."""

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from accounts import services
from core.errors import DomainError
from core.pages import navigate, page_status


class PasswordLoginView(LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = False

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        services.session_login(request=self.request, user=form.get_user(), method=services.PASSWORD)
        return navigate(self.request, self.get_success_url(), status=302)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["title"] = "Sign in"
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
