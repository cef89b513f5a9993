"""``RamClient``: the REST API of runs (the intervention descriptor check: ``ram_sdk.descriptor``).

The credential is a callable that returns the API key when a request is made;
the client never stores it, logs it or puts it in an exception.

Every endpoint is one row of ``ENDPOINTS``; ``RamClient`` (blocking) and
``AsyncRamClient`` (asyncio) share the methods that read it and differ only in
how one request is sent.
"""

from __future__ import annotations

import inspect
import math
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx

from ram_sdk.descriptor import check_intervention as check_intervention  # re-exported
from ram_sdk.errors import RamApiError
from ram_sdk.harness import AsyncRunHandle, RunHandle
from ram_sdk.origins import checked_origin
from ram_sdk.visual import OnMessage, RenderJpeg, VisualStream, open_visual_stream

DEFAULT_TIMEOUT = 30.0

# A run's status. ``continued``: a paused run a harness continued (its ``continued_run_id`` goes on).
RunStatus = Literal["queued", "running", "waiting_for_input", "succeeded", "failed", "cancelled", "continued"]
RUN_STATUSES: tuple[RunStatus, ...] = (
    "queued", "running", "waiting_for_input", "succeeded", "failed", "cancelled", "continued",
)
# Statuses a run never leaves.
TERMINAL_STATUSES: tuple[RunStatus, ...] = ("succeeded", "failed", "cancelled", "continued")


# --- The endpoint table -------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    # A path with ``{run_id}`` (``{webhook_id}``, ...) where the run's (webhook's) id goes.
    path: str
    # Turns the JSON answer into what the method returns (the descriptor is checked).
    answer: Callable[[Any, dict[str, Any]], Any] = lambda body, _context: body
    # A success is bytes (an image), not JSON.
    binary: bool = False


def _checked_descriptor(body: Any, context: dict[str, Any]) -> dict[str, Any]:
    return check_intervention(body, run_id=context["run_id"], origin=context["origin"])


ENDPOINTS: dict[str, Endpoint] = {
    "run_get": Endpoint("GET", "/api/runs/{run_id}"),
    "runs_list": Endpoint("GET", "/api/runs"),
    "run_create": Endpoint("POST", "/api/runs"),
    "run_continue": Endpoint("POST", "/api/runs/{run_id}/continue"),
    "run_cancel": Endpoint("POST", "/api/runs/{run_id}/cancel"),
    "run_viewer": Endpoint("GET", "/api/runs/{run_id}/viewer"),
    "computers_list": Endpoint("GET", "/api/computers"),
    "computer_get": Endpoint("GET", "/api/computers/{computer_id}"),
    "computer_create": Endpoint("POST", "/api/computers"),
    "computer_delete": Endpoint("DELETE", "/api/computers/{computer_id}"),
    "computer_start": Endpoint("POST", "/api/computers/{computer_id}/start"),
    "computer_browser_set": Endpoint("PUT", "/api/computers/{computer_id}/browser"),
    "computer_settings_set": Endpoint("PUT", "/api/computers/{computer_id}/settings"),
    "intervention_descriptor": Endpoint("GET", "/api/runs/{run_id}/intervention-descriptor", _checked_descriptor),
    "intervention": Endpoint("GET", "/api/runs/{run_id}/intervention"),
    "run_act": Endpoint("POST", "/api/runs/{run_id}/actions"),
    "run_action": Endpoint("GET", "/api/runs/{run_id}/actions/{step_id}"),
    "run_observe": Endpoint("GET", "/api/runs/{run_id}/observation"),
    "webhooks_list": Endpoint("GET", "/api/webhooks"),
    "webhook_create": Endpoint("POST", "/api/webhooks"),
    "webhook_get": Endpoint("GET", "/api/webhooks/{webhook_id}"),
    "webhook_update": Endpoint("PATCH", "/api/webhooks/{webhook_id}"),
    "webhook_delete": Endpoint("DELETE", "/api/webhooks/{webhook_id}"),
    "webhook_rotate_secret": Endpoint("POST", "/api/webhooks/{webhook_id}/rotate-secret"),
    "webhook_test": Endpoint("POST", "/api/webhooks/{webhook_id}/test"),
    "webhook_deliveries": Endpoint("GET", "/api/webhooks/{webhook_id}/deliveries"),
    "run_steps": Endpoint("GET", "/api/runs/{run_id}/steps"),
    "run_events": Endpoint("GET", "/api/runs/{run_id}/events"),
    "artifact_get": Endpoint("GET", "/api/artifacts/{artifact_id}", binary=True),
    "run_recording": Endpoint("GET", "/api/runs/{run_id}/recording", binary=True),
    "run_recording_timeline": Endpoint("GET", "/api/runs/{run_id}/recording/timeline"),
    "artifact_upload": Endpoint("POST", "/api/artifacts"),
}


