"""Project-wide views: the OpenAPI document, and JSON errors under /api/."""

from django.http import HttpRequest, HttpResponse
from django.views.defaults import bad_request as default_bad_request
from django.views.defaults import page_not_found, server_error
from django.views.defaults import permission_denied as default_permission_denied

from core.api import error_response, json_response, openapi_document


def openapi(request: HttpRequest) -> HttpResponse:
    return json_response(openapi_document())


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return error_response(404, "Not found.")
    return page_not_found(request, exception)


def server_failure(request: HttpRequest) -> HttpResponse:
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
