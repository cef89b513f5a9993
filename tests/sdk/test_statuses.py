"""The SDKs' hand-written lists of run statuses are the server's: a status added to the
contract without them would leave a harness waiting on a run that already ended."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from ram_sdk import RUN_STATUSES, TERMINAL_STATUSES

from runs.contracts import RunStatus
from runs.models import Run

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_python_sdks_statuses_are_the_servers() -> None:
    assert RUN_STATUSES == get_args(RunStatus)
    assert set(TERMINAL_STATUSES) == {str(status) for status in Run.TERMINAL}


def test_the_typescript_sdks_terminal_statuses_are_the_servers() -> None:
    source = (ROOT / "sdk" / "js" / "src" / "client.ts").read_text()
    found = re.search(r"export const TERMINAL_STATUSES: readonly RunStatus\[\] = \[([^\]]*)\]", source)
    assert found is not None, "TERMINAL_STATUSES is no longer declared in sdk/js/src/client.ts"
    assert set(re.findall(r"'([a-z_]+)'", found.group(1))) == {str(status) for status in Run.TERMINAL}
