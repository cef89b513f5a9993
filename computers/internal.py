"""The executors' internal endpoint: ``POST /internal/executors/<computer_id>/<op>``.

The only way an executor process reaches the server's state (``executor/link.py`` is its
client). Each call carries ``Authorization: Bearer ram_ex_...``, the computer's own executor
token: a missing or unknown token is 401, another computer's token 403, both in the
documented error shape (``{"error": ...}``). Each operation parses its closed body model and
calls one service or selector.

Two operations carry a file's bytes rather than JSON: ``downloads`` takes a finished download's
bytes as its body (``application/octet-stream``, what they are in the ``Ram-Download`` header,
at most ``RAM_DOWNLOAD_MAX_BYTES``), and ``uploads/read`` answers with an upload's bytes (what
they are in the ``Ram-Upload`` header). ``profile/store`` takes a clean stop's packed profile as
its body (what it is in the ``Ram-Profile`` header), and ``profile/restore`` answers with the last
stored one (``computers/profiles.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from collections.abc import Callable
from typing import Any

import pydantic
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from computers.artifacts import MAX_ARTIFACT_BYTES, artifact_store
from computers.errors import ExecutorOperationUnknown
from computers.files import download_store, upload_for_run
from computers.placement import host_authenticate, host_sync
from computers.profiles import profile_load, profile_store
from computers.recordings import recording_segment_store
from computers.selectors import computer_binding_holds, computer_profile_generation
from computers.services import (
    computer_browser_session_record,
    computer_browser_session_released,
    executor_authenticate,
    executor_browser_config,
    executor_heartbeat,
    executor_launch_settings,
    executor_private_token,
    executor_register,
    executor_stopped,
)
from core.api import InvalidBody, domain_error_response, error_response, json_response, validation_message
from core.errors import DomainError
from executor import server_wire as c
from executor.server_link import DOWNLOAD_HEADER, PROFILE_HEADER, UPLOAD_HEADER

# A masked capture, base64 in JSON, is the largest body.
MAX_INTERNAL_BODY_BYTES = MAX_ARTIFACT_BYTES * 4 // 3 + 4096


def _private_token(computer_id: str, body: c.InternalGeneration) -> dict[str, Any]:
    return {"private_token": executor_private_token(computer_id=computer_id, generation=body.generation)}


def _register(computer_id: str, body: c.InternalRegister) -> dict[str, Any]:
    return {"found": executor_register(computer_id=computer_id, generation=body.generation, address=body.address)}


def _heartbeat(computer_id: str, body: c.InternalGeneration) -> dict[str, Any]:
    return {"state": executor_heartbeat(computer_id=computer_id, generation=body.generation)}


def _stopped(computer_id: str, body: c.InternalStopped) -> dict[str, Any]:
    executor_stopped(computer_id=computer_id, generation=body.generation, failed=body.failed)
    return {}


def _browser(computer_id: str, body: c.InternalEmpty) -> dict[str, Any]:
    config = executor_browser_config(computer_id=computer_id)
    return {"browser": None if config is None else config.__dict__}


def _settings(computer_id: str, body: c.InternalSettings) -> dict[str, Any]:
    launch = executor_launch_settings(computer_id=computer_id, proxy_grant=body.proxy_grant)
    return {"settings": None if launch is None else launch.__dict__}


def _profile(computer_id: str, body: c.InternalEmpty) -> dict[str, Any]:
    generation = computer_profile_generation(computer_id=computer_id)
    return {"profile_generation": str(generation) if generation else None}


def _session(computer_id: str, body: c.InternalSession) -> dict[str, Any]:
    computer_browser_session_record(computer_id=computer_id, session_id=body.session_id, ready_ms=body.ready_ms)
    return {}


def _session_released(computer_id: str, body: c.InternalSessionReleased) -> dict[str, Any]:
    computer_browser_session_released(computer_id=computer_id, session_id=body.session_id)
    return {}


def _binding(computer_id: str, body: c.InternalBinding) -> dict[str, Any]:
    holds = computer_binding_holds(computer_id=computer_id, account_id=body.account_id, binding=body.binding)
    return {"holds": holds}


def _artifact(computer_id: str, body: c.InternalArtifact) -> dict[str, Any]:
    try:
        data = base64.b64decode(body.data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidBody("Invalid request: data must be base64.") from None
    if len(data) > MAX_ARTIFACT_BYTES:
        raise InvalidBody("Invalid request: the capture is too large.")
    artifact_id = artifact_store(computer_id=computer_id, kind=body.kind, data=data, content_type=body.content_type)
    return {"artifact_id": str(artifact_id)}


def _recording_segment(computer_id: str, body: c.InternalRecordingSegment) -> dict[str, Any]:
    return {"stored": recording_segment_store(computer_id=computer_id, body=body)}


def _upload_read(computer_id: str, body: c.InternalUploadRead) -> dict[str, Any] | HttpResponse:
    upload = upload_for_run(
        computer_id=computer_id, account_id=body.account_id, binding=body.binding, artifact_id=str(body.artifact_id)
    )
    if upload is None:
        return {"upload": None}
    meta = c.InternalUploadFile(
        artifact_id=uuid.UUID(upload.artifact_id),
        filename=upload.filename,
        content_type=upload.content_type,
        size=upload.size,
        sha256=upload.sha256,
    )
    response = HttpResponse(upload.data, content_type="application/octet-stream")
    response[UPLOAD_HEADER] = json.dumps(meta.model_dump(mode="json"))  # ensure_ascii: a header value stays ASCII
    return response


def _download(computer_id: str, request: HttpRequest) -> dict[str, Any]:
    """A finished download's bytes (the body), stored when they are what ``Ram-Download`` declares."""
    if request.headers.get("Content-Type", "").split(";")[0].strip() != "application/octet-stream":
        raise InvalidBody("Invalid request: Content-Type must be application/octet-stream.")
    try:
        declared = c.InternalDownload.model_validate_json(request.headers.get(DOWNLOAD_HEADER, ""))
    except pydantic.ValidationError as exc:
        raise InvalidBody(
            f"Invalid {DOWNLOAD_HEADER} header: " + validation_message(exc).removeprefix("Invalid request: ")
        ) from None
    if request.headers.get("Content-Length", "") != str(declared.size):
        raise InvalidBody("Invalid request: Content-Length must be the declared size.")
    # None: over RAM_DOWNLOAD_MAX_BYTES, refused before a byte is read (nothing is stored).
    stored = download_store(
        computer_id=computer_id,
        stream=request,  # type: ignore[arg-type]
        filename=declared.filename,
        size=declared.size,
        sha256=declared.sha256,
    )
    return {"stored": None if stored is None else stored.as_dict()}


