"""``RamClient``: the REST API of runs, and the intervention descriptor check.

The credential is a callable that returns the API key when a request is made;
the client never stores it, logs it or puts it in an exception.
"""

from __future__ import annotations

import inspect
import math
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import httpx

from ram_sdk.errors import InvalidDescriptor, RamApiError, UnsafeOrigin

if TYPE_CHECKING:
    from ram_sdk.visual import OnMessage, RenderJpeg, VisualStream

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_TIMEOUT = 30.0


# --- Origins ------------------------------------------------------------------


def checked_origin(base_url: str) -> str:
    """The origin ``scheme://host[:port]`` of ``base_url``, if it is HTTPS or plain HTTP on loopback.

    Refuses credentials in the URL, a path other than ``/``, a query and a fragment.
    """
    parts = urlsplit(base_url)
    if (
        parts.username is not None
        or parts.password is not None
        or "?" in base_url
        or "#" in base_url
        or parts.path not in ("", "/")
        or not parts.hostname
        or not (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS))
    ):
        raise UnsafeOrigin("Use an HTTPS origin or local loopback.")
    return _origin_of(parts)


def _origin_of(parts: Any) -> str:
    default = {"http": 80, "https": 443}[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = parts.port or default
    return f"{parts.scheme}://{host}" + ("" if port == default else f":{port}")


def _same_origin(url: str, origin: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    try:
        return _origin_of(parts) == origin
    except ValueError:  # an invalid port
        return False


# --- The intervention descriptor ----------------------------------------------

# Patterns are used with fullmatch (``$`` would also match before a final newline).
_COMPUTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_KINDS = ("human_control", "credential", "google_connection")
_STATES = ("pending", "credential_saved")
_REASONS = ("authentication", "captcha", "verification", "missing_information", "authorization_required", "other")
_FIELDS = {
    "version",
    "run_id",
    "computer_id",
    "kind",
    "state",
    "reason",
    "progress",
    "user_action",
    "next_step",
    "request_id",
    "expires_at",
    "human_action",
}
_FORBIDDEN_IN_TEXT = re.compile(r"(?i)https?:|#\s*invite|invite\s*=|ram-ticket\.|\bticket\s*[=:]|bearer|ram_(?:rk|ok)_")


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# ISO 8601 with a time and a time zone (the TypeScript SDK uses the same pattern).
_AWARE_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:[0-9]{2})")
_URL_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\\s]+")


def _is_uuid(value: Any) -> bool:
    return isinstance(value, str) and bool(_UUID.fullmatch(value))


def _is_aware_iso(value: Any) -> bool:
    if not isinstance(value, str) or not _AWARE_ISO.fullmatch(value):
        return False
    value = re.sub(r"\.(\d{6})\d+", r".\1", value)  # fromisoformat reads at most microseconds
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return parsed.tzinfo is not None


def _is_text(value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value.encode("utf-16-le", "surrogatepass")) // 2 <= 500
        and not _FORBIDDEN_IN_TEXT.search(value)
    )


def _is_locator(url: str, run_id: str, origin: str) -> bool:
    """``url`` is exactly ``<origin>/tasks/<run_id>/intervention``: absolute, no credentials, query or fragment."""
    path = f"/tasks/{run_id}/intervention"
    if not url.endswith(path):
        return False
    prefix = url[: -len(path)]
    if not _URL_PREFIX.fullmatch(prefix):
        return False
    parts = urlsplit(prefix)
    return parts.username is None and parts.password is None and _same_origin(prefix, origin)


