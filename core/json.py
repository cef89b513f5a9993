"""The one JSON encoding of every answer: compact, UTF-8, stable."""

from __future__ import annotations

import json
from typing import Any


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
