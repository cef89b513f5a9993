"""The executors' tokens (server side).

* The **executor token** (``ram_ex_...``): one per computer, given to that computer's executor
  as ``RAM_EXECUTOR_TOKEN``. It authenticates the executor to the server's internal endpoint
  (``computers/internal.py``) for its own computer only. The server keeps its SHA-256 digest on
  the Computer row; ``manage.py executor_token --computer ID`` or the admin's action issues a
  new one (the old one stops working at once), and the embedded default issues one at every
  start of its demo executor.
* The **private-interface token**: what the gateway and the workers present to one executor
  generation's private port. Derived from the server's secret key, the computer and the
  generation, so it is stored nowhere; the server hands it to the executor at start (before it registers),
  and it is worthless once the generation ends.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from django.conf import settings

from executor.server_link import TOKEN_PREFIX


def executor_token_new() -> tuple[str, str]:
    """A new executor token and its digest (256 random bits)."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return raw, executor_token_digest(raw)


def executor_token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def private_interface_token(*, computer_id: str, generation: uuid.UUID | str) -> str:
    """The token of one executor generation's private interface."""
    message = f"ram-executor-private\0{computer_id}\0{generation}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()
