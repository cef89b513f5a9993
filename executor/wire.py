"""The executor's private wire format, shared by the executor and its clients.

Requests ``{"id", "op", "args"}`` as JSON text; replies ``{"id", "ok": true,
"result"}`` or ``{"id", "ok": false, "error", "reason"}``; pushed events
``{"event": "control", "control"}``; frames as one binary message
``b"F" + len(meta) (4 bytes, big endian) + meta JSON + JPEG``.
"""

from __future__ import annotations

import json
import struct
from typing import Any

CALL_TIMEOUT_SECONDS = 25.0
# browser_login: the executor's action may run at most the login's budget plus this margin (its own
# bound); the answer itself is due within the budget, counted from the step's start.
BROWSER_LOGIN_MARGIN_SECONDS = 5.0
# browser_login: kept at the end of the budget (counted from the step's start, as a harness sees it)
# for the executor's answer on its way back and the step's settlement: the executor is given the
# budget less this, and the worker stops waiting ``BROWSER_LOGIN_SETTLE_SECONDS`` before its end.
BROWSER_LOGIN_ANSWER_RESERVE_SECONDS = 1.0
BROWSER_LOGIN_SETTLE_SECONDS = 0.3
MAX_FRAME_BYTES = 2_000_000


def pack_frame(meta: dict[str, Any], jpeg: bytes) -> bytes:
    head = json.dumps(meta, separators=(",", ":")).encode()
    return b"F" + struct.pack(">I", len(head)) + head + jpeg


def unpack_frame(data: bytes) -> tuple[dict[str, Any], bytes]:
    if data[:1] != b"F" or len(data) < 5:
        raise ValueError("not a frame")
    (size,) = struct.unpack(">I", data[1:5])
    return json.loads(data[5 : 5 + size]), data[5 + size :]
