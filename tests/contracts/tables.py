"""The shared tables of valid and invalid descriptors and visual messages
(``tests/contracts/*.json``), read by the server's, the Python SDK's and the
TypeScript SDK's tests: any disagreement between them fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
DESCRIPTORS: dict[str, Any] = json.loads((HERE / "descriptors.json").read_text())
VISUAL: dict[str, Any] = json.loads((HERE / "visual_messages.json").read_text())


def cases(entries: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(entry, id=entry["name"]) for entry in entries]
