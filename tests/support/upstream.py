"""Loopback servers for a computer's settings: a page that echoes what the browser says about
itself, and an upstream HTTP proxy (``CONNECT`` only) that records every tunnel it opened and
the credentials it was given."""

from __future__ import annotations

import base64
import contextlib
import json
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import StreamRequestHandler, ThreadingTCPServer
from typing import Any

ECHO_PAGE = """<!doctype html><title>echo</title><pre id="out"></pre><script>
document.getElementById("out").textContent = JSON.stringify({
  language: navigator.language,
  languages: navigator.languages,
  time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  user_agent: navigator.userAgent,
  width: window.innerWidth,
  height: window.innerHeight,
  headers: HEADERS
});
</script>"""


@dataclass
class Echo:
    origin: str = ""
    requests: list[dict[str, str]] = field(default_factory=list)


def _echo_handler(echo: Echo) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            headers = {
                "user_agent": self.headers.get("User-Agent", ""),
                "accept_language": self.headers.get("Accept-Language", ""),
            }
            echo.requests.append({"path": self.path, **headers})
            body = ECHO_PAGE.replace("HEADERS", json.dumps(headers)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


@contextlib.contextmanager
def serve_echo() -> Iterator[Echo]:
    echo = Echo()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _echo_handler(echo))
    server.daemon_threads = True
    echo.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield echo
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class UpstreamProxy:
    """What the proxy saw: each ``CONNECT`` target with the user it authenticated (or refused)."""

    address: str = ""
    username: str = ""
    password: str = ""
    tunnels: list[dict[str, str]] = field(default_factory=list)

    @property
    def server(self) -> str:
        return f"http://{self.address}"

    def targets(self) -> list[str]:
        return [t["target"] for t in self.tunnels if t["outcome"] == "tunnel"]


def _proxy_handler(proxy: UpstreamProxy) -> type[StreamRequestHandler]:
    class Handler(StreamRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, target, _ = (lines[0].split(" ") + ["", "", ""])[:3]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            given = headers.get("proxy-authorization", "")
            expected = "Basic " + base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
            if method != "CONNECT":
                proxy.tunnels.append({"target": target, "outcome": "not CONNECT"})
                self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            if proxy.username and given != expected:
                proxy.tunnels.append({"target": target, "outcome": "refused"})
                self.request.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n"
                )
                return
            host, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
            except OSError:
                proxy.tunnels.append({"target": target, "outcome": "unreachable"})
                self.request.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            proxy.tunnels.append({"target": target, "outcome": "tunnel"})
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self._splice(self.request, upstream)

        @staticmethod
        def _splice(a: socket.socket, b: socket.socket) -> None:
            with b:
                while True:
                    ready, _, _ = select.select([a, b], [], [], 30)
                    if not ready:
                        return
                    for sock in ready:
                        data = sock.recv(65536)
                        if not data:
                            return
                        (b if sock is a else a).sendall(data)

    return Handler


@contextlib.contextmanager
def serve_upstream_proxy(*, username: str = "", password: str = "") -> Iterator[UpstreamProxy]:
    proxy = UpstreamProxy(username=username, password=password)
    ThreadingTCPServer.allow_reuse_address = True
    server = ThreadingTCPServer(("127.0.0.1", 0), _proxy_handler(proxy))
    server.daemon_threads = True
    proxy.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
