"""Project-wide views: the OpenAPI document and its browsable reference, the favicon, and JSON errors under /api/."""

import sys

from django.contrib.staticfiles import finders
from django.db import InterfaceError, OperationalError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.defaults import bad_request as default_bad_request
from django.views.defaults import page_not_found, server_error
from django.views.defaults import permission_denied as default_permission_denied

from core.api import error_response, json_response, openapi_document


def openapi(request: HttpRequest) -> HttpResponse:
    return json_response(openapi_document())


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    """A browsable reference of the OpenAPI document: Swagger UI from this server's static files."""
    return render(request, "core/api_docs.html")


@require_GET
def favicon(request: HttpRequest) -> HttpResponseBase:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin, JSON answers)."""
    path = finders.find("ram/favicon.ico")
    if not isinstance(path, str):
        raise Http404()
    response = FileResponse(open(path, "rb"), content_type="image/x-icon")  # noqa: SIM115 - FileResponse closes it
    response["Cache-Control"] = "public, max-age=86400"
    return response


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error_response(404, "Not found.")
    return page_not_found(request, exception)


# While the database cannot be reached (restarting, failing over), every request answers 503
# with this hint instead of an error page.
DATABASE_RETRY_AFTER_SECONDS = 5
# Paths whose clients are programs: they get JSON, never a page.
MACHINE_PATHS = ("/api/", "/internal/", "/mcp")


def database_unavailable(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(MACHINE_PATHS):
        response = error_response(
            503, "The database is unavailable. Retry in a few seconds; check the state before repeating an action."
        )
    else:
        response = HttpResponse(
            "The service is unavailable for a moment. Retry in a few seconds.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def server_failure(request: HttpRequest) -> HttpResponse:
    # Called by Django's handler while the exception is being handled.
    if isinstance(sys.exc_info()[1], (OperationalError, InterfaceError)):
        return database_unavailable(request)
    if request.path.startswith("/api/"):
        return error_response(500, "Internal error; nothing about it is shown here. Check the run before retrying.")
    return server_error(request)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error_response(400, "Bad request.")
    return default_bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error_response(403, "Forbidden.")
    return default_permission_denied(request, exception)
