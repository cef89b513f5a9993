"""The OAuth 2.0 client side of Connections: Google's authorization-code flow
with PKCE (S256) and ``state``, every endpoint and credential from settings.

Only protocol mechanics live here; the state transitions are in ``runs.services``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from django.conf import settings

from runs.errors import GoogleFailed, GoogleNotConfigured

# Plain words for each capability a run may request (unknown ones are shown as is).
CAPABILITY_WORDS = {
    "gmail.readonly": "Read your Gmail messages and settings",
    "gmail.send": "Send email as you from Gmail",
    "gmail.modify": "Read, change and label your Gmail messages",
    "calendar.readonly": "See your Google Calendar events",
    "calendar.events": "See and edit your Google Calendar events",
    "drive.readonly": "See and download your Google Drive files",
    "drive.file": "See and edit the Google Drive files this task creates or opens",
    "spreadsheets.readonly": "See your Google Sheets spreadsheets",
    "spreadsheets": "See and edit your Google Sheets spreadsheets",
    "contacts.readonly": "See your Google contacts",
}


def capability_words(capability: str) -> str:
    return CAPABILITY_WORDS.get(capability, f"Google permission {capability}")


def scope_of(capability: str) -> str:
    return f"{settings.RAM_GOOGLE_SCOPE_PREFIX}{capability}"


def callback_url() -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/connections/callback"


def authorization_origin() -> str:
    parts = urlsplit(settings.RAM_GOOGLE_AUTHORIZATION_URL)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class AuthorizationStart:
    url: str
    state: str = field(repr=False)
    code_verifier: str = field(repr=False)


def authorization_start(*, capabilities: list[str]) -> AuthorizationStart:
    """A fresh ``state`` and PKCE verifier, and the authorization URL that carries them."""
    if not settings.RAM_GOOGLE_CLIENT_ID:
        raise GoogleNotConfigured()
    state = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": settings.RAM_GOOGLE_CLIENT_ID,
            "redirect_uri": callback_url(),
            "scope": " ".join(scope_of(c) for c in capabilities),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "access_type": "offline",
            "prompt": "consent",
            "include_granted_scopes": "false",
        }
    )
    return AuthorizationStart(url=f"{settings.RAM_GOOGLE_AUTHORIZATION_URL}?{query}", state=state, code_verifier=verifier)


def code_exchange(*, code: str, code_verifier: str) -> dict[str, Any]:
    """Exchange the authorization code for tokens at the token endpoint."""
    try:
        response = httpx.post(
            settings.RAM_GOOGLE_TOKEN_URL,
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": callback_url(),
                "client_id": settings.RAM_GOOGLE_CLIENT_ID,
                "client_secret": settings.RAM_GOOGLE_CLIENT_SECRET,
                "code_verifier": code_verifier,
            },
            headers={"Accept": "application/json"},
            timeout=25,
        )
    except httpx.HTTPError:
        raise GoogleFailed("Google could not be reached to finish the authorization; try again.") from None
    if response.status_code != 200:
        raise GoogleFailed("Google refused to finish the authorization; start it again from Connections.")
    try:
        tokens = response.json()
    except ValueError:
        raise GoogleFailed("Google answered with something that is not a token; try again.") from None
    if not isinstance(tokens, dict) or not isinstance(tokens.get("access_token"), str):
        raise GoogleFailed("Google answered without an access token; try again.")
    return tokens
