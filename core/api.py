"""The REST toolkit every app's ``api.py`` uses.

One declaration per endpoint gives both its Django URL pattern and its
OpenAPI entry::

    router = Router()

    @operation(summary="Read a run", auth=READERS, responses={200: RunOut, 404: "No such run."})
    def run_get(request, *, key, run_id): ...

    router.route("/api/runs/{run_id}", get=run_get)

``ramsite/urls.py`` includes ``router.urls``; ``/api/openapi.json`` is built
from every router. Errors have one shape, ``{"error": "<readable message>",
...extra}``; a named domain error gets its status from ``REST_STATUS``, the
one table of this edge. Request bodies are closed pydantic models.
Authentication is supplied by the app that owns it (``accounts.auth``) as an
``Auth`` object, so this module imports no app.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pydantic
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.views.decorators.csrf import csrf_exempt

from core.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    PayloadTooLarge,
    TooMany,
    Unavailable,
    Unprocessable,
    UnsupportedMediaType,
    UpstreamFailed,
    status_for,
)
from core.json import json_bytes

MAX_BODY_BYTES = 64 * 1024

# The REST edge: the HTTP status of each error category.
REST_STATUS: dict[type[DomainError], int] = {
    InvalidInput: 400,
    NotAuthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    Unprocessable: 422,
    TooMany: 429,
    UpstreamFailed: 502,
    Unavailable: 503,
}


class InvalidBody(InvalidInput):
    code = "request.invalid_body"


def rest_status(exc: DomainError) -> int:
    return status_for(exc, REST_STATUS)


def json_response(data: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(json_bytes(data), status=status, content_type="application/json")


def error_response(status: int, message: str, **extra: Any) -> HttpResponse:
    return json_response({"error": message, **extra}, status=status)


def domain_error_response(exc: DomainError) -> HttpResponse:
    return error_response(rest_status(exc), exc.message, **exc.extra)


def validation_message(exc: pydantic.ValidationError) -> str:
    """A readable one-line summary of what was wrong, without echoing input."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid request: " + "; ".join(parts[:5])


def parse_json_body(request: HttpRequest, model: type[pydantic.BaseModel], max_bytes: int = MAX_BODY_BYTES) -> Any:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type != "application/json":
        raise InvalidBody("Invalid request: Content-Type must be application/json.")
    if len(request.body) > max_bytes:
        raise InvalidBody("Invalid request: body is too large.")
    try:
        parsed = model.model_validate_json(request.body)
    except pydantic.ValidationError as exc:
        raise InvalidBody(validation_message(exc)) from None
    # JSON text can hold NUL only as the escape \u0000 (a cheap test before the walk).
    if b"\\u0000" in request.body:
        refuse_nul(json.loads(request.body))
    return parsed


def refuse_nul(value: Any) -> None:
    """Refuse (400) arguments whose text holds NUL anywhere, keys included: PostgreSQL stores no NUL in
    text or ``jsonb``. Every edge that takes JSON from a client calls it (REST bodies, MCP arguments)."""
    if _holds_nul(value):
        raise InvalidBody("Invalid request: text may not hold the NUL character (U+0000).")


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


@dataclass(frozen=True)
class Query:
    """A query parameter as the OpenAPI document shows it: what it means, the JSON Schema of the
    values the handler accepts (a value outside it is refused with 400), and whether it must be sent."""

    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    required: bool = False


def integer_query(description: str, low: int, high: int) -> Query:
    """An integer parameter within ``[low, high]`` (digits only, as ``_int_param`` readers accept)."""
    return Query(description, {"type": "integer", "minimum": low, "maximum": high})


def choice_query(description: str, values: list[str] | tuple[str, ...]) -> Query:
    """A parameter that is one of ``values``."""
    return Query(description, {"type": "string", "enum": list(values)})


def _query(value: str | Query) -> Query:
    return value if isinstance(value, Query) else Query(value)


class Auth(Protocol):
    """Who may call an operation; supplied by the app that owns authentication."""

    @property
    def arg(self) -> str:
        """The handler's keyword argument that receives what ``__call__`` returns."""
        ...

    @property
    def description(self) -> str:
        """Who may call, for the OpenAPI entry."""
        ...

    def __call__(self, request: HttpRequest) -> Any: ...


@dataclass
class Operation:
    summary: str
    handler: Callable[..., HttpResponse]
    auth: Auth
    body: type[pydantic.BaseModel] | None
    responses: dict[int, str | type[pydantic.BaseModel]]
    query: dict[str, str | Query] = field(default_factory=dict)
    method: str = ""
    # What a success described by a string answers (a binary type such as image/png, or JSON).
    media_type: str = "application/json"
    # A body of bytes (a file) the handler reads itself, and what it is.
    raw_body: str | None = None


