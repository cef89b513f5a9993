"""A local web site with files to download and a form to upload one, on a loopback port.

- ``/files`` links: ``/files/report.csv`` (an attachment), ``/files/big.bin`` (``big_bytes``
  long) and ``/files/slow.bin`` (a few bytes, then it waits until ``release`` is set);
- ``/upload`` a file input and a Send button: the page's own script reads the chosen file
  and posts its bytes to ``POST /upload?name=…``, which keeps them (``received``) and
  answers their SHA-256, shown on the page.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPORT = b"invoice,amount\nINV-1,120.50\nINV-2,80.00\n"

FILES = """<!doctype html><title>Files</title><body style="font:20px sans-serif">
<a id=report href=/files/report.csv>Monthly report</a><br>
<a id=big href=/files/big.bin download>Big file</a><br>
<a id=slow href=/files/slow.bin download>Slow file</a>"""

UPLOAD = """<!doctype html><title>Upload</title><body style="font:20px sans-serif">
<input id=doc type=file><button id=send>Send</button><p id=received>Nothing sent</p>
<script>document.getElementById("send").onclick = async () => {
  const file = document.getElementById("doc").files[0];
  const answer = await fetch("/upload?name=" + encodeURIComponent(file.name),
    {method: "POST", body: file, headers: {"Content-Type": file.type || "application/octet-stream"}});
  document.getElementById("received").textContent = "Received " + file.name + " " + await answer.text();
};</script>"""


@dataclass
class FilesSite:
    origin: str = ""
    big_bytes: int = 4096
    received: list[tuple[str, str, bytes]] = field(default_factory=list)  # name, content type, bytes
    release: threading.Event = field(default_factory=threading.Event)


def _handler(site: FilesSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            path = urlsplit(self.path).path
            if path == "/files":
                self._send(FILES.encode(), "text/html; charset=utf-8")
            elif path == "/upload":
                self._send(UPLOAD.encode(), "text/html; charset=utf-8")
            elif path == "/files/report.csv":
                self._send(REPORT, "text/csv", {"Content-Disposition": 'attachment; filename="report-2026-11.csv"'})
            elif path == "/files/big.bin":
                self._send(b"x" * site.big_bytes, "application/octet-stream")
            elif path == "/files/slow.bin":
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", "2000000")
                self.end_headers()
                self.wfile.write(b"y" * 1000)
                self.wfile.flush()
                site.release.wait(30)
            else:
                self._send(b"<title>Not found</title>", "text/html")

        def do_POST(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            name = parse_qs(parts.query).get("name", [""])[0]
            site.received.append((name, self.headers.get("Content-Type", ""), data))
            self._send(hashlib.sha256(data).hexdigest().encode(), "text/plain")

    return Handler


@contextmanager
def serve_files_site() -> Iterator[FilesSite]:
    site = FilesSite()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.release.set()
        server.shutdown()
        server.server_close()