@dataclass(frozen=True)
class Request:
    """One request of an endpoint, ready to send, and how its answer is read."""

    method: str
    path: str
    json: Any
    params: dict[str, Any] | None
    endpoint: Endpoint
    context: dict[str, Any]
    # A body of bytes (a file) and its type, sent instead of JSON.
    content: bytes | None = None
    content_type: str | None = None

    def headers(self, key: Any) -> dict[str, str]:
        headers = _headers(key)
        if self.content_type is not None:
            headers["Content-Type"] = self.content_type
        return headers


def _request_of(
    name: str,
    origin: str,
    *,
    run_id: str | uuid.UUID | None = None,
    step_id: int | None = None,
    computer_id: str | None = None,
    webhook_id: str | uuid.UUID | None = None,
    artifact_id: str | uuid.UUID | None = None,
    json: Any = None,
    params: dict[str, Any] | None = None,
    content: bytes | None = None,
    content_type: str | None = None,
) -> Request:
    endpoint = ENDPOINTS[name]
    context: dict[str, Any] = {"origin": origin}
    path = endpoint.path
    if "{run_id}" in path:
        context["run_id"] = str(uuid.UUID(str(run_id)))
        path = path.replace("{run_id}", context["run_id"])
    if "{computer_id}" in path:
        if not isinstance(computer_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", computer_id):
            raise ValueError("computer_id is 1-128 letters, digits, _ or -, starting with a letter or digit.")
        path = path.replace("{computer_id}", computer_id)
    if "{webhook_id}" in path:
        path = path.replace("{webhook_id}", str(uuid.UUID(str(webhook_id))))
    if "{step_id}" in path:
        if isinstance(step_id, bool) or not isinstance(step_id, int) or step_id < 1:
            raise ValueError("step_id is the positive integer an action answered.")
        path = path.replace("{step_id}", str(step_id))
    if "{artifact_id}" in path:
        path = path.replace("{artifact_id}", str(uuid.UUID(str(artifact_id))))
    if params is not None:
        params = {k: v for k, v in params.items() if v is not None}
    return Request(endpoint.method, path, json, params, endpoint, context, content, content_type)


def _finite_timeout(timeout: float) -> float:
    if not (isinstance(timeout, int | float) and not isinstance(timeout, bool) and math.isfinite(timeout) and timeout > 0):
        raise ValueError("Choose a finite, positive timeout in seconds.")
    return float(timeout)


def _headers(key: Any) -> dict[str, str]:
    if not isinstance(key, str) or not key:
        raise TypeError("credential() must return the API key as a non-empty string.")
    return {"Authorization": f"Bearer {key}", "Accept": "application/json"}


def _answer(response: httpx.Response, request: Request) -> Any:
    """What a success means for the endpoint; ``RamApiError`` for anything else (a redirect is never followed)."""
    if response.is_success and request.endpoint.binary:
        return response.content
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 204 and response.is_success:
        return None
    if not response.is_success:
        message = body.get("error") if isinstance(body, dict) else None
        if response.is_redirect:
            message = "The server answered with a redirect, which this client does not follow."
        raise RamApiError(
            response.status_code, str(message or response.reason_phrase), body if isinstance(body, dict) else None
        )
    if body is None:
        raise RamApiError(response.status_code, "The server's answer is not JSON.")
    return request.endpoint.answer(body, request.context)


# --- The clients --------------------------------------------------------------

# What a method returns: the answer (blocking client) or an awaitable of it (asyncio client).
R = TypeVar("R")


class _Endpoints(Generic[R]):  # noqa: UP046 - the SDK supports Python 3.11
    """The API's methods, written once: each names its row of ``ENDPOINTS``."""

    origin: str
    timeout: float

    def _send(self, request: Request) -> R:
        raise NotImplementedError

    def _call(self, name: str, **parts: Any) -> R:
        return self._send(_request_of(name, self.origin, **parts))

    # -- runs --

    def run_get(self, run_id: str | uuid.UUID) -> R:
        """A run, with ``required_action`` while its pause has not been continued, and ``queue_position``
        (1 = next to start on its computer) while it is ``queued``; ``None`` otherwise."""
        return self._call("run_get", run_id=run_id)

    def runs_list(
        self,
        *,
        status: RunStatus | None = None,
        kind: str | None = None,
        computer_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> R:
        """A page ``{runs, count, next_offset}`` of the account's runs, newest first.

        ``status`` is one of ``RUN_STATUSES``; ``continued`` lists the runs a harness continued."""
        params = {"status": status, "kind": kind, "computer_id": computer_id, "limit": limit, "offset": offset}
        return self._call("runs_list", params=params)

    def run_create(self, **fields: Any) -> R:
        """Create a run: ``fields`` is the body of ``POST /api/runs`` (``task``, ``computer_id``, ``agent``, ``max_model_calls``, ``recording``).

        The answer is ``running`` when the computer was free, else ``queued`` with its ``queue_position``:
        one run per computer, and at most ``RAM_ACCOUNT_MAX_ACTIVE_RUNS`` running runs per account."""
        return self._call("run_create", json=fields)

    def run_continue(self, run_id: str | uuid.UUID, *, idempotency_key: str) -> R:
        """Continue a paused run. Keep ``idempotency_key``: after a lost answer, retry with the same one."""
        return self._call("run_continue", run_id=run_id, json={"idempotency_key": idempotency_key})

    def run_cancel(self, run_id: str | uuid.UUID) -> R:
        """Cancel a run that has not finished; its intervention link becomes unavailable."""
        return self._call("run_cancel", run_id=run_id, json={})

    def run_viewer(self, run_id: str | uuid.UUID) -> R:
        """The authenticated viewer of the run's computer: show its ``url`` only when the person wants to watch."""
        return self._call("run_viewer", run_id=run_id)

    def computers_list(self) -> R:
        """The account's computers ``{computers: [{id, name, available, status, state, state_reason, browser, settings}]}``."""
        return self._call("computers_list")

    def computer_get(self, computer_id: str) -> R:
        """One of the account's computers: ``available`` (a visual session can be created now) and
        ``state`` (``stopped``, ``ready``, ``busy``, ``failed`` with ``state_reason``)."""
        return self._call("computer_get", computer_id=computer_id)

    def computer_create(self, computer_id: str, *, name: str = "") -> R:
        """Create a computer named ``computer_id`` in the account (ids are per account, and an id once
        used is never given again there): 409 for an id the account has or had, 429 above the
        account's cap. It is ``stopped`` until an executor serves it."""
        if not isinstance(computer_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", computer_id):
            raise ValueError("computer_id is 1-128 letters, digits, _ or -, starting with a letter or digit.")
        return self._call("computer_create", json={"id": computer_id, "name": name})

    def computer_start(self, computer_id: str) -> R:
        """Start one of the account's computers (202, the computer ``starting``): its executor starts
        on a free computer slot and the computer reads ``ready`` once it can be used. A run on a
        stopped computer starts it too; an idle one stops by itself, its profile kept."""
        return self._call("computer_start", computer_id=computer_id, json={})

    def computer_delete(self, computer_id: str) -> R:
        """Delete one of the account's computers (answers None): its open runs are cancelled, its
        generation ends, its browser profile is wiped; its id then answers 404."""
        return self._call("computer_delete", computer_id=computer_id)

    def computer_browser_set(
        self, computer_id: str, *, backend: str, options: dict[str, Any] | None = None, secret: str | None = None
    ) -> R:
        """Choose the computer's browser backend (``local``, ``cdp``, ``steel``, ``browserbase``). A
        change ends the computer's generation: a running executor serves from the new backend within
        its heartbeat, signed out everywhere. ``secret`` (a vendor API key) is stored in Vault only."""
        body: dict[str, Any] = {"backend": backend, "options": options or {}}
        if secret is not None:
            body["secret"] = secret
        return self._call("computer_browser_set", computer_id=computer_id, json=body)

    def computer_settings_set(self, computer_id: str, settings: dict[str, Any]) -> R:
        """Replace the computer's browser settings: ``locale``, ``timezone``, ``user_agent``,
        ``viewport`` ``{width, height}`` (at most 1280 × 720) and ``proxy`` ``{server, username?,
        password?}`` (credentials stored in Vault only). They apply when its browser next starts."""
        return self._call("computer_settings_set", computer_id=computer_id, json=settings)

    # -- bring your own agent: a run created with agent {"type": "external"} --

    def run_act(
        self,
        run_id: str | uuid.UUID,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        idempotency_key: str,
    ) -> R:
        """One tool call on the run's computer, once per ``idempotency_key`` (keep the key to retry safely).

        Answers the step ``{step_id, index, tool, state, result, run_status, required_action?}``;
        ``state == "started"`` means it still runs: read it with ``run_action``.
        """
        body = {"tool": tool, "arguments": arguments or {}, "idempotency_key": idempotency_key}
        return self._call("run_act", run_id=run_id, json=body)

    def run_action(self, run_id: str | uuid.UUID, step_id: int, *, wait: int = 20) -> R:
        """An action's step, waiting up to ``wait`` seconds (0-25) while it still runs; never runs anything."""
        return self._call("run_action", run_id=run_id, step_id=step_id, params={"wait": wait})

    def run_observe(self, run_id: str | uuid.UUID) -> R:
        """What the run's page shows now: ``url``, ``title``, bounded ``text``; no screenshot, no secret."""
        return self._call("run_observe", run_id=run_id)

    # -- webhooks --

    def webhooks_list(self) -> R:
        """The account's webhook endpoints ``{webhooks: [...]}`` (never a secret)."""
        return self._call("webhooks_list")

    def webhook_create(self, *, url: str, event_types: list[str], description: str = "") -> R:
        """Register an endpoint: ``{webhook, secret}``. The ``whsec_`` secret is shown this once: keep it."""
        return self._call("webhook_create", json={"url": url, "event_types": event_types, "description": description})

    def webhook_get(self, webhook_id: str | uuid.UUID) -> R:
        """One endpoint."""
        return self._call("webhook_get", webhook_id=webhook_id)

    def webhook_update(self, webhook_id: str | uuid.UUID, **changes: Any) -> R:
        """Change ``url``, ``event_types``, ``description`` or ``enabled``."""
        return self._call("webhook_update", webhook_id=webhook_id, json=changes)

    def webhook_delete(self, webhook_id: str | uuid.UUID) -> R:
        """Delete an endpoint, its secrets and its delivery log (answers None)."""
        return self._call("webhook_delete", webhook_id=webhook_id)

    def webhook_rotate_secret(self, webhook_id: str | uuid.UUID, *, overlap_seconds: int = 86400) -> R:
        """A new secret ``{secret, previous_secret_expires_at}``; the old one still signs for ``overlap_seconds``."""
        return self._call("webhook_rotate_secret", webhook_id=webhook_id, json={"overlap_seconds": overlap_seconds})

    def webhook_test(self, webhook_id: str | uuid.UUID) -> R:
        """Send a ``webhook.test`` event; answers its delivery (read its fate in ``webhook_deliveries``)."""
        return self._call("webhook_test", webhook_id=webhook_id, json={})

    def webhook_deliveries(
        self, webhook_id: str | uuid.UUID, *, status: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> R:
        """The endpoint's delivery log ``{deliveries, count, next_offset}``: status, attempts, last error."""
        params = {"status": status, "limit": limit, "offset": offset}
        return self._call("webhook_deliveries", webhook_id=webhook_id, params=params)
    # -- what happened: steps, events, masked screenshots --

    def run_steps(self, run_id: str | uuid.UUID, *, after: int | None = None, limit: int | None = None) -> R:
        """A page ``{steps, next_after}`` of the run's steps in order: ``tool``, secret-free ``arguments``,
        ``state`` (started, succeeded, failed, uncertain), ``result``, times and ``artifact_ids``."""
        return self._call("run_steps", run_id=run_id, params={"after": after, "limit": limit})

    def run_events(self, run_id: str | uuid.UUID, *, after: int | None = None, limit: int | None = None) -> R:
        """A page ``{events, next_after}`` of the run's secret-free events, oldest first; pass the last
        ``id`` you read as ``after`` to get only newer ones."""
        return self._call("run_events", run_id=run_id, params={"after": after, "limit": limit})

    def run_recording(self, run_id: str | uuid.UUID, *, segment: int = 0) -> R:
        """The bytes of one segment of the run's recording (runner key): a complete WebM/VP9 file,
        masked at the source; ``run_recording_timeline`` lists the segments."""
        return self._call("run_recording", run_id=run_id, params={"segment": segment})

    def run_recording_timeline(self, run_id: str | uuid.UUID) -> R:
        """``{recording, entries}``: the recording's segments (``offset_ms``, ``duration_ms``) and its
        timeline — steps, pauses, continuations and a person's control periods (who, how many inputs)
        at ``offset_ms`` into the video. A run without a recording (yet) is a 404 ``RamError``."""
        return self._call("run_recording_timeline", run_id=run_id)

    def artifact_get(self, artifact_id: str | uuid.UUID) -> R:
        """The bytes of a stored artifact of the account (runner key): a masked screenshot (PNG; password
        and typed-into fields blurred), a file the computer downloaded (named in a step's
        ``result.downloads`` and the ``download_stored`` event, with its ``sha256``) or an upload."""
        return self._call("artifact_get", artifact_id=artifact_id)

    def artifact_upload(self, data: bytes, *, filename: str, content_type: str) -> R:
        """Upload a file for the ``upload`` tool (runner key): ``{id, kind, filename, content_type, size,
        sha256, created_at}``; pass ``id`` as the tool's ``artifact_id``. The server takes at most
        ``RAM_UPLOAD_MAX_BYTES`` of one of ``RAM_UPLOAD_CONTENT_TYPES`` (else 413 or 415)."""
        if not isinstance(data, bytes | bytearray) or not data:
            raise ValueError("data is the file's bytes (not empty).")
        if not isinstance(filename, str) or not filename or "/" in filename or "\\" in filename:
            raise ValueError("filename is a plain file name, without a path.")
        if not isinstance(content_type, str) or not re.fullmatch(r"[\w.+-]+/[\w.+-]+", content_type):
            raise ValueError("content_type is a media type such as application/pdf.")
        return self._call(
            "artifact_upload", params={"filename": filename}, content=bytes(data), content_type=content_type
        )

    # -- interventions --

    def intervention_descriptor(self, run_id: str | uuid.UUID) -> R:
        """The checked intervention descriptor of a paused run (runner key).

        Returns the ``intervention`` object: present ``progress``, ``user_action``,
        ``next_step`` and ``human_action["url"]`` to the person. Raises
        ``RamApiError`` when no intervention is available and
        ``InvalidDescriptor`` when the answer fails the checks.
        """
        return self._call("intervention_descriptor", run_id=run_id)

    def intervention(self, run_id: str | uuid.UUID) -> R:
        """Legacy ``GET /api/runs/{id}/intervention`` for existing trusted interfaces.

        Its answer may hold a Vault invite: never pass it to a model, a
        transcript or a log. Harnesses use ``intervention_descriptor``.
        """
        return self._call("intervention", run_id=run_id)

    # -- the screen --

    def _stream_credential(self) -> Callable[[], Any]:
        raise NotImplementedError

    async def open_visual_stream(
        self,
        computer_id: str,
        *,
        render_jpeg: RenderJpeg,
        mode: Literal["observe", "control"] = "observe",
        on_message: OnMessage | None = None,
        on_disconnect: Callable[[], Any] | None = None,
    ) -> VisualStream:
        """``ram_sdk.open_visual_stream`` with this client's origin, credential and timeout as the deadline."""
        return await open_visual_stream(
            base_url=self.origin,
            computer_id=computer_id,
            credential=self._stream_credential(),
            render_jpeg=render_jpeg,
            mode=mode,
            on_message=on_message,
            on_disconnect=on_disconnect,
            deadline=self.timeout,
        )

    async def observe_computer(
        self, computer_id: str, *, render_jpeg: RenderJpeg, on_disconnect: Callable[[], Any] | None = None
    ) -> VisualStream:
        """Observe ``computer_id`` (see ``ram_sdk.observe_computer``): no control, no reconnection."""
        return await self.open_visual_stream(computer_id, render_jpeg=render_jpeg, on_disconnect=on_disconnect)


class RamClient(_Endpoints[Any]):
    """A RAM server's REST API with an API key from ``credential()`` (blocking; see ``AsyncRamClient``).

    ``base_url`` is the server's origin (HTTPS, or HTTP on local loopback).
    ``timeout`` is this client's finite deadline, in seconds, for each request.
    Redirects are never followed. A refusal raises ``RamApiError`` with the
    status and the server's message.
    """

    def __init__(
        self,
        base_url: str,
        credential: Callable[[], str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.timeout = _finite_timeout(timeout)
        self.origin = checked_origin(base_url)
        self._credential = credential
        self._http = httpx.Client(
            base_url=self.origin, timeout=self.timeout, follow_redirects=False, transport=transport, trust_env=False
        )

    def __repr__(self) -> str:
        return f"RamClient({self.origin!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RamClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, run_id: str | uuid.UUID) -> RunHandle:
        """A handle on one run: ``run.act(tool, arguments)`` (its settled step) and ``run.observe()``."""
        return RunHandle(self, run_id)

    def _key(self) -> str:
        key = self._credential()
        if inspect.isawaitable(key):
            raise TypeError("RamClient needs a credential that returns a string; use AsyncRamClient for a coroutine.")
        _headers(key)
        return key

    def _stream_credential(self) -> Callable[[], Any]:
        return self._key

    def _send(self, request: Request) -> Any:
        response = self._http.request(
            request.method,
            request.path,
            json=request.json,
            content=request.content,
            params=request.params,
            headers=request.headers(self._key()),
        )
        return _answer(response, request)


class AsyncRamClient(_Endpoints[Awaitable[Any]]):
    """``RamClient`` for asyncio harnesses: the same methods, awaited; ``credential`` may be a coroutine function."""

    def __init__(
        self,
        base_url: str,
        credential: Callable[[], str | Awaitable[str]],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout = _finite_timeout(timeout)
        self.origin = checked_origin(base_url)
        self._credential = credential
        self._http = httpx.AsyncClient(
            base_url=self.origin, timeout=self.timeout, follow_redirects=False, transport=transport, trust_env=False
        )

    def __repr__(self) -> str:
        return f"AsyncRamClient({self.origin!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def run(self, run_id: str | uuid.UUID) -> AsyncRunHandle:
        """A handle on one run: ``await run.act(tool, arguments)`` (its settled step) and ``await run.observe()``."""
        return AsyncRunHandle(self, run_id)

    async def _key(self) -> str:
        key = self._credential()
        if inspect.isawaitable(key):
            key = await key
        _headers(key)
        return key  # type: ignore[return-value]

    def _stream_credential(self) -> Callable[[], Any]:
        return self._key

    async def _send(self, request: Request) -> Any:
        headers = request.headers(await self._key())
        response = await self._http.request(
            request.method, request.path, json=request.json, content=request.content, params=request.params, headers=headers
        )
        return _answer(response, request)
