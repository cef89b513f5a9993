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
``/echo`` echoes a typed value as text (see ``ECHO``). ``/shadow`` has the same layout with the secret fields inside shadow roots (see ``SHADOW``).
``/framed`` shows ``/toggle`` (or ``/held``, ``/framed?held``; ``/echo``, ``/framed?echo``) of another site (``away``: another
loopback address, so Chromium runs it in a process of its own) in an iframe at the top left
corner, at the same pixels.
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

# Echoes, laid out for pixel comparisons: the page copies what is typed into ``#u`` into
# ``#echo`` ("Signing in as …", top 40), a span that is the value alone (``#copy``, top 120),
# a paragraph inside an open shadow root (top 280) and a read-only field (``#shown``, top 360,
# not a secret field); ``#plain`` (top 200) is text that holds no secret, and ``#ref`` (top 440)
# the page's own masked rendering of a line of ``#echo``'s length. ``show(v)`` writes them all.
LINE = "position:absolute;left:40px;margin:0;font:22px monospace;white-space:pre;height:30px"
ECHO = f"""<!doctype html><title>Echo</title>
<style>body{{margin:0}} p, span{{{LINE}}} input{{{FIELD}}}</style>
<p id=echo style="top:40px"></p><span id=copy style="top:120px"></span>
<p id=plain style="top:200px">This line holds nothing secret</p>
<div id=host style="position:absolute;left:0;top:280px;width:700px;height:40px"></div>
<input id=shown readonly style="top:360px">
<p id=ref style="top:440px;-webkit-text-security:disc"></p>
<input id=u name=username style="top:520px" oninput="show(this.value)">
<script>
const root = host.attachShadow({{mode: 'open'}});
root.innerHTML = '<style>p{{{LINE}}}</style><p id=inner style="top:0"></p>';
window.show = (v) => {{ echo.textContent = v ? 'Signing in as ' + v : ''; copy.textContent = v;
  root.getElementById('inner').textContent = v ? 'Hello ' + v : ''; shown.value = v;
  ref.textContent = v ? 'Signing in as ' + 'x'.repeat(v.length) : ''; }};
</script>"""

# A one-time-code field that already holds a value: the page holds a secret from its first render.
HELD = """<!doctype html><title>Code</title><table><tr><td>Code:</td>
<td><input id=code autocomplete=one-time-code value=123456></td></tr></table>"""


# The secret fields inside shadow roots, at /toggle's pixels: ``sp`` (top 40) in an open root,
# ``otp`` (top 120) a one-time-code field in an open root nested in another, ``ref-masked`` (200)
# and ``ref-clear`` (280) in the light DOM, ``cp`` (top 360) in a closed root, ``lp`` (top 440) in
# an open root attached later to an element already in the document (``attachLate()``), with
# its own show-password button at (500, 440). The
# page's own functions: ``fillAll(v)`` sets every field (and the references) to ``v``, as a
# person's typing or the site's script would (``fillClosed(v)`` only ``cp``, and focuses it), ``types()`` tells the
# secret fields' types, ``showAll()`` toggles every secret field to ``type=text``, ``cloneAll()``
# replaces ``sp`` with a ``type=text`` clone.
SHADOW = f"""<!doctype html><title>Shadow</title>
<style>body{{margin:0}} input{{{FIELD}}}</style>
<div id=open1></div><div id=outer></div>
<input id=ref-masked type=password style="top:200px"><input id=ref-clear type=text style="top:280px">
<div id=closed1></div><div id=late></div>
<script>
const css = '<style>input{{{FIELD}}}</style>';
const r1 = open1.attachShadow({{mode: 'open'}});
r1.innerHTML = css + '<input id=sp type=password name=pw style="top:40px">';
const r2 = outer.attachShadow({{mode: 'open'}});
r2.innerHTML = '<div id=inner></div>';
const r3 = r2.getElementById('inner').attachShadow({{mode: 'open'}});
r3.innerHTML = css + '<input id=otp autocomplete=one-time-code style="top:120px">';
const rc = closed1.attachShadow({{mode: 'closed'}});
rc.innerHTML = css + '<input id=cp type=password style="top:360px">';
let rl = null;
window.attachLate = () => {{ rl = late.attachShadow({{mode: 'open'}});
  rl.innerHTML = css + '<input id=lp type=password style="top:440px"><button id=lshow type=button ' +
    'style="position:absolute;left:500px;top:440px;width:80px;height:40px" ' +
    'onclick="const f = this.getRootNode().getElementById(\\'lp\\'); f.type = \\'text\\'">Show</button>'; }};
const secrets = () => [r1.getElementById('sp'), r3.getElementById('otp'), rc.getElementById('cp'),
  ...(rl ? [rl.getElementById('lp')] : [])];
window.fillAll = (v) => {{ for (const f of [...secrets(), document.getElementById('ref-masked'),
  document.getElementById('ref-clear')]) f.value = v; }};
window.fillClosed = (v) => {{ rc.getElementById('cp').value = v; rc.getElementById('cp').focus(); }};
window.types = () => secrets().map((f) => f.type);
window.showAll = () => {{ for (const f of secrets()) f.type = 'text'; }};
window.cloneAll = () => {{ const p = r1.getElementById('sp'); const c = document.createElement('input');
  c.type = 'text'; c.name = 'pw'; c.id = 'sp'; c.style.cssText = p.style.cssText; c.value = p.value; p.replaceWith(c); }};
</script>"""


@dataclass
class HostileSite:
    origin: str = ""
    away: str = ""


def _handler(site: HostileSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802
            path, _, query = self.path.partition("?")
            inner = {"held": "/held", "echo": "/echo"}.get(query, "/toggle")
            framed = (
                f'<!doctype html><title>Framed</title><style>body{{margin:0}}</style><iframe src="{site.away}{inner}" '
                'style="position:absolute;left:0;top:0;width:700px;height:520px;border:0"></iframe>'
            )
            pages = {
                "/login": LOGIN,
                "/toggle": TOGGLE,
                "/blank": "<!doctype html><title>Blank</title>",
                "/held": HELD,
                "/shadow": SHADOW,
                "/framed": framed,
                "/encode": ENCODE,
                "/echo": ECHO,
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
    """The pages on 127.0.0.1, and on 127.0.0.2 as another site (``away``: another address is
    another site to Chromium, whose site isolation then runs its frames in their own process)."""
    site = HostileSite()
    servers = [ThreadingHTTPServer((host, 0), _handler(site)) for host in ("127.0.0.1", "127.0.0.2")]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    site.origin = f"http://127.0.0.1:{servers[0].server_address[1]}"
    site.away = f"http://127.0.0.2:{servers[1].server_address[1]}"
    try:
        yield site
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
