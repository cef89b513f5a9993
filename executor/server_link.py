"""The executor→server link: the executor process's only way to the server's state, its
internal HTTP endpoint. (The other link, gateway→executor and worker→executor, is the executor's
private interface: ``executor/ops.py``, ``computers/client.py``.)

An executor holds no database access. Whatever it records or reads about its computer
(its generation's private-interface token, registering, heartbeats, its stop, the browser backend's configuration, its
browser settings, the profile generation, the vendor session it holds, a run's binding, a masked capture to keep,
a finished download to keep, an upload the ``upload`` action sets on the page, the packed
profile of a clean stop to keep and to restore on another host)
goes to ``/internal/executors/<computer_id>/...`` of the server, authenticated with the
computer's own executor token (``ram_ex_...``, ``RAM_EXECUTOR_TOKEN``), which reaches that
computer's endpoints only (``computers/internal.py`` serves them).

``ServerLink`` is what the executor's code calls. ``HttpServerLink`` is the one
``run_executor`` uses. An executor started inside a server process (tests, benchmarks) is given
the in-process one that ``computers.apps`` registers (``computers.inprocess``), which calls the
same services the endpoint does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pydantic

from executor.server_wire import (
    InternalDownload,
    InternalProfileFile,
    InternalProfileStore,
    InternalRecordingSegment,
    InternalUploadFile,
)

# The server answers internal calls quickly; a slow one is an unavailable server.
LINK_TIMEOUT_SECONDS = 20
# A server that is not listening yet (it starts after its executors, or restarts) is retried this long.
CONNECT_WAIT_SECONDS = 30
TOKEN_PREFIX = "ram_ex_"

# What a heartbeat answers: ``current``; ``ended`` when the generation was ended (the computer
# moved to another account, or its profile was reset: wipe the browser and register a new one);
# ``replaced`` when another generation registered (stop).
HEARTBEAT_CURRENT = "current"
HEARTBEAT_ENDED = "ended"
HEARTBEAT_REPLACED = "replaced"
# An executor heartbeats this often (from a thread of its own); the server calls one silent for
# two heartbeats (``RAM_EXECUTOR_STALE_SECONDS``, default 10) unavailable.
HEARTBEAT_SECONDS = 5.0

# A download's bytes go to the server in the body of ``downloads``, read from disk this much at a time;
# what they are (name, size, SHA-256) goes in this header, as JSON (ASCII: ``\uXXXX`` escapes).
FILE_CHUNK_BYTES = 1 << 20
DOWNLOAD_HEADER = "Ram-Download"
# The answer of ``uploads/read``: the upload's bytes, and what they are in this header (JSON).
UPLOAD_HEADER = "Ram-Upload"
# ``profile/store`` and the answer of ``profile/restore``: a packed profile's bytes, what they are in this header.
PROFILE_HEADER = "Ram-Profile"


@dataclass(frozen=True)
class BrowserConfig:
    backend: str
    options: dict[str, Any]
    account_id: str
    # A vendor session a previous generation left behind (a crash): released before a new one.
    leftover_session_id: str
    # A one-use Vault token that reads only this account's secret of this backend (empty: none).
    vendor_grant: str = ""


@dataclass(frozen=True)
class LaunchConfig:
    """The computer's browser settings as its browser starts (``executor.contracts.ComputerSettings``)."""

    # As stored (the executor checks them); empty with ``valid`` False when they no longer pass the checks.
    settings: dict[str, Any]
    account_id: str
    valid: bool = True
    # A one-use Vault token that reads only this computer's upstream proxy credentials (empty: none).
    proxy_grant: str = ""


@dataclass(frozen=True)
class StoredFile:
    """What a run's steps and events say of a stored download (never its bytes)."""

    artifact_id: str
    filename: str
    content_type: str
    size: int
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UploadFile:
    """An upload of the run's account, with its bytes, as the ``upload`` action sets it on a file input."""

    artifact_id: str
    filename: str
    content_type: str
    size: int
    sha256: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class SegmentUpload:
    """A closed segment of a run's recording, as the recorder hands it to its link."""

    recording_id: str
    index: int
    offset_ms: int
    duration_ms: int
    frames: int
    final: bool
    capped: str
    periods: list[dict[str, Any]]
    data: bytes

    def body(self) -> InternalRecordingSegment:
        """The ``recordings/segment`` body (the bytes in base64), validated."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "data"}
        return InternalRecordingSegment.model_validate({**fields, "data": base64.b64encode(self.data).decode()})


class LinkError(Exception):
    """The server refused or did not answer an internal call (the message names no secret)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        # The HTTP status of a refusal (401: the token is unknown or was rotated; 403: another computer's).
        self.status = status