def check_intervention(data: Any, *, run_id: str, origin: str) -> dict[str, Any]:
    """Validate a descriptor response ``{"intervention": {...}}`` for ``run_id`` on ``origin``.

    Checks what the spec's presentation code checks — the run binding,
    ``requires_login`` exactly ``true``, and an absolute locator on the same origin
    with exactly the path ``/tasks/<run_id>/intervention`` and no query or fragment —
    and the descriptor contract (closed objects, enums, texts, per-kind fields).
    Returns the ``intervention`` object; raises ``InvalidDescriptor`` otherwise.
    """
    if not isinstance(data, dict) or set(data) != {"intervention"} or not isinstance(data["intervention"], dict):
        raise InvalidDescriptor("Invalid link: the response is not {intervention: object}.")
    item: dict[str, Any] = data["intervention"]
    action = item.get("human_action")
    if item.get("run_id") != run_id:
        raise InvalidDescriptor("Invalid link: the descriptor is for another run.")
    if not isinstance(action, dict) or set(action) != {"url", "requires_login"} or action["requires_login"] is not True:
        raise InvalidDescriptor("Invalid link: human_action must be {url, requires_login: true}.")
    url = action["url"]
    if not isinstance(url, str):
        raise InvalidDescriptor("Invalid link: human_action.url is not a string.")
    if not _is_locator(url, run_id, origin):
        raise InvalidDescriptor("Invalid link: the locator is not this server's intervention page for the run.")
    problems = []
    if set(item) - _FIELDS:
        problems.append("unknown fields")
    if type(item.get("version")) is not int or item.get("version") != 1:
        problems.append("version")
    if not _is_uuid(item.get("run_id")):
        problems.append("run_id")
    if not isinstance(item.get("computer_id"), str) or not _COMPUTER_ID.fullmatch(item["computer_id"]):
        problems.append("computer_id")
    kind, state = item.get("kind"), item.get("state")
    if kind not in _KINDS:
        problems.append("kind")
    if state not in _STATES:
        problems.append("state")
    if item.get("reason") not in _REASONS:
        problems.append("reason")
    problems += [name for name in ("progress", "user_action", "next_step") if not _is_text(item.get(name))]
    if kind == "credential":
        if not _is_uuid(item.get("request_id")) or not _is_aware_iso(item.get("expires_at")):
            problems.append("request_id/expires_at")
    elif kind in ("human_control", "google_connection"):
        if state != "pending" or "expires_at" in item:
            problems.append("state/expires_at")
        if kind == "human_control" and "request_id" in item:
            problems.append("request_id")
        if kind == "google_connection" and item.get("request_id") != run_id:
            problems.append("request_id")
    if problems:
        raise InvalidDescriptor("Invalid descriptor: " + ", ".join(problems) + ".")
    return item


# --- The clients --------------------------------------------------------------


def _finite_timeout(timeout: float) -> float:
    if not (isinstance(timeout, int | float) and not isinstance(timeout, bool) and math.isfinite(timeout) and timeout > 0):
        raise ValueError("Choose a finite, positive timeout in seconds.")
    return float(timeout)


def _run_path(run_id: str | uuid.UUID, suffix: str = "") -> str:
    return f"/api/runs/{uuid.UUID(str(run_id))}{suffix}"


