"""Root URLs: the REST API under /api/, human pages, and the staff admin."""

from django.contrib import admin
from django.contrib.auth.views import LogoutView
from django.urls import path

from accounts import api as accounts_api
from accounts import views as accounts_views
from ramsite import views
from runs import api as runs_api
from runs import views as runs_views
from visual import api as visual_api
from visual import views as visual_views

handler400 = "ramsite.views.bad_request"
handler403 = "ramsite.views.permission_denied"
handler404 = "ramsite.views.not_found"
handler500 = "ramsite.views.server_failure"

urlpatterns = [
    path("api/openapi.json", views.openapi),
    path("api/runs", runs_api.runs_view),
    path("api/runs/<str:run_id>", runs_api.run_view),
    path("api/runs/<str:run_id>/intervention-descriptor", runs_api.descriptor_view),
    path("api/runs/<str:run_id>/intervention", runs_api.legacy_intervention_view),
    path("api/runs/<str:run_id>/continue", runs_api.continue_view),
    path("api/runs/<str:run_id>/cancel", runs_api.cancel_view),
    path("api/runs/<str:run_id>/viewer", visual_api.run_viewer_view),
    path("api/computers", visual_api.computers_view),
    path("api/credentials", runs_api.credentials_view),
    path("api/visual/sessions", visual_api.visual_sessions_view),
    path("view", visual_views.view_page),
    path("api/sessions/delegate", accounts_api.delegate_view),
    path("accounts/login/", accounts_views.PasswordLoginView.as_view(), name="login"),
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/delegated", accounts_views.delegated_sign_in),
    path("", runs_views.home_page, name="home"),
    path("tasks/<str:run_id>/intervention", runs_views.intervention_page),
    path("tasks/<str:run_id>/screenshots/<str:artifact_id>", runs_views.intervention_screenshot),
    path("tasks/<str:run_id>/intervention/open", runs_views.intervention_open),
    path("tasks/<str:run_id>/credential", runs_views.credential),
    path("credentials", runs_views.credentials_page),
    path("credentials/<str:credential_id>/replace", runs_views.credential_replace),
    path("credentials/<str:credential_id>/delete", runs_views.credential_delete),
    path("credentials/forms/<str:replacement_id>", runs_views.credential_replacement),
    path("connections", runs_views.connections_page),
    path("connections/callback", runs_views.connection_callback),
    path("connections/<str:request_id>/authorize", runs_views.connection_authorize),
    path("admin/", admin.site.urls),
]
