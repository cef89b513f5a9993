"""A standards-compliant OAuth 2.0 authorization server for tests, built on
Authlib's ``AuthorizationServer`` (authorization-code grant with PKCE
required), served over HTTP on a loopback port by wsgiref in a thread.

It plays Google's part: a consent page with Allow and Deny, and a token
endpoint accepting ``client_secret_post``.
"""

from __future__ import annotations

import html
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

# Loopback HTTP in tests; Authlib otherwise insists on https.
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")

from authlib.oauth2 import AuthorizationServer, OAuth2Request  # noqa: E402
from authlib.oauth2.rfc6749 import ClientMixin, grants  # noqa: E402
from authlib.oauth2.rfc6749.errors import OAuth2Error  # noqa: E402
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload  # noqa: E402
from authlib.oauth2.rfc6750 import BearerTokenGenerator  # noqa: E402
from authlib.oauth2.rfc7636 import CodeChallenge  # noqa: E402


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str
    redirect_uri: str

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_allowed_scope(self, scope: str) -> str:
        return scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri == self.redirect_uri

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return endpoint != "token" or method == "client_secret_post"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class AuthorizationCode:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None
    used: bool = False

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class Request(OAuth2Request):  # type: ignore[misc]
    def __init__(self, environ: dict[str, Any]) -> None:
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        body = b""
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
        form = dict(parse_qsl(body.decode(), keep_blank_values=True))
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        uri = f"http://{environ['HTTP_HOST']}{environ.get('PATH_INFO', '')}"
        if environ.get("QUERY_STRING"):
            uri += "?" + environ["QUERY_STRING"]
        super().__init__(environ["REQUEST_METHOD"], uri, headers=headers)
        self._args, self._form = query, form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


@dataclass
class Record:
    """What the server saw, for assertions."""

    token_requests: list[dict[str, str]] = field(default_factory=list)
    issued: list[dict[str, Any]] = field(default_factory=list)


class LocalAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, client: Client, record: Record) -> None:
        super().__init__()
        self.client = client
        self.record = record
        self.codes: dict[str, AuthorizationCode] = {}
        server = self

        class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_post"]

            def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
                payload = request.payload
                server.codes[code] = AuthorizationCode(
                    code=code,
                    client_id=payload.client_id,
                    redirect_uri=payload.redirect_uri,
                    scope=payload.scope,
                    user=request.user,
                    code_challenge=payload.data.get("code_challenge"),
                    code_challenge_method=payload.data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code: str, client: Client) -> AuthorizationCode | None:
                found = server.codes.get(code)
                if found and found.client_id == client.client_id and not found.used:
                    return found
                return None

            def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
                authorization_code.used = True

            def authenticate_user(self, authorization_code: AuthorizationCode) -> str:
                return authorization_code.user

        self.register_grant(CodeGrant, [CodeChallenge(required=True)])
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=lambda **_: "at-" + secrets.token_urlsafe(16),
                refresh_token_generator=lambda **_: "rt-" + secrets.token_urlsafe(16),
            ),
        )

    def query_client(self, client_id: str) -> Client | None:
        return self.client if client_id == self.client.client_id else None

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        self.record.issued.append(dict(token))

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request if isinstance(request, OAuth2Request) else Request(request)

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> tuple[int, bytes, list]:
        data = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
        if isinstance(data, str):
            data = data.encode()
        return status, data, list(headers)

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None


_CONSENT = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in - Local Google</title></head>
<body><h1>Local authorization server</h1><p>RAM asks for: {scopes}</p>
<form method="post" action="/authorize">{fields}<button name="decision" value="allow" id="allow">Allow</button>
<button name="decision" value="deny" id="deny">Deny</button></form></body></html>"""


@dataclass
class OAuthServer:
    origin: str
    client_id: str
    client_secret: str
    record: Record

    @property
    def authorization_url(self) -> str:
        return f"{self.origin}/authorize"

    @property
    def token_url(self) -> str:
        return f"{self.origin}/token"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def serve_oauth(redirect_uri: str) -> Iterator[OAuthServer]:
    client = Client(client_id="ram-test-client", client_secret=secrets.token_urlsafe(24), redirect_uri=redirect_uri)
    record = Record()
    authz = LocalAuthorizationServer(client, record)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        request = Request(environ)
        path = environ.get("PATH_INFO", "")
        if path == "/authorize" and environ["REQUEST_METHOD"] == "GET":
            try:
                grant = authz.get_consent_grant(request, end_user="local-user")
            except OAuth2Error as error:
                status, body, headers = authz.handle_error_response(request, error)
            else:
                fields = "".join(
                    f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                    for k, v in request.args.items()
                )
                page = _CONSENT.format(scopes=html.escape(grant.request.payload.scope or ""), fields=fields)
                status, body, headers = 200, page.encode(), [("Content-Type", "text/html; charset=utf-8")]
        elif path == "/authorize" and environ["REQUEST_METHOD"] == "POST":
            allow = request.form.get("decision") == "allow"
            grant = authz.get_consent_grant(request, end_user="local-user")
            status, body, headers = authz.create_authorization_response(
                request, grant_user="local-user" if allow else None, grant=grant
            )
        elif path == "/token" and environ["REQUEST_METHOD"] == "POST":
            record.token_requests.append(dict(request.form))
            status, body, headers = authz.create_token_response(request)
        else:
            status, body, headers = 404, b"not found", [("Content-Type", "text/plain")]
        start_response(f"{status} {'OK' if status < 400 else 'Error'}", headers)
        return [body]

    httpd: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield OAuthServer(f"http://127.0.0.1:{httpd.server_port}", client.client_id, client.client_secret, record)
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
        httpd.server_close()
        time.sleep(0)
