"""The small REST toolkit every ``api.py`` uses.

One error shape (``{"error": "<readable message>"}``), bearer-key
authentication, closed request bodies parsed by pydantic contract models, and a
registry of operations from which ``/api/openapi.json`` is built.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pydantic
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

if TYPE_CHECKING:
    from accounts.models import ApiKey

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024


class ApiError(Exception):
    """An expected refusal: rendered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def json_response(data: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(json_bytes(data), status=status, content_type="application/json")


def error_response(status: int, message: str, **extra: Any) -> HttpResponse:
    return json_response({"error": message, **extra}, status=status)


def validation_message(exc: pydantic.ValidationError) -> str:
    """A readable one-line summary of what was wrong, without echoing input."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid request: " + "; ".join(parts[:5])


def parse_json_body(request: HttpRequest, model: type[pydantic.BaseModel]) -> Any:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type != "application/json":
        raise ApiError(400, "Invalid request: Content-Type must be application/json.")
    if len(request.body) > MAX_BODY_BYTES:
        raise ApiError(400, "Invalid request: body is too large.")
    try:
        return model.model_validate_json(request.body)
    except pydantic.ValidationError as exc:
        raise ApiError(400, validation_message(exc)) from None


_BEARER = re.compile(r"^Bearer ([A-Za-z0-9_-]{16,200})$")


def authenticate_key(request: HttpRequest, kinds: Iterable[str]) -> ApiKey:
    """The API key behind ``Authorization: Bearer``; 401 without one, 403 if its kind is not allowed."""
    return authenticate_bearer(request.headers.get("Authorization", ""), kinds)


def authenticate_bearer(authorization: str, kinds: Iterable[str]) -> ApiKey:
    """``authenticate_key`` for a raw ``Authorization`` header value (used outside Django views, e.g. MCP)."""
    from accounts.services import api_key_authenticate

    match = _BEARER.match(authorization)
    if not match:
        raise ApiError(401, "Authentication required: send Authorization: Bearer <API key>.")
    key = api_key_authenticate(raw_key=match.group(1))
    if key is None:
        raise ApiError(401, "The API key is invalid or revoked.")
    if not key.account.is_active:
        raise ApiError(403, "The account is inactive.")
    if key.kind not in kinds:
        raise ApiError(403, f"A {key.kind} key cannot use this endpoint.")
    return key


@dataclass
class Operation:
    method: str
    summary: str
    handler: Callable[..., HttpResponse]
    key_kinds: tuple[str, ...]
    body: type[pydantic.BaseModel] | None
    responses: dict[int, str | type[pydantic.BaseModel]]
    query: dict[str, str] = field(default_factory=dict)


@dataclass
class Route:
    path: str  # OpenAPI form, e.g. /api/runs/{run_id}
    operations: dict[str, Operation]


REGISTRY: list[Route] = []


def operation(
    *,
    summary: str,
    key_kinds: tuple[str, ...] = ("runner",),
    body: type[pydantic.BaseModel] | None = None,
    responses: dict[int, str | type[pydantic.BaseModel]] | None = None,
    query: dict[str, str] | None = None,
) -> Callable[[Callable[..., HttpResponse]], Operation]:
    """Declare an authenticated API operation; the handler gets ``key`` and, with a body model, ``body``."""

    def decorate(fn: Callable[..., HttpResponse]) -> Operation:
        @functools.wraps(fn)
        def handler(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            key = authenticate_key(request, key_kinds)
            if body is not None:
                kwargs["body"] = parse_json_body(request, body)
            return fn(request, key=key, **kwargs)

        return Operation(
            method="",
            summary=summary,
            handler=handler,
            key_kinds=key_kinds,
            body=body,
            responses=responses or {},
            query=query or {},
        )

    return decorate


def route(path: str, **methods: Operation) -> Callable[..., HttpResponse]:
    """One Django view for ``path`` dispatching by method, with the JSON error shape."""
    ops = {}
    for method, op in methods.items():
        op.method = method.upper()
        ops[op.method] = op
    REGISTRY.append(Route(path=path, operations=ops))

    @csrf_exempt
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        op = ops.get(request.method or "")
        if op is None:
            response = error_response(405, f"Method {request.method} is not allowed here.")
            response["Allow"] = ", ".join(sorted(ops))
            return response
        try:
            return op.handler(request, **kwargs)
        except ApiError as exc:
            return error_response(exc.status, exc.message, **exc.extra)

    return view


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every registered operation."""
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "properties": {"error": {"type": "string"}},
            "required": ["error"],
        }
    }

    def ref(model: type[pydantic.BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in schema.pop("$defs", {}).items():
            schemas[name] = sub
        schemas[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    paths: dict[str, Any] = {}
    for r in REGISTRY:
        item: dict[str, Any] = {}
        for method, op in r.operations.items():
            entry: dict[str, Any] = {
                "summary": op.summary,
                "security": [{"bearer": []}],
                "description": f"API key kinds allowed: {', '.join(op.key_kinds)}.",
                "parameters": [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in re.findall(r"{(\w+)}", r.path)
                ]
                + [
                    {"name": n, "in": "query", "required": False, "schema": {"type": "string"}, "description": d}
                    for n, d in op.query.items()
                ],
                "responses": {},
            }
            if op.body is not None:
                entry["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": ref(op.body)}},
                }
            for status, desc in sorted(op.responses.items()):
                if isinstance(desc, str):
                    schema = {"$ref": "#/components/schemas/Error"} if status >= 400 else {"type": "object"}
                    entry["responses"][str(status)] = {
                        "description": desc,
                        "content": {"application/json": {"schema": schema}},
                    }
                else:
                    entry["responses"][str(status)] = {
                        "description": desc.__doc__.strip().splitlines()[0] if desc.__doc__ else "OK",
                        "content": {"application/json": {"schema": ref(desc)}},
                    }
            for status, desc in ((401, "Missing, invalid or revoked API key."), (403, "Key kind or account not allowed.")):
                entry["responses"].setdefault(
                    str(status),
                    {"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                )
            item[method.lower()] = entry
        paths[r.path] = item
    return {
        "openapi": "3.1.0",
        "info": {"title": "RAM API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