def _profile_store(computer_id: str, request: HttpRequest) -> dict[str, Any]:
    """A clean stop's packed profile (the body), kept encrypted when it is what ``Ram-Profile`` declares."""
    if request.headers.get("Content-Type", "").split(";")[0].strip() != "application/octet-stream":
        raise InvalidBody("Invalid request: Content-Type must be application/octet-stream.")
    try:
        declared = c.InternalProfileStore.model_validate_json(request.headers.get(PROFILE_HEADER, ""))
    except pydantic.ValidationError as exc:
        raise InvalidBody(
            f"Invalid {PROFILE_HEADER} header: " + validation_message(exc).removeprefix("Invalid request: ")
        ) from None
    if request.headers.get("Content-Length", "") != str(declared.size):
        raise InvalidBody("Invalid request: Content-Length must be the declared size.")
    stored = profile_store(
        computer_id=computer_id,
        generation=declared.generation,
        profile_generation=declared.profile_generation,
        stream=request,  # type: ignore[arg-type]
        size=declared.size,
        sha256=declared.sha256,
    )
    return {"stored": stored}


def _profile_restore(computer_id: str, body: c.InternalProfileRestore) -> dict[str, Any] | HttpResponse:
    data = profile_load(computer_id=computer_id, profile_generation=body.profile_generation)
    if data is None:
        return {"profile": None}
    meta = c.InternalProfileFile(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    response = HttpResponse(data, content_type="application/octet-stream")
    response[PROFILE_HEADER] = json.dumps(meta.model_dump(mode="json"))
    return response


OPERATIONS: dict[str, tuple[type[pydantic.BaseModel], Callable[[str, Any], dict[str, Any] | HttpResponse]]] = {
    "private-token": (c.InternalGeneration, _private_token),
    "register": (c.InternalRegister, _register),
    "heartbeat": (c.InternalGeneration, _heartbeat),
    "stopped": (c.InternalStopped, _stopped),
    "browser": (c.InternalEmpty, _browser),
    "settings": (c.InternalSettings, _settings),
    "profile": (c.InternalEmpty, _profile),
    "session": (c.InternalSession, _session),
    "session/released": (c.InternalSessionReleased, _session_released),
    "binding": (c.InternalBinding, _binding),
    "artifacts": (c.InternalArtifact, _artifact),
    "uploads/read": (c.InternalUploadRead, _upload_read),
    "profile/restore": (c.InternalProfileRestore, _profile_restore),
    "recordings/segment": (c.InternalRecordingSegment, _recording_segment),
}
# Operations whose body is not JSON: they read the request themselves.
RAW_OPERATIONS: dict[str, Callable[[str, HttpRequest], dict[str, Any]]] = {
    "downloads": _download,
    "profile/store": _profile_store,
}


def _bearer(request: HttpRequest) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme == "Bearer" else ""


def _body(request: HttpRequest, model: type[pydantic.BaseModel]) -> Any:
    if request.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
        raise InvalidBody("Invalid request: Content-Type must be application/json.")
    # Read from the stream: a capture is larger than DATA_UPLOAD_MAX_MEMORY_SIZE.
    raw = request.read(MAX_INTERNAL_BODY_BYTES + 1)
    if len(raw) > MAX_INTERNAL_BODY_BYTES:
        raise InvalidBody("Invalid request: body is too large.")
    try:
        return model.model_validate_json(raw or b"{}")
    except pydantic.ValidationError as exc:
        raise InvalidBody(validation_message(exc)) from None


@csrf_exempt
def internal_call(request: HttpRequest, computer_id: str, op: str) -> HttpResponse:
    if request.method != "POST":
        response = error_response(405, f"Method {request.method} is not allowed here.")
        response["Allow"] = "POST"
        return response
    try:
        # Authenticated before anything else: an unknown operation is not revealed to a stranger.
        executor_authenticate(computer_id=computer_id, raw_token=_bearer(request))
        raw = RAW_OPERATIONS.get(op)
        if raw is not None:
            return json_response(raw(computer_id, request))
        operation = OPERATIONS.get(op)
        if operation is None:
            raise ExecutorOperationUnknown()
        model, handler = operation
        answer = handler(computer_id, _body(request, model))
        return answer if isinstance(answer, HttpResponse) else json_response(answer)
    except DomainError as exc:
        return domain_error_response(exc)


@csrf_exempt
def host_call(request: HttpRequest, host_id: str, op: str) -> HttpResponse:
    """``POST /internal/hosts/<host_id>/sync`` with the host's own token (``Bearer ram_host_...``): its
    report in, its orders out (``computers.placement.host_sync``). Nothing else is served to a host."""
    if request.method != "POST":
        response = error_response(405, f"Method {request.method} is not allowed here.")
        response["Allow"] = "POST"
        return response
    try:
        host_authenticate(host_id=host_id, raw_token=_bearer(request))
        if op != "sync":
            raise ExecutorOperationUnknown()
        body = _body(request, c.InternalHostSync)
        orders = host_sync(
            host_id=host_id,
            capacity=body.capacity,
            running=body.running,
            exited=body.exited,
            health=body.health.model_dump(mode="json", exclude_none=True),
        )
        out = c.InternalHostOrders(start=[c.InternalHostStart(**s) for s in orders.start], stop=orders.stop)
        return json_response(out.model_dump(mode="json"))
    except DomainError as exc:
        return domain_error_response(exc)
