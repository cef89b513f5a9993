"""Root URLs: every app's REST router, the human pages, and the staff admin."""

from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.urls import path, re_path
from django.views.generic import RedirectView

from accounts import api as accounts_api
from accounts import views as accounts_views
from computers import api as computers_api
from computers import internal as executor_internal
from core import views as core_views
from notifications import views as notifications_views
from ops import views as ops_views
from runs import api as runs_api
from runs import recording_pages, recordings_api
from runs import views as runs_views
from visual import api as visual_api
from visual import views as visual_views
from webhooks import api as webhooks_api

handler400 = "core.views.bad_request"
handler403 = "core.views.permission_denied"
handler404 = "core.views.not_found"
handler500 = "core.views.server_failure"

urlpatterns = [
    path("api/openapi.json", core_views.openapi),
    path("api/docs", core_views.api_docs),
    path("favicon.ico", core_views.favicon),
    *runs_api.router.urls,
    *recordings_api.router.urls,
    *visual_api.router.urls,
    *computers_api.router.urls,
    *accounts_api.router.urls,
    *webhooks_api.router.urls,
    path("view", visual_views.view_page),
    path("view/state", visual_views.view_state),
    path("view/start", visual_views.view_start),
    path("accounts/login/", accounts_views.PasswordLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/delegated", accounts_views.delegated_sign_in),
    path("", runs_views.home_page, name="home"),
    path("tasks/<str:run_id>/intervention", runs_views.intervention_page),
    path("tasks/<str:run_id>/screenshots/<str:artifact_id>", runs_views.intervention_screenshot),
    path("tasks/<str:run_id>/intervention/open", runs_views.intervention_open),
    path("tasks/<str:run_id>/credential", runs_views.credential),
    path("tasks/<str:run_id>/recording", recording_pages.recording_page),
    path("tasks/<str:run_id>/recording/segments/<int:index>", recording_pages.recording_segment_file),
    path("credentials", runs_views.credentials_page),
    path("credentials/<str:credential_id>/replace", runs_views.credential_replace),
    path("credentials/<str:credential_id>/delete", runs_views.credential_delete),
    path("credentials/forms/<str:replacement_id>", runs_views.credential_replacement),
    path("connections", runs_views.connections_page),
    path("connections/callback", runs_views.connection_callback),
    path("connections/<str:request_id>/authorize", runs_views.connection_authorize),
    path("metrics", ops_views.metrics),
    path("internal/executors/<str:computer_id>/<path:op>", executor_internal.internal_call),
    path("internal/hosts/<str:host_id>/<path:op>", executor_internal.host_call),
    path("account/notifications", notifications_views.preferences_page),
    # The admin's pages of computers and artifacts before their models moved to the computers app.
    re_path(
        r"^admin/executor/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/computers/%(rest)s", query_string=True),
    ),
    path("admin/", admin.site.urls),
]
