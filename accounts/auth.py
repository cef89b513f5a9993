"""Who is calling: API keys behind ``Authorization: Bearer`` and how a web
session was signed in. The REST routes (``core.api``), the MCP endpoint and
the visual gateway all authenticate here, so every interface refuses the same
keys the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.http import HttpRequest

from accounts.errors import AccountInactive, KeyInvalid, KeyKindRefused, KeyMissing
from accounts.models import ApiKey
from accounts.services import api_key_authenticate

_BEARER = re.compile(r"^Bearer ([A-Za-z0-9_-]{16,200})$")


def authenticate_bearer(authorization: str, kinds: Iterable[str]) -> ApiKey:
    """The live key behind a raw ``Authorization`` header value; 401-type errors without one, 403 if its kind is not allowed."""
    match = _BEARER.match(authorization)
    if not match:
        raise KeyMissing()
    key = api_key_authenticate(raw_key=match.group(1))
    if key is None:
        raise KeyInvalid()
    if not key.account.is_active:
        raise AccountInactive()
    if key.kind not in kinds:
        raise KeyKindRefused(f"A {key.kind} key cannot use this endpoint.")
    return key


def authenticate_key(request: HttpRequest, kinds: Iterable[str]) -> ApiKey:
    """The API key behind ``Authorization: Bearer`` of a Django request."""
    return authenticate_bearer(request.headers.get("Authorization", ""), kinds)


@dataclass(frozen=True)
class ApiKeyAuth:
    """``core.api.Auth`` for API keys of the given kinds; the handler gets ``key``."""

    kinds: tuple[str, ...]
    arg: str = "key"

    @property
    def description(self) -> str:
        return f"API key kinds allowed: {', '.join(self.kinds)}."

    def __call__(self, request: HttpRequest) -> ApiKey:
        return authenticate_key(request, self.kinds)


RUNNER_KEY = ApiKeyAuth(("runner",))
READER_KEYS = ApiKeyAuth(("runner", "task_observer"))
