"""A small local web site a computer lives in during tests, on a loopback port.

- ``/`` a portal: a sign-in form (``POST /login`` sets a session cookie, no expiry) and,
  once signed in, "Signed in as NAME"; a "Connect" button that opens an OAuth-style
  popup (``window.open``) and a ``target=_blank`` link;
- ``/oauth/authorize`` the popup's form; ``POST /oauth/approve`` answers a page that
  hands the code to its opener (``postMessage``) and closes itself;
- ``/docs`` a plain page (opened in a new tab);
- ``/dialogs`` buttons that open an ``alert``, a ``confirm`` and a ``prompt`` and write the
  answer on the page, and a form that asks ``beforeunload`` before the page is left;
- ``/staging`` behind HTTP basic auth (realm "Staging area"): 401 with ``WWW-Authenticate:
  Basic`` until a request carries one of ``basic_users`` in its ``Authorization`` header; every
  ``Authorization`` header it receives is kept in ``authorizations``.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

PORTAL_SIGNED_OUT = """<!doctype html><title>Portal</title>
<style>body{margin:0;font:20px sans-serif} input,button{position:absolute;font-size:22px;width:300px;height:40px}</style>
<h1 style="margin:20px">Portal sign-in</h1>
<form method=post action=/login><input id=name name=name style="left:40px;top:120px" autocomplete=off>
<button id=sign-in style="left:40px;top:200px">Sign in</button></form>"""

PORTAL_SIGNED_IN = """<!doctype html><title>Portal home</title>
<style>body{{margin:0;font:20px sans-serif}} button,a{{position:absolute;font-size:22px;width:300px;height:50px}}</style>
<h1 id=who style="margin:20px">Signed in as {name}</h1>
<button id=connect style="left:40px;top:150px" onclick="window.open('/oauth/authorize', 'oauth', 'width=600,height=500')">Connect</button>
<a id=docs href=/docs target=_blank style="left:40px;top:250px">Documentation</a>
<p id=connected style="position:absolute;left:40px;top:330px;margin:0">Not connected</p>
<script>window.addEventListener("message", (e) => {{
  if (e.origin === location.origin && e.data && e.data.code) document.getElementById("connected").textContent = "Connected as " + e.data.user;
}});</script>"""

AUTHORIZE = """<!doctype html><title>Authorize Portal</title>
<style>body{margin:0;font:20px sans-serif} input,button{position:absolute;font-size:22px;width:300px;height:40px}</style>
<h1 style="margin:20px">Allow Portal to use your account?</h1>
<form method=post action=/oauth/approve><input id=user name=user style="left:40px;top:120px" autocomplete=off>
<button id=allow style="left:40px;top:200px">Allow</button></form>"""

APPROVED = """<!doctype html><title>Done</title><p>Done.</p>
<script>window.opener.postMessage({{code: "{code}", user: {user}}}, location.origin); setTimeout(() => window.close(), 300);</script>"""

DOCS = "<!doctype html><title>Documentation</title><h1>Documentation</h1>"

STAGING = "<!doctype html><title>Staging</title><h1 id=who>Staging, signed in as {name}</h1>"
STAGING_REFUSED = "<!doctype html><title>Sign-in required</title><h1 id=refused>401: sign-in required</h1>"
STAGING_REALM = "Staging area"

DIALOGS = """<!doctype html><title>Dialogs</title>
<style>body{margin:0;font:20px sans-serif} button,a{position:absolute;font-size:22px;width:300px;height:50px}</style>
<button id=alert style="left:40px;top:40px" onclick="alert('Your session ends soon.'); answer.textContent = 'alert closed'">Alert</button>
<button id=confirm style="left:40px;top:110px" onclick="answer.textContent = confirm('Delete the draft?') ? 'confirmed' : 'cancelled'">Confirm</button>
<button id=prompt style="left:40px;top:180px" onclick="const v = prompt('Your name?', 'guest'); answer.textContent = v === null ? 'no name' : 'name: ' + v">Prompt</button>
<button id=edit style="left:40px;top:250px" onclick="window.onbeforeunload = (e) => { e.preventDefault(); return ''; }; answer.textContent = 'editing'">Edit</button>
<a id=leave href=/docs style="left:40px;top:320px">Leave</a>
<p id=answer style="position:absolute;left:40px;top:400px;margin:0">no answer</p>"""


@dataclass
class Site:
    origin: str = ""
    sessions: dict[str, str] = field(default_factory=dict)
    approvals: list[str] = field(default_factory=list)
    # Who may sign in to /staging (username: password), and every Authorization header it received.
    basic_users: dict[str, str] = field(default_factory=dict)
    authorizations: list[str] = field(default_factory=list)


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, body: str, status: int = 200, headers: dict[str, str] | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _form(self) -> dict[str, str]:
            length = int(self.headers.get("Content-Length") or 0)
            fields = parse_qs(self.rfile.read(length).decode())
            return {k: v[0] for k, v in fields.items()}

        def _user(self) -> str | None:
            for part in (self.headers.get("Cookie") or "").split(";"):
                name, _, value = part.strip().partition("=")
                if name == "sid" and value in site.sessions:
                    return site.sessions[value]
            return None

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            if path == "/":
                user = self._user()
                if user is None:
                    self._send(PORTAL_SIGNED_OUT)
                else:
                    self._send(PORTAL_SIGNED_IN.format(name=html.escape(user)))
            elif path == "/oauth/authorize":
                self._send(AUTHORIZE)
            elif path == "/docs":
                self._send(DOCS)
            elif path == "/dialogs":
                self._send(DIALOGS)
            elif path == "/staging":
                self._staging()
            else:
                self._send("<title>Not found</title>", 404)

        def _staging(self) -> None:
            header = self.headers.get("Authorization")
            if header is not None:
                site.authorizations.append(header)
            scheme, _, encoded = (header or "").partition(" ")
            try:
                username, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                username = password = ""
            if scheme == "Basic" and username in site.basic_users and site.basic_users[username] == password:
                self._send(STAGING.format(name=html.escape(username)))
                return
            challenge = f'Basic realm="{STAGING_REALM}", charset="UTF-8"'
            self._send(STAGING_REFUSED, 401, {"WWW-Authenticate": challenge})

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            fields = self._form()
            if path == "/login":
                sid = secrets.token_urlsafe(16)
                site.sessions[sid] = fields.get("name", "")
                # A session cookie (no Expires/Max-Age): browsers drop it at exit unless kept.
                self._send("", 303, {"Location": "/", "Set-Cookie": f"sid={sid}; Path=/; HttpOnly; SameSite=Lax"})
            elif path == "/oauth/approve":
                user = fields.get("user", "")
                site.approvals.append(user)
                code = secrets.token_urlsafe(8)
                self._send(APPROVED.format(code=code, user=_js_string(user)))
            else:
                self._send("<title>Not found</title>", 404)

    return Handler


def _js_string(value: str) -> str:
    return json.dumps(value).replace("<", "\\u003c")


@contextmanager
def serve_site() -> Iterator[Site]:
    site = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