def operation(
    *,
    summary: str,
    auth: Auth,
    body: type[pydantic.BaseModel] | None = None,
    responses: dict[int, str | type[pydantic.BaseModel]] | None = None,
    query: dict[str, str | Query] | None = None,
    media_type: str = "application/json",
    raw_body: str | None = None,
) -> Callable[[Callable[..., HttpResponse]], Operation]:
    """Declare an API operation; the handler gets ``auth.arg`` and, with a body model, ``body``.

    ``raw_body`` describes a body of bytes of any type (a file) that the handler reads itself.
    """

    def decorate(fn: Callable[..., HttpResponse]) -> Operation:
        @functools.wraps(fn)
        def handler(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            kwargs[auth.arg] = auth(request)
            if body is not None:
                kwargs["body"] = parse_json_body(request, body)
            return fn(request, **kwargs)

        return Operation(
            summary=summary,
            handler=handler,
            auth=auth,
            body=body,
            responses=responses or {},
            query=query or {},
            media_type=media_type,
            raw_body=raw_body,
        )

    return decorate


@dataclass
class Route:
    path: str  # OpenAPI form, e.g. /api/runs/{run_id}
    operations: dict[str, Operation]
    view: Callable[..., HttpResponse]

    @property
    def django_pattern(self) -> str:
        """``/api/runs/{run_id}`` -> ``api/runs/<str:run_id>``."""
        return re.sub(r"{(\w+)}", r"<str:\1>", self.path.removeprefix("/"))


ROUTERS: list[Router] = []

# OpenAPI 3.1 ``webhooks``: what the server itself posts to its clients, by event type.
WEBHOOKS: dict[str, tuple[str, type[pydantic.BaseModel]]] = {}


def webhook(name: str, *, summary: str, body: type[pydantic.BaseModel]) -> None:
    """Declare an outgoing webhook for the OpenAPI document (the app that sends it owns the body model)."""
    WEBHOOKS[name] = (summary, body)


class Router:
    """An app's endpoints; ``urls`` goes into the root URLconf, every route into the OpenAPI document."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        ROUTERS.append(self)

    def route(self, path_: str, **methods: Operation) -> Callable[..., HttpResponse]:
        """One Django view for ``path_`` dispatching by method, with the JSON error shape."""
        ops: dict[str, Operation] = {}
        for method, op in methods.items():
            op.method = method.upper()
            ops[op.method] = op

        @csrf_exempt
        def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
            op = ops.get(request.method or "")
            if op is None:
                response = error_response(405, f"Method {request.method} is not allowed here.")
                response["Allow"] = ", ".join(sorted(ops))
                return response
            try:
                return op.handler(request, **kwargs)
            except DomainError as exc:
                return domain_error_response(exc)

        self.routes.append(Route(path=path_, operations=ops, view=view))
        return view

    @property
    def urls(self) -> list[URLPattern]:
        return [path(r.django_pattern, r.view) for r in self.routes]


def _links_to_created(collection: Route, routes: list[Route]) -> dict[str, Any]:
    """OpenAPI links from a 201 that created ``{"id": ...}`` in ``collection`` to every operation on
    that item (``collection/{x_id}`` and its sub-paths with no other parameter), so a client or a
    stateful fuzzer can follow a creation to what it created."""
    links: dict[str, Any] = {}
    item = re.compile(re.escape(collection.path) + r"/{(\w+)}(/[^{}]*)?")
    for route in routes:
        match = item.fullmatch(route.path)
        if match is None:
            continue
        pointer = route.path.replace("~", "~0").replace("/", "~1")
        for method in route.operations:
            name = f"{method.lower()}{route.path.removeprefix(collection.path)}".replace("/", "_")
            name = re.sub(r"[^A-Za-z0-9_.-]", "", name)
            links[name] = {
                "operationRef": f"#/paths/{pointer}/{method.lower()}",
                "parameters": {match.group(1): "$response.body#/id"},
            }
    return links


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

    def error_entry(desc: str) -> dict[str, Any]:
        return {"description": desc, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}

    paths: dict[str, Any] = {}
    routes = [r for router in ROUTERS for r in router.routes]
    for r in routes:
        item: dict[str, Any] = {}
        for method, op in r.operations.items():
            entry: dict[str, Any] = {
                "summary": op.summary,
                "security": [{"bearer": []}],
                "description": op.auth.description,
                "parameters": [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in re.findall(r"{(\w+)}", r.path)
                ]
                + [
                    {
                        "name": n,
                        "in": "query",
                        "required": q.required,
                        "schema": q.schema,
                        "description": q.description,
                    }
                    for n, q in ((n, _query(d)) for n, d in op.query.items())
                ],
                "responses": {},
            }
            if op.body is not None:
                entry["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": ref(op.body)}},
                }
            elif op.raw_body is not None:
                entry["requestBody"] = {
                    "required": True,
                    "description": op.raw_body,
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary", "minLength": 1}}},
                }
            for status, desc in sorted(op.responses.items()):
                if isinstance(desc, str):
                    if status >= 400:
                        entry["responses"][str(status)] = error_entry(desc)
                    else:
                        schema = (
                            {"type": "object"}
                            if op.media_type == "application/json"
                            else {"type": "string", "format": "binary"}
                        )
                        entry["responses"][str(status)] = {
                            "description": desc,
                            "content": {op.media_type: {"schema": schema}},
                        }
                else:
                    entry["responses"][str(status)] = {
                        "description": desc.__doc__.strip().splitlines()[0] if desc.__doc__ else "OK",
                        "content": {"application/json": {"schema": ref(desc)}},
                    }
                    if status == 201 and "id" in desc.model_fields and (links := _links_to_created(r, routes)):
                        entry["responses"][str(status)]["links"] = links
            for status, desc in ((401, "Missing, invalid or revoked API key."), (403, "Key kind or account not allowed.")):
                entry["responses"].setdefault(str(status), error_entry(desc))
            if op.body is not None or op.raw_body is not None or op.query:
                # Every body and query is parsed before the handler runs: a malformed one is a 400.
                entry["responses"].setdefault("400", error_entry("Invalid request body or query."))
            item[method.lower()] = entry
        paths[r.path] = item
    webhooks = {
        name: {
            "post": {
                "summary": summary,
                "description": "Signed the Standard Webhooks way: webhook-id, webhook-timestamp, webhook-signature.",
                "requestBody": {"required": True, "content": {"application/json": {"schema": ref(body)}}},
                "responses": {"200": {"description": "Any 2xx status acknowledges the event; anything else is retried."}},
            }
        }
        for name, (summary, body) in WEBHOOKS.items()
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "RAM API", "version": "1"},
        "paths": paths,
        "webhooks": webhooks,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
