"""The intervention descriptor check: what the spec's presentation code checks (the run binding,
``requires_login`` exactly ``true``, an absolute locator on the same origin with exactly the path
``/tasks/<run_id>/intervention``, no query or fragment) and the descriptor contract (closed
objects, enums, texts, per-kind fields). ``RamClient.intervention_descriptor`` answers through it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ram_sdk.errors import InvalidDescriptor
from ram_sdk.origins import same_origin

# Patterns are used with fullmatch (``$`` would also match before a final newline).
_COMPUTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
_KINDS = ("human_control", "credential", "google_connection")
_STATES = ("pending", "credential_saved")
_REASONS = ("authentication", "captcha", "verification", "missing_information", "authorization_required", "other")
_FIELDS = {
    "version",
    "run_id",
    "computer_id",
    "kind",
    "state",
    "reason",
    "progress",
    "user_action",
    "next_step",
    "request_id",
    "expires_at",
    "human_action",
}
_FORBIDDEN_IN_TEXT = re.compile(r"(?i)https?:|#\s*invite|invite\s*=|ram-ticket\.|\bticket\s*[=:]|bearer|ram_(?:rk|ok)_")


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# ISO 8601 with a time and a time zone (the TypeScript SDK uses the same pattern).
_AWARE_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:[0-9]{2})")
_URL_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\\s]+")


def _is_uuid(value: Any) -> bool:
    return isinstance(value, str) and bool(_UUID.fullmatch(value))


def _is_aware_iso(value: Any) -> bool:
    if not isinstance(value, str) or not _AWARE_ISO.fullmatch(value):
        return False
    value = re.sub(r"\.(\d{6})\d+", r".\1", value)  # fromisoformat reads at most microseconds
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return parsed.tzinfo is not None


def _is_text(value: Any) -> bool:
    return (
        isinstance(value, str)
        and bool(value.strip())
        and len(value.encode("utf-16-le", "surrogatepass")) // 2 <= 500
        and not _FORBIDDEN_IN_TEXT.search(value)
    )


def _is_locator(url: str, run_id: str, origin: str) -> bool:
    """``url`` is exactly ``<origin>/tasks/<run_id>/intervention``: absolute, no credentials, query or fragment."""
    path = f"/tasks/{run_id}/intervention"
    if not url.endswith(path):
        return False
    prefix = url[: -len(path)]
    if not _URL_PREFIX.fullmatch(prefix):
        return False
    parts = urlsplit(prefix)
    return parts.username is None and parts.password is None and same_origin(prefix, origin)


def check_intervention(data: Any, *, run_id: str, origin: str) -> dict[str, Any]:
    """Validate a descriptor response ``{"intervention": {...}}`` for ``run_id`` on ``origin``.

    Checks what the spec's presentation code checks — the run binding,
    ``requires_login`` exactly ``true``, and an absolute locator on the same origin
    with exactly the path ``/tasks/<run_id>/intervention`` and no query or fragment —
    and the descriptor contract (closed objects, enums, texts, per-kind fields).
    Returns the ``intervention`` object; raises ``InvalidDescriptor`` otherwise.
    """
    if not isinstance(data, dict) or set(data) != {"intervention"} or not isinstance(data["intervention"], dict):
        raise InvalidDescriptor("Invalid link: the response is not {intervention: object}.")
    item: dict[str, Any] = data["intervention"]
    action = item.get("human_action")
    if item.get("run_id") != run_id:
        raise InvalidDescriptor("Invalid link: the descriptor is for another run.")
    if not isinstance(action, dict) or set(action) != {"url", "requires_login"} or action["requires_login"] is not True:
        raise InvalidDescriptor("Invalid link: human_action must be {url, requires_login: true}.")
    url = action["url"]
    if not isinstance(url, str):
        raise InvalidDescriptor("Invalid link: human_action.url is not a string.")
    if not _is_locator(url, run_id, origin):
        raise InvalidDescriptor("Invalid link: the locator is not this server's intervention page for the run.")
    problems = []
    if set(item) - _FIELDS:
        problems.append("unknown fields")
    if type(item.get("version")) is not int or item.get("version") != 1:
        problems.append("version")
    if not _is_uuid(item.get("run_id")):
        problems.append("run_id")
    if not isinstance(item.get("computer_id"), str) or not _COMPUTER_ID.fullmatch(item["computer_id"]):
        problems.append("computer_id")
    kind, state = item.get("kind"), item.get("state")
    if kind not in _KINDS:
        problems.append("kind")
    if state not in _STATES:
        problems.append("state")
    if item.get("reason") not in _REASONS:
        problems.append("reason")
    problems += [name for name in ("progress", "user_action", "next_step") if not _is_text(item.get(name))]
    if kind == "credential":
        if not _is_uuid(item.get("request_id")) or not _is_aware_iso(item.get("expires_at")):
            problems.append("request_id/expires_at")
    elif kind in ("human_control", "google_connection"):
        if state != "pending" or "expires_at" in item:
            problems.append("state/expires_at")
        if kind == "human_control" and "request_id" in item:
            problems.append("request_id")
        if kind == "google_connection" and item.get("request_id") != run_id:
            problems.append("request_id")
    if problems:
        raise InvalidDescriptor("Invalid descriptor: " + ", ".join(problems) + ".")
    return item