class BindingChanged(LinkError):
    """The run's binding to this computer no longer holds (the server read nothing for it)."""

    def __init__(self) -> None:
        super().__init__("The run's computer binding changed.", 409)


def file_digest(path: Path) -> tuple[int, str]:
    """The size and SHA-256 (hex) of a file on disk (blocking: call it off the event loop)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(FILE_CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(open, path, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, FILE_CHUNK_BYTES):
            yield chunk
    finally:
        handle.close()


class ServerLink(Protocol):
    async def register(self, *, generation: uuid.UUID, address: str) -> bool: ...
    async def private_token(self, *, generation: uuid.UUID) -> str: ...
    async def heartbeat(self, *, generation: uuid.UUID) -> str: ...
    async def stopped(self, *, generation: uuid.UUID, failed: bool) -> None: ...
    async def browser_config(self) -> BrowserConfig | None: ...
    async def launch_settings(self, *, proxy_grant: bool) -> LaunchConfig | None: ...
    async def profile_generation(self) -> uuid.UUID | None: ...
    async def session_record(self, *, session_id: str, ready_ms: int | None) -> None: ...
    async def session_released(self, *, session_id: str) -> None: ...
    async def binding_holds(self, *, account_id: str, binding: str) -> bool: ...
    async def artifact_store(self, *, kind: str, data: bytes, content_type: str = "image/png") -> uuid.UUID: ...
    async def download_store(self, *, path: Path, filename: str, size: int, sha256: str) -> StoredFile | None: ...
    async def upload_read(self, *, account_id: str, binding: str, artifact_id: str) -> UploadFile | None: ...
    async def profile_store(self, *, generation: uuid.UUID, profile_generation: uuid.UUID, data: bytes) -> bool: ...
    async def profile_restore(self, *, profile_generation: uuid.UUID) -> bytes | None: ...
    async def recording_segment_store(self, segment: SegmentUpload) -> None: ...


class HttpServerLink:
    """``ServerLink`` over the server's internal endpoint (``RAM_SERVER_INTERNAL_URL``)."""

    def __init__(
        self,
        *,
        base_url: str,
        computer_id: str,
        token: str,
        timeout: float = LINK_TIMEOUT_SECONDS,
        connect_wait: float = CONNECT_WAIT_SECONDS,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.computer_id = computer_id
        self._token = token
        self.timeout = timeout
        self.connect_wait = connect_wait
        # One TLS context for every call: building one loads the CA bundle (about 30 ms of CPU),
        # which at one heartbeat every 5 s was most of an idle executor's CPU (``make bench``).
        self._tls: ssl.SSLContext | None = None

    async def _send(
        self,
        op: str,
        *,
        body: dict[str, Any] | None = None,
        content: Callable[[], AsyncIterator[bytes]] | None = None,
        headers: dict[str, str] | None = None,
        connect_wait: float | None = None,
    ) -> httpx.Response:
        """POST ``op`` with a JSON ``body``, or with the bytes ``content()`` yields (a new
        iterator for each attempt); a refusal is a ``LinkError``."""
        url = f"{self.base_url}/internal/executors/{self.computer_id}/{op}"
        deadline = time.monotonic() + (self.connect_wait if connect_wait is None else connect_wait)
        sent = {"Authorization": f"Bearer {self._token}", **(headers or {})}
        while True:
            try:
                if self._tls is None:
                    self._tls = httpx.create_ssl_context(trust_env=False)
                async with httpx.AsyncClient(timeout=self.timeout, trust_env=False, verify=self._tls) as client:
                    if content is not None:
                        response = await client.post(url, content=content(), headers=sent)
                    else:
                        response = await client.post(url, json=body or {}, headers=sent)
                break
            except httpx.ConnectError:
                if time.monotonic() >= deadline:
                    raise LinkError(f"The server's internal endpoint is not reachable ({op}).") from None
                await asyncio.sleep(0.5)
            except httpx.HTTPError as exc:
                raise LinkError(f"The server's internal endpoint did not answer {op} ({type(exc).__name__}).") from None
        if response.status_code != 200:
            try:
                reason = str(response.json().get("error", ""))[:300]
            except ValueError:
                reason = ""
            raise LinkError(f"The server refused {op} ({response.status_code}): {reason}", response.status_code)
        return response

    @staticmethod
    def _object(op: str, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise LinkError(f"The server answered {op} with no object.")
        return data

    async def _post(
        self, op: str, body: dict[str, Any] | None = None, *, connect_wait: float | None = None
    ) -> dict[str, Any]:
        return self._object(op, await self._send(op, body=body, connect_wait=connect_wait))

    async def register(self, *, generation: uuid.UUID, address: str) -> bool:
        return bool((await self._post("register", {"generation": str(generation), "address": address}))["found"])

    async def private_token(self, *, generation: uuid.UUID) -> str:
        """The token the gateway and workers will present to this generation's private interface
        (asked before registering: nobody can call a registered executor it cannot check)."""
        return str((await self._post("private-token", {"generation": str(generation)}))["private_token"])

    async def heartbeat(self, *, generation: uuid.UUID) -> str:
        return str((await self._post("heartbeat", {"generation": str(generation)}))["state"])

    async def stopped(self, *, generation: uuid.UUID, failed: bool) -> None:
        # On the way out: a server that is gone is not waited for.
        await self._post("stopped", {"generation": str(generation), "failed": failed}, connect_wait=2)

    async def browser_config(self) -> BrowserConfig | None:
        data = await self._post("browser")
        config = data.get("browser")
        if config is None:
            return None
        return BrowserConfig(
            backend=str(config["backend"]),
            options=dict(config["options"]),
            account_id=str(config["account_id"]),
            leftover_session_id=str(config["leftover_session_id"]),
            vendor_grant=str(config.get("vendor_grant") or ""),
        )

    async def launch_settings(self, *, proxy_grant: bool) -> LaunchConfig | None:
        """``proxy_grant``: also a one-use grant for the upstream proxy's credentials (asked only by
        an executor whose browser's network goes through its egress proxy)."""
        launch = (await self._post("settings", {"proxy_grant": proxy_grant})).get("settings")
        if launch is None:
            return None
        return LaunchConfig(
            settings=dict(launch["settings"]),
            account_id=str(launch["account_id"]),
            valid=bool(launch["valid"]),
            proxy_grant=str(launch.get("proxy_grant") or ""),
        )

    async def profile_generation(self) -> uuid.UUID | None:
        value = (await self._post("profile"))["profile_generation"]
        return uuid.UUID(value) if value else None

    async def session_record(self, *, session_id: str, ready_ms: int | None) -> None:
        await self._post("session", {"session_id": session_id, "ready_ms": ready_ms})

    async def session_released(self, *, session_id: str) -> None:
        await self._post("session/released", {"session_id": session_id})

    async def binding_holds(self, *, account_id: str, binding: str) -> bool:
        return bool((await self._post("binding", {"account_id": account_id, "binding": binding}))["holds"])

    async def artifact_store(self, *, kind: str, data: bytes, content_type: str = "image/png") -> uuid.UUID:
        body = {"kind": kind, "content_type": content_type, "data": base64.b64encode(data).decode()}
        return uuid.UUID(str((await self._post("artifacts", body))["artifact_id"]))

    async def recording_segment_store(self, segment: SegmentUpload) -> None:
        """Send a closed segment of a run's recording (``executor/recording.py``)."""
        await self._post("recordings/segment", segment.body().model_dump(mode="json"))

    async def download_store(self, *, path: Path, filename: str, size: int, sha256: str) -> StoredFile | None:
        """Send a finished download's bytes, streamed from disk, to be kept as an artifact of the
        computer's account; None when the server refuses it as larger than its
        ``RAM_DOWNLOAD_MAX_BYTES`` (nothing is stored). The server stores it only if it receives
        exactly ``size`` bytes whose SHA-256 is ``sha256``."""
        declared = InternalDownload(filename=filename, size=size, sha256=sha256).model_dump(mode="json")
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(size),
            DOWNLOAD_HEADER: json.dumps(declared),  # ensure_ascii: a header value stays ASCII
        }
        response = await self._send("downloads", content=lambda: _file_chunks(path), headers=headers)
        stored = self._object("downloads", response).get("stored")
        if stored is None:
            return None
        return StoredFile(
            artifact_id=str(stored["artifact_id"]),
            filename=str(stored["filename"]),
            content_type=str(stored["content_type"]),
            size=int(stored["size"]),
            sha256=str(stored["sha256"]),
        )

    async def upload_read(self, *, account_id: str, binding: str, artifact_id: str) -> UploadFile | None:
        """The bytes of an upload of the run's account (``account_id``), read by the server once the
        run's binding to this computer holds (``BindingChanged`` otherwise); None when the account
        has no such upload (another account's artifact, a capture or a download is none)."""
        body = {"account_id": account_id, "binding": binding, "artifact_id": artifact_id}
        try:
            response = await self._send("uploads/read", body=body)
        except LinkError as exc:
            if exc.status == 409:
                raise BindingChanged() from None
            raise
        if response.headers.get("Content-Type", "").startswith("application/json"):
            if self._object("uploads/read", response).get("upload") is not None:
                raise LinkError("The server answered uploads/read with no file.")
            return None
        try:
            meta = InternalUploadFile.model_validate_json(response.headers.get(UPLOAD_HEADER, ""))
        except pydantic.ValidationError:
            raise LinkError("The server answered uploads/read without a valid Ram-Upload header.") from None
        data = response.content
        if len(data) != meta.size or hashlib.sha256(data).hexdigest() != meta.sha256:
            raise LinkError("The upload's bytes the server sent do not match their size and SHA-256.")
        return UploadFile(str(meta.artifact_id), meta.filename, meta.content_type, meta.size, meta.sha256, data)

    async def profile_store(self, *, generation: uuid.UUID, profile_generation: uuid.UUID, data: bytes) -> bool:
        """Send the packed profile of a clean stop; whether the server kept it (False: not this
        computer's current generations, or larger than its ``RAM_PROFILE_STORE_MAX_BYTES``)."""
        declared = InternalProfileStore(
            generation=generation,
            profile_generation=profile_generation,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        ).model_dump(mode="json")
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(len(data)),
            PROFILE_HEADER: json.dumps(declared),
        }
        # On the way out: a server that is gone is not waited for.
        response = await self._send(
            "profile/store", content=lambda: _bytes_chunks(data), headers=headers, connect_wait=2
        )
        return bool(self._object("profile/store", response).get("stored"))

    async def profile_restore(self, *, profile_generation: uuid.UUID) -> bytes | None:
        """The last stored profile of ``profile_generation`` (decrypted by the server); None: none."""
        response = await self._send("profile/restore", body={"profile_generation": str(profile_generation)})
        if response.headers.get("Content-Type", "").startswith("application/json"):
            if self._object("profile/restore", response).get("profile") is not None:
                raise LinkError("The server answered profile/restore with no archive.")
            return None
        try:
            meta = InternalProfileFile.model_validate_json(response.headers.get(PROFILE_HEADER, ""))
        except pydantic.ValidationError:
            raise LinkError("The server answered profile/restore without a valid Ram-Profile header.") from None
        data = response.content
        if len(data) != meta.size or hashlib.sha256(data).hexdigest() != meta.sha256:
            raise LinkError("The profile's bytes the server sent do not match their size and SHA-256.")
        return data


async def _bytes_chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), FILE_CHUNK_BYTES):
        yield data[start : start + FILE_CHUNK_BYTES]


_in_process: list[Callable[[str], ServerLink]] = []


def register_in_process(factory: Callable[[str], ServerLink]) -> None:
    """Called by the server's app registry: the link of an executor started inside a server process."""
    _in_process[:] = [factory]


def in_process(computer_id: str) -> ServerLink:
    if not _in_process:
        raise LinkError("No server link: an executor process is given one (RAM_SERVER_INTERNAL_URL).")
    return _in_process[0](computer_id)
