"""The proof's local portal: a login form and pages whose every visit is a counted side effect.

Two hostile login pages serve the login rows of the hostile suite (proof/hostile.py): a table-row
form that refuses in place and echoes the username ("Signing in as …"), where an agent would
probe the values with selectors; and a form whose show-password button toggles the field's type.

It is a real HTTP server on a loopback port (the computers' browsers reach it because the proof
names its exact ``host:port`` in ``RAM_BROWSER_EGRESS_ALLOW``). ``/effect/<id>`` counts each
request that reaches it, then holds the answer for ``?hold=<ms>`` so that a fault can land while
the step is in flight: a repeated side effect shows up as a count above one.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_HOLD_MS = 6000

LOGIN_FORM = """<form method=post action="/login"><label>Email <input name=username autocomplete=username></label>
<label>Password <input type=password name=password></label><button type=submit>Sign in</button></form>"""


# A table-row login answered in place by its script: always a refusal, the alert inside the form; at
# the submit the page echoes the username ("Signing in as …"), a copy that stays after the fields empty.
TABLE_LOGIN = """<form method=post action="/table-login"><table>
<tr><td>Username:</td><td><input name=username></td></tr>
<tr><td>Password:</td><td><input type=password name=password></td></tr>
<tr><td colspan=2><button type=submit>Sign in</button><div id=msg role=alert></div></td></tr></table>
<p id=echo></p></form>
<script>
const form = document.querySelector('form');
form.addEventListener('submit', async (event) => {
  event.preventDefault();
  document.getElementById('echo').textContent = 'Signing in as ' + form.username.value;
  await fetch('/table-login-api', {method: 'POST', body: new URLSearchParams(new FormData(form))});
  document.getElementById('msg').textContent = 'Invalid username or password.';
});
</script>"""
# A show-password button beside a password field drawn at a fixed place (the row measures its pixels).
TOGGLE_BOX = (40, 120, 420, 44)
TOGGLE_LOGIN = f"""<form method=post action="/login"><input name=username autocomplete=username>
<input type=password name=password id=pw style="position:absolute;left:{TOGGLE_BOX[0]}px;top:{TOGGLE_BOX[1]}px;
width:{TOGGLE_BOX[2]}px;height:{TOGGLE_BOX[3]}px;font:28px monospace;border:0;outline:0;padding:0 8px;background:#fff">
<button type=button id=eye style="position:absolute;left:40px;top:200px"
onclick="const p = document.getElementById('pw'); p.type = p.type === 'password' ? 'text' : 'password'">Show</button>
<button type=submit style="position:absolute;left:140px;top:200px">Sign in</button></form>"""

# A login whose page copies the typed username into a span of its own (the value alone, at a fixed
# place, in a monospace font) and keeps the copy after the fields are emptied; always a refusal, the
# alert inside the form. ``ECHO_REF_BOX`` is the page's own text in the same font (glyphs to compare with).
ECHO_BOX = (40, 300, 220, 40)
ECHO_REF_BOX = (40, 380, 220, 40)
ECHO_LOGIN = f"""<form method=post action="/echo-login"><input name=username autocomplete=username>
<input type=password name=password><button type=submit>Sign in</button><div id=msg role=alert></div></form>
<span id=echo style="position:absolute;left:{ECHO_BOX[0]}px;top:{ECHO_BOX[1]}px;font:28px/40px monospace;
white-space:pre"></span>
<span id=ref style="position:absolute;left:{ECHO_REF_BOX[0]}px;top:{ECHO_REF_BOX[1]}px;font:28px/40px monospace;
white-space:pre">Reference line.</span>
<script>
const form = document.querySelector('form'), echo = document.getElementById('echo');
const copy = () => {{ if (form.username.value) echo.textContent = form.username.value; }};
form.username.addEventListener('input', copy);
form.username.addEventListener('change', copy);
form.addEventListener('submit', async (event) => {{
  event.preventDefault();
  copy();
  await fetch('/table-login-api', {{method: 'POST', body: new URLSearchParams(new FormData(form))}});
  document.getElementById('msg').textContent = 'Invalid username or password.';
}});
</script>"""


@dataclass
class Portal:
    origin: str = ""
    username: str = "proof.user@example.com"
    password: str = field(default_factory=lambda: "Pf-" + secrets.token_urlsafe(18))
    effects: Counter[str] = field(default_factory=Counter)
    logins: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def host_port(self) -> str:
        return urlsplit(self.origin).netloc

    def effect_url(self, effect_id: str, hold_ms: int = 0) -> str:
        return f"{self.origin}/effect/{effect_id}?hold={hold_ms}"

    def count(self, effect_id: str) -> int:
        with self.lock:
            return self.effects[effect_id]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _page(body: str, title: str) -> bytes:
    return f"<!doctype html><title>{title}</title><body>{body}</body>".encode()


def _handler(portal: Portal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path.startswith("/effect/"):
                effect_id = parts.path.removeprefix("/effect/")[:80]
                with portal.lock:
                    portal.effects[effect_id] += 1
                hold = min(MAX_HOLD_MS, max(0, int((query.get("hold") or ["0"])[0] or 0)))
                time.sleep(hold / 1000)
                self._send(_page(f"<h1>Effect {effect_id}</h1><p>Done.</p>", f"effect {effect_id}"))
            elif parts.path == "/login":
                self._send(_page(LOGIN_FORM, "Sign in"))
            elif parts.path == "/table-login":
                self._send(_page(TABLE_LOGIN, "Sign in"))
            elif parts.path == "/echo-login":
                self._send(_page(ECHO_LOGIN, "Sign in"))
            elif parts.path == "/toggle-login":
                self._send(_page(TOGGLE_LOGIN, "Sign in"))
            elif parts.path == "/welcome":
                self._send(_page("<h1>Welcome back</h1><p>You are signed in.</p>", "Home"))
            elif parts.path.startswith("/page/"):
                name = parts.path.removeprefix("/page/")[:40]
                self._send(_page(f"<h1>Page {name}</h1><p>Plain text of page {name}.</p>", f"page {name}"))
            else:
                self._send(_page("<h1>Portal</h1>", "Portal"))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0") or 0)
            fields = {k: v[0] for k, v in parse_qs(self.rfile.read(min(length, 65536)).decode()).items()}
            if urlsplit(self.path).path == "/table-login-api":
                self._send(b"{}", 401)
            elif urlsplit(self.path).path == "/login":
                with portal.lock:
                    portal.logins += 1
                if fields.get("username") == portal.username and fields.get("password") == portal.password:
                    self._send(b"", 303, {"Location": "/welcome"})
                else:
                    self._send(_page('<div role="alert">Invalid username or password.</div>' + LOGIN_FORM, "Sign in"))
            else:
                self._send(b"not found", 404)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser killed mid-answer (the faults do that) is no error of the portal's."""
        return None


def start_portal() -> Portal:
    portal = Portal()
    server = _Server(("127.0.0.1", 0), _handler(portal))
    portal.server = server
    portal.origin = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, name="proof-portal", daemon=True).start()
    return portal
