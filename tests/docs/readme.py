"""The README's five-minute path, as a reader pastes it: its ``sh five-minutes`` blocks, in order,
in one shell at the checkout's root, against a server started as ``make run`` starts it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def five_minute_blocks() -> list[str]:
    return [m.group(2) for m in FENCE.finditer(README.read_text()) if m.group(1).strip() == "sh five-minutes"]


def run_the_five_minutes(env: dict[str, str]) -> str:
    """Every block in one ``bash -euo pipefail`` (the first defines what the others use); its output."""
    script = "\n".join(five_minute_blocks())
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result.stdout