def _list_params(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _headers(key: Any) -> dict[str, str]:
    if not isinstance(key, str) or not key:
        raise TypeError("credential() must return the API key as a non-empty string.")
    return {"Authorization": f"Bearer {key}", "Accept": "application/json"}


def _answer(response: httpx.Response) -> Any:
    """The JSON body of a success; ``RamApiError`` for anything else (a redirect is never followed)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not response.is_success:
        message = body.get("error") if isinstance(body, dict) else None
        if response.is_redirect:
            message = "The server answered with a redirect, which this client does not follow."
        raise RamApiError(
            response.status_code, str(message or response.reason_phrase), body if isinstance(body, dict) else None
        )
    if body is None:
        raise RamApiError(response.status_code, "The server's answer is not JSON.")
    return body


class RamClient:
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

    def _key(self) -> str:
        key = self._credential()
        if inspect.isawaitable(key):
            raise TypeError("RamClient needs a credential that returns a string; use AsyncRamClient for a coroutine.")
        _headers(key)
        return key

    def _request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        return _answer(self._http.request(method, path, json=json, params=params, headers=_headers(self._key())))

    # -- runs --

    def run_get(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """A run, with ``required_action`` while its pause has not been continued."""
        result: dict[str, Any] = self._request("GET", _run_path(run_id))
        return result

    def runs_list(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        computer_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        """A page ``{runs, count, next_offset}`` of the account's runs, newest first."""
        params = _list_params(status=status, kind=kind, computer_id=computer_id, limit=limit, offset=offset)
        result: dict[str, Any] = self._request("GET", "/api/runs", params=params)
        return result

    def run_create(self, **fields: Any) -> dict[str, Any]:
        """Create a run: ``fields`` is the body of ``POST /api/runs`` (``task``, ``computer_id``, ``agent``, ``max_model_calls``)."""
        result: dict[str, Any] = self._request("POST", "/api/runs", json=fields)
        return result

    def run_continue(self, run_id: str | uuid.UUID, *, idempotency_key: str) -> dict[str, Any]:
        """Continue a paused run. Keep ``idempotency_key``: after a lost answer, retry with the same one."""
        body = {"idempotency_key": idempotency_key}
        result: dict[str, Any] = self._request("POST", _run_path(run_id, "/continue"), json=body)
        return result

    def run_cancel(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """Cancel a run that has not finished; its intervention link becomes unavailable."""
        result: dict[str, Any] = self._request("POST", _run_path(run_id, "/cancel"), json={})
        return result

    def run_viewer(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """The authenticated viewer of the run's computer: show its ``url`` only when the person wants to watch."""
        result: dict[str, Any] = self._request("GET", _run_path(run_id, "/viewer"))
        return result

    def computers_list(self) -> dict[str, Any]:
        """The account's computers ``{computers: [{id, name, available, status}]}``."""
        result: dict[str, Any] = self._request("GET", "/api/computers")
        return result

    # -- interventions --

    def intervention_descriptor(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """The checked intervention descriptor of a paused run (runner key).

        Returns the ``intervention`` object: present ``progress``, ``user_action``,
        ``next_step`` and ``human_action["url"]`` to the person. Raises
        ``RamApiError`` when no intervention is available and
        ``InvalidDescriptor`` when the answer fails the checks.
        """
        run = str(uuid.UUID(str(run_id)))
        data = self._request("GET", _run_path(run, "/intervention-descriptor"))
        return check_intervention(data, run_id=run, origin=self.origin)

    def intervention(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """Legacy ``GET /api/runs/{id}/intervention`` for existing trusted interfaces.

        Its answer may hold a Vault invite: never pass it to a model, a
        transcript or a log. Harnesses use ``intervention_descriptor``.
        """
        result: dict[str, Any] = self._request("GET", _run_path(run_id, "/intervention"))
        return result

    # -- the screen --

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
        from ram_sdk.visual import open_visual_stream

        return await open_visual_stream(
            base_url=self.origin,
            computer_id=computer_id,
            credential=self._key,
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


class AsyncRamClient:
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

    async def _key(self) -> str:
        key = self._credential()
        if inspect.isawaitable(key):
            key = await key
        _headers(key)
        return key  # type: ignore[return-value]

    async def _request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        headers = _headers(await self._key())
        return _answer(await self._http.request(method, path, json=json, params=params, headers=headers))

    async def run_get(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """A run, with ``required_action`` while its pause has not been continued."""
        result: dict[str, Any] = await self._request("GET", _run_path(run_id))
        return result

    async def runs_list(
        self,
        *,
        status: str | None = None,
        kind: str | None = None,
        computer_id: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> dict[str, Any]:
        """A page ``{runs, count, next_offset}`` of the account's runs, newest first."""
        params = _list_params(status=status, kind=kind, computer_id=computer_id, limit=limit, offset=offset)
        result: dict[str, Any] = await self._request("GET", "/api/runs", params=params)
        return result

    async def run_create(self, **fields: Any) -> dict[str, Any]:
        """Create a run: ``fields`` is the body of ``POST /api/runs``."""
        result: dict[str, Any] = await self._request("POST", "/api/runs", json=fields)
        return result

    async def run_continue(self, run_id: str | uuid.UUID, *, idempotency_key: str) -> dict[str, Any]:
        """Continue a paused run. Keep ``idempotency_key``: after a lost answer, retry with the same one."""
        body = {"idempotency_key": idempotency_key}
        result: dict[str, Any] = await self._request("POST", _run_path(run_id, "/continue"), json=body)
        return result

    async def run_cancel(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """Cancel a run that has not finished; its intervention link becomes unavailable."""
        result: dict[str, Any] = await self._request("POST", _run_path(run_id, "/cancel"), json={})
        return result

    async def run_viewer(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """The authenticated viewer of the run's computer."""
        result: dict[str, Any] = await self._request("GET", _run_path(run_id, "/viewer"))
        return result

    async def computers_list(self) -> dict[str, Any]:
        """The account's computers."""
        result: dict[str, Any] = await self._request("GET", "/api/computers")
        return result

    async def intervention_descriptor(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """The checked intervention descriptor (see ``RamClient.intervention_descriptor``)."""
        run = str(uuid.UUID(str(run_id)))
        data = await self._request("GET", _run_path(run, "/intervention-descriptor"))
        return check_intervention(data, run_id=run, origin=self.origin)

    async def intervention(self, run_id: str | uuid.UUID) -> dict[str, Any]:
        """Legacy ``GET /api/runs/{id}/intervention``: never pass its answer to a model, a transcript or a log."""
        result: dict[str, Any] = await self._request("GET", _run_path(run_id, "/intervention"))
        return result

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
        from ram_sdk.visual import open_visual_stream

        return await open_visual_stream(
            base_url=self.origin,
            computer_id=computer_id,
            credential=self._key,
            render_jpeg=render_jpeg,
            mode=mode,
            on_message=on_message,
            on_disconnect=on_disconnect,
            deadline=self.timeout,
        )

    async def observe_computer(
        self, computer_id: str, *, render_jpeg: RenderJpeg, on_disconnect: Callable[[], Any] | None = None
    ) -> VisualStream:
        """Observe ``computer_id``: no control, no reconnection."""
        return await self.open_visual_stream(computer_id, render_jpeg=render_jpeg, on_disconnect=on_disconnect)
