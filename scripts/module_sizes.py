"""Keep every product module a reader can hold: at most ``LIMIT`` lines (``make lint`` runs it).

    .venv/bin/python scripts/module_sizes.py  # exit 1 naming each module over the limit

Migrations are generated and the benchmarks and proofs are not the product: they are not counted.
A module in ``OVER_LIMIT`` is known to be over and waits for its split; it leaves the list once it
is split (the check fails while a listed module is back under the limit, so the list cannot go stale).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600
PACKAGES = (
    "core",
    "accounts",
    "computers",
    "runs",
    "executor",
    "visual",
    "vault_bridge",
    "notifications",
    "webhooks",
    "ops",
    "ramsite",
    "scripts",
    "sdk/python/ram_sdk",
)
OVER_LIMIT: dict[str, str] = {}


def sizes() -> dict[str, int]:
    counted = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            with path.open(encoding="utf-8") as file:
                counted[path.relative_to(ROOT).as_posix()] = sum(1 for _ in file)
    return counted


def problems(counted: dict[str, int]) -> list[str]:
    found = [
        f"{name}: {lines} lines (at most {LIMIT}; split it along its seams)"
        for name, lines in counted.items()
        if lines > LIMIT and name not in OVER_LIMIT
    ]
    found += [
        f"{name}: listed in OVER_LIMIT but {counted[name]} lines now; take it off the list"
        for name in OVER_LIMIT
        if name in counted and counted[name] <= LIMIT
    ]
    found += [f"{name}: listed in OVER_LIMIT but gone" for name in OVER_LIMIT if name not in counted]
    return found


def main() -> int:
    found = problems(sizes())
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
