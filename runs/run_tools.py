"""The tools that only change the run (finish, fail, a pause): their arguments and outcomes.

Their ``Tool`` records are in ``runs/tools.py``'s registry with every other tool's; the run loop
(``runs/loop.py``) carries out an ``Outcome``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, Field, JsonValue, StringConstraints

from core.contracts import Closed, CredentialId
from runs.contracts import InterventionReason

# --- Arguments of the tools that do not drive the browser ---------------------


def _check_origin(value: str) -> str:
    parts = urlsplit(value)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise ValueError("must be an origin such as https://portal.example.com")
    return f"{parts.scheme}://{parts.netloc}"


# What ``_check_origin`` accepts, as a JSON Schema can say it (a client or a fuzzer reads the schema).
ORIGIN_PATTERN = r"^https?://[^\s/?#@\[\]:\x00-\x1f]+(:[0-9]{1,4})?/?$"
Origin = Annotated[
    str,
    StringConstraints(max_length=300),
    Field(json_schema_extra={"pattern": ORIGIN_PATTERN}),
    AfterValidator(_check_origin),
]


class RequestTakeoverArgs(Closed):
    reason: InterventionReason


class RequestCredentialArgs(Closed):
    portal_origin: Origin
    label: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    reason: InterventionReason = "authentication"
    # Where the person's credential is stored; pass the same id to browser_login.
    credential_id: CredentialId | None = None


class RequestConnectionArgs(Closed):
    capabilities: list[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,99}$")]] = Field(
        min_length=1, max_length=20
    )


class FinishArgs(Closed):
    output: JsonValue = None


class FailArgs(Closed):
    error: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


# --- What a tool that only changes the run does ---------------------------------


@dataclass(frozen=True)
class Finish:
    output: Any


@dataclass(frozen=True)
class Fail:
    error: str


@dataclass(frozen=True)
class Pause:
    """Pause the run with a kind of ``runs/pauses/``; the kind's ``request`` opens it from ``arguments``."""

    kind: str
    arguments: BaseModel


Outcome = Finish | Fail | Pause
