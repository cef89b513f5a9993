"""Login pages built to leak what is typed into them, served on a loopback port.

Each one is a way a page's structure turns a field's value into something a selector, a
text read or a picture can see: a table-row login (the row's accessible name includes the
inputs' values), ``aria-labelledby``/link/``role=button`` wrappers (likewise), a React-style
input that copies its value into its ``value`` attribute, a ``pattern``/``minlength`` field
(``:invalid``), a ``placeholder`` (``:placeholder-shown``), an echo span ("Signing in as …"),
and show-password toggles that swap ``type`` or replace the input with a clone.

``/login`` has every trap on one page (the secret fields: ``.user`` for the username,
``#p`` for the password). ``/toggle`` is laid out for pixel comparisons: ``#swap`` (a password
field whose ``type`` the ``#eye`` button toggles), ``#clone`` (one that ``#eye2`` replaces with a
``type=text`` clone), ``#ref-masked`` and ``#ref-clear`` (references the page fills itself).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOGIN = """<!doctype html><title>Sign in</title>
<style>body{margin:0;font:16px sans-serif} input{font-size:16px}</style>
<form id=f method=post action=/session onsubmit="event.preventDefault();
  document.getElementById('err').textContent='Wrong password'">
<table>
<tr><td>Username:</td><td><input class=user id=u name=username></td></tr>
<tr><td>Password:</td><td><input id=p type=password name=password></td></tr>
</table>
<button id=go aria-labelledby=wrap>Go</button><span id=wrap><input class=user id=lab name=labelled></span>
<a href=#x id=link><input class=user id=inlink name=inlink></a>
<div role=button id=rb><input class=user id=inrb name=inrb></div>
<input class=user id=react name=react oninput="this.setAttribute('value', this.value)">
<input class=user id=pat name=pat pattern="a.*" minlength=3 placeholder="your name">
<input class=user id=echoed name=echoed
  oninput="document.getElementById('echo').textContent='Signing in as ' + this.value;
    document.title = 'Sign in ' + this.value; history.replaceState(null, '', '?who=' + encodeURIComponent(this.value))">
<p id=echo></p><p id=err role=alert></p>
<button id=hello type=button onclick="alert('Hello ' + document.getElementById('u').value)">Hello</button>
<button id=eye type=button onclick="const p=document.getElementById('p');
  p.type = p.type === 'password' ? 'text' : 'password'">Show</button>
</form>"""

FIELD = "position:absolute;left:40px;width:400px;height:40px;font:22px monospace;padding:0 8px;border:1px solid #888"
TOGGLE = f"""<!doctype html><title>Toggle</title>
<style>body{{margin:0}} input{{{FIELD}}} button{{position:absolute;left:500px;width:80px;height:40px}}</style>
<input id=swap type=password name=pw style="top:40px">
<button id=eye type=button style="top:40px"
  onclick="const p=document.getElementById('swap'); p.type = p.type === 'password' ? 'text' : 'password'">Show</button>
<input id=clone type=password name=pw2 style="top:120px">
<button id=eye2 type=button style="top:120px" onclick="const p=document.querySelector('[name=pw2]');
  const c=document.createElement('input'); c.type='text'; c.name='pw2'; c.id='clone'; c.style.cssText=p.style.cssText;
  c.value=p.value; p.replaceWith(c)">Show</button>
<input id=ref-masked type=password style="top:200px">
<input id=ref-clear type=text style="top:280px">
<button id=refs type=button style="top:360px" onclick="for (const id of ['ref-masked', 'ref-clear'])
  document.getElementById(id).value = document.body.dataset.v">Refs</button>"""

# A page that writes a field's value back in its common encodings (base64, base64url, base64 of
# "user:" + value as in a Basic header, encodeURIComponent, form encoding, HTML entities as text).
ENCODE = """<!doctype html><title>Encode</title>
<input id=enc name=enc oninput="const v = this.value, b = btoa(v), basic = btoa('user:' + v);
  const form = new URLSearchParams({v}).toString().slice(2);
  document.getElementById('out').textContent = [b, b.replace(/[+]/g, '-').replace(/[/]/g, '_').replace(/=+$/, ''),
    basic, encodeURIComponent(v), form, v.replace(/&/g, '&amp;')].join(' ');
  document.title = 'Basic ' + basic; history.replaceState(null, '', '?f=' + form)">
<p id=out></p>"""

# A one-time-code field that already holds a value: the page holds a secret from its first render.
HELD = """<!doctype html><title>Code</title><table><tr><td>Code:</td>
<td><input id=code autocomplete=one-time-code value=123456></td></tr></table>"""


@dataclass
class HostileSite:
    origin: str = ""


def _handler() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            pages = {
                "/login": LOGIN,
                "/toggle": TOGGLE,
                "/blank": "<!doctype html><title>Blank</title>",
                "/held": HELD,
                "/encode": ENCODE,
            }
            body = pages.get(path, "<!doctype html><title>Not found</title>").encode()
            self.send_response(200 if path in pages else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def serve_hostile() -> Iterator[HostileSite]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HostileSite(origin=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
