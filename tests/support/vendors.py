"""Loopback stand-ins for the managed-browser vendors, each handing out a real browser.

``RemoteChromium`` is a real Chromium started with remote debugging on loopback (what
the ``cdp`` backend connects to). ``FakeSteel`` and ``FakeBrowserbase`` implement the
subset of each vendor's public REST API that RAM uses, with the vendor's documented
request and response shapes, and give each session its own ``RemoteChromium``:

Steel (steel-sdk ``src/resources/sessions/sessions.ts`` and ``captchas.ts``; steel-browser
``api/src/modules/sessions/sessions.schema.ts``), header ``steel-api-key``:

* ``POST /v1/sessions`` body ``{solveCaptcha?, timeout?, dimensions?: {width, height}, ...}``
  → 200 Session ``{id, createdAt, status: "live", duration, eventCount, timeout, creditsUsed,
  websocketUrl, debugUrl, sessionViewerUrl, dimensions, proxyBytesUsed, solveCaptcha?}``;
* ``POST /v1/sessions/{id}/release`` → 200 ``{success: true, message}``;
* ``GET /v1/sessions/{id}/captchas/status`` (Steel Cloud only) → 200
  ``[{pageId, url, isSolvingCaptcha, tasks, created?, lastUpdated?}]``.

Browserbase (browserbase/sdk-python ``resources/sessions/sessions.py``,
``types/session_create_params.py``, ``session_update_params.py``, ``session.py``,
``session_create_response.py``), header ``X-BB-API-Key``:

* ``POST /v1/sessions`` body ``{projectId?, browserSettings?: {solveCaptchas?, viewport?},
  timeout?, keepAlive?, region?, ...}`` → 201 ``{id, createdAt, updatedAt, expiresAt,
  startedAt, projectId, keepAlive, proxyBytes, region, status: "RUNNING", connectUrl,
  seleniumRemoteUrl, signingKey}``;
* ``POST /v1/sessions/{id}`` body ``{status: "REQUEST_RELEASE", projectId?}`` → 200 Session
  (``status: "COMPLETED"``);
* ``GET /v1/sessions/{id}`` → 200 Session.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"


class RemoteChromium:
    """A real Chromium with remote debugging on a loopback port (a self-hosted CDP endpoint)."""

    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="ram-remote-chromium-"))
        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                # The test process runs as root on the project's machines.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if port_file.exists():
                lines = port_file.read_text().split()
                if len(lines) >= 2:
                    self.port = int(lines[0])
                    self.ws_url = f"ws://127.0.0.1:{self.port}{lines[1]}"
                    self.http_url = f"http://127.0.0.1:{self.port}"
                    return
            time.sleep(0.05)
        self.close()
        raise RuntimeError("Chromium did not open its remote debugging port")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


@contextlib.contextmanager
def remote_chromium() -> Iterator[RemoteChromium]:
    browser = RemoteChromium()
    try:
        yield browser
    finally:
        browser.close()


@dataclass
class VendorSession:
    id: str
    body: dict[str, Any]
    browser: RemoteChromium
    released: bool = False


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class FakeVendor:
    api_key: str
    # Keys of other accounts of the same vendor (each account has its own).
    other_keys: set[str] = field(default_factory=set)
    origin: str = ""
    sessions: dict[str, VendorSession] = field(default_factory=dict)
    # Every request as (method, path, headers, body): what RAM sent, checked by the tests.
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_session(self, body: dict[str, Any]) -> VendorSession:
        session = VendorSession(id=str(uuid.uuid4()), body=body, browser=RemoteChromium())
        with self.lock:
            self.sessions[session.id] = session
        return session

    def release(self, session_id: str) -> bool:
        session = self.sessions.get(session_id)
        if session is None:
            return False
        session.released = True
        session.browser.close()
        return True

    @property
    def live(self) -> list[VendorSession]:
        return [s for s in self.sessions.values() if not s.released]

    def close(self) -> None:
        for session in list(self.sessions.values()):
            session.browser.close()


@dataclass
class FakeSteel(FakeVendor):
    # Steel Cloud has the captcha status API and a solver; a self-hosted steel-browser has neither.
    cloud: bool = True
    solving: Callable[[str], bool] = lambda _session_id: False
    # The status API failing (a 503): RAM must treat unknown as still solving.
    status_fails: bool = False
    status_queries: dict[str, int] = field(default_factory=dict)

    def session_json(self, session: VendorSession) -> dict[str, Any]:
        body = session.body
        data: dict[str, Any] = {
            "id": session.id,
            "createdAt": _now(),
            "status": "released" if session.released else "live",
            "duration": 0,
            "eventCount": 0,
            "timeout": body.get("timeout", 300000),
            "creditsUsed": 0,
            "websocketUrl": session.browser.ws_url,
            "debugUrl": f"{self.origin}/v1/sessions/debug",
            "debuggerUrl": f"{self.origin}/v1/devtools/inspector.html",
            "sessionViewerUrl": self.origin,
            "dimensions": body.get("dimensions", {"width": 1920, "height": 1080}),
            "proxyBytesUsed": 0,
            "proxySource": None,
        }
        if self.cloud:
            data["solveCaptcha"] = bool(body.get("solveCaptcha", False))
        return data


@dataclass
class FakeBrowserbase(FakeVendor):
    project_id: str = "proj-test"
    signing_keys: dict[str, str] = field(default_factory=dict)

    def session_json(self, session: VendorSession, *, connect: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": session.id,
            "createdAt": _now(),
            "updatedAt": _now(),
            "startedAt": _now(),
            "expiresAt": _now(),
            "projectId": session.body.get("projectId", self.project_id),
            "keepAlive": bool(session.body.get("keepAlive", False)),
            "proxyBytes": 0,
            "region": session.body.get("region", "us-west-2"),
            "status": "COMPLETED" if session.released else "RUNNING",
        }
        if connect:
            key = self.signing_keys[session.id]
            data["connectUrl"] = f"{session.browser.ws_url}?signingKey={key}"
            data["seleniumRemoteUrl"] = f"{self.origin}/webdriver"
            data["signingKey"] = key
        return data


def _type_errors(body: Any, fields: dict[str, type | tuple[type, ...]]) -> list[str]:
    if not isinstance(body, dict):
        return ["body must be an object"]
    wrong = []
    for name, kind in fields.items():
        value = body.get(name)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            wrong.append(name)
    return wrong


def _handler(vendor: FakeSteel | FakeBrowserbase) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def _json(self, data: Any, status: int = 200) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return "<not json>"

        def _authorised(self) -> bool:
            header = "steel-api-key" if isinstance(vendor, FakeSteel) else "X-BB-API-Key"
            if isinstance(vendor, FakeSteel) and not vendor.cloud:
                return True  # a self-hosted steel-browser takes no key
            supplied = self.headers.get(header, "")
            if not any(secrets.compare_digest(supplied, key) for key in {vendor.api_key, *vendor.other_keys}):
                self._json({"statusCode": 401, "error": "Unauthorized", "message": "Invalid API key"}, 401)
                return False
            return True

        def _record(self, body: Any) -> None:
            vendor.requests.append((self.command, self.path, dict(self.headers.items()), body))

        def do_GET(self) -> None:  # noqa: N802
            self._record(None)
            if not self._authorised():
                return
            parts = self.path.split("?")[0].strip("/").split("/")
            if isinstance(vendor, FakeSteel) and len(parts) == 5 and parts[:2] == ["v1", "sessions"] and parts[3:] == ["captchas", "status"]:
                session = vendor.sessions.get(parts[2])
                if not vendor.cloud or session is None:
                    self._json({"message": "Not Found"}, 404)
                    return
                vendor.status_queries[session.id] = vendor.status_queries.get(session.id, 0) + 1
                if vendor.status_fails:
                    self._json({"message": "Service Unavailable"}, 503)
                    return
                solving = vendor.solving(session.id)
                self._json([{"pageId": "page-1", "url": "", "isSolvingCaptcha": solving, "tasks": [], "created": 0, "lastUpdated": 0}])
            elif len(parts) == 3 and parts[:2] == ["v1", "sessions"] and parts[2] in vendor.sessions:
                self._json(vendor.session_json(vendor.sessions[parts[2]]))
            else:
                self._json({"message": "Not Found"}, 404)

        def do_POST(self) -> None:  # noqa: N802
            body = self._body()
            self._record(body)
            if not self._authorised():
                return
            parts = self.path.split("?")[0].strip("/").split("/")
            if parts == ["v1", "sessions"]:
                self._create(body)
            elif isinstance(vendor, FakeSteel) and len(parts) == 4 and parts[:2] == ["v1", "sessions"] and parts[3] == "release":
                if vendor.release(parts[2]):
                    self._json({"success": True, "message": "Session released"})
                else:
                    self._json({"message": "Session not found"}, 404)
            elif isinstance(vendor, FakeBrowserbase) and len(parts) == 3 and parts[:2] == ["v1", "sessions"]:
                if not isinstance(body, dict) or body.get("status") != "REQUEST_RELEASE":
                    self._json({"error": "status must be REQUEST_RELEASE"}, 400)
                elif not vendor.release(parts[2]):
                    self._json({"error": "Session not found"}, 404)
                else:
                    self._json(vendor.session_json(vendor.sessions[parts[2]]))
            else:
                self._json({"message": "Not Found"}, 404)

        def _create(self, body: Any) -> None:
            body = {} if body is None else body
            if isinstance(vendor, FakeSteel):
                wrong = _type_errors(body, {"solveCaptcha": bool, "timeout": int, "dimensions": dict})
            else:
                wrong = _type_errors(body, {"projectId": str, "browserSettings": dict, "timeout": int, "keepAlive": bool})
                if not wrong and isinstance(body.get("browserSettings"), dict):
                    wrong = _type_errors(body["browserSettings"], {"solveCaptchas": bool, "viewport": dict})
            if wrong:
                self._json({"message": f"invalid fields: {wrong}"}, 400)
                return
            session = vendor.start_session(body)
            if isinstance(vendor, FakeSteel):
                self._json(vendor.session_json(session))
            else:
                vendor.signing_keys[session.id] = secrets.token_urlsafe(24)
                self._json(vendor.session_json(session, connect=True), 201)

    return Handler


@contextlib.contextmanager
def _serve[V: (FakeSteel, FakeBrowserbase)](vendor: V) -> Iterator[V]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(vendor))
    server.daemon_threads = True
    vendor.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield vendor
    finally:
        server.shutdown()
        server.server_close()
        vendor.close()


def serve_steel(*, api_key: str = "steel-test-key", cloud: bool = True) -> contextlib.AbstractContextManager[FakeSteel]:
    return _serve(FakeSteel(api_key=api_key, cloud=cloud))


def serve_browserbase(*, api_key: str = "bb-test-key") -> contextlib.AbstractContextManager[FakeBrowserbase]:
    return _serve(FakeBrowserbase(api_key=api_key))
