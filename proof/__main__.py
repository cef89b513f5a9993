"""``python -m proof [--profile short|full] [--only name,name]``: RAM's promises under faults, load and
hostile input, against the real stack the proof starts for itself (proof/stack.py), in one table.

``make proof`` runs the full profile (each fault at least 20 times, a 30 min soak);
``make proof-short`` the short one CI runs after ``make test`` (within 10 minutes). The exit status
is 0 only when every row holds (``held == tries``, nothing lost or duplicated).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime

from proof import broker, faults, hostile, sweep
from proof.core import PROFILES, Profile, Row
from proof.load import concurrent_continues, mixed_load
from proof.stack import ProofStack, remove_tree, start_stack
from proof.table import failed, render

# Experiments (``proof.core.Experiment``) and the faults, which also use what only the proof's own
# stack can do (kill and start its processes).
Runnable = Callable[[ProofStack, Profile], list[Row]]

# In the order they run; the secrets sweep (when present) runs last, over everything before it.
EXPERIMENTS: list[tuple[str, Runnable]] = [
    ("worker-kill", faults.worker_kill),
    ("executor-kill", faults.executor_kill),
    ("redis-restart", faults.redis_restart),
    ("postgres-restart", faults.postgres_restart),
    ("vault-restart-seal", faults.vault_restart_and_seal),
    ("disk-full", faults.disk_full),
    ("concurrent-continues", concurrent_continues),
    ("schemathesis", hostile.schemathesis_rest),
    ("mcp-fuzz", hostile.mcp_fuzz),
    ("websocket-fuzz", hostile.websocket_fuzz),
    ("login-hostile", hostile.login_hostile),
    ("mixed-load", mixed_load),
    ("embedded-broker", broker.embedded_broker),
    ("secrets-sweep", sweep.secrets_sweep),
]
# Experiments that need none of the stack (chosen alone with --only, no stack is started).
STANDALONE = {"embedded-broker"}


def machine() -> str:
    cpus = os.cpu_count() or 0
    try:
        with open("/proc/meminfo") as meminfo:
            kib = int(meminfo.readline().split()[1])
        memory = f", {kib / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        memory = ""
    return f"{platform.node()} ({platform.machine()}, {cpus} cores{memory}, Python {platform.python_version()})"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m proof")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--only", default="", help="comma-separated experiment names (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the proof's directory (logs, var/) afterwards")
    parser.add_argument("--soak", type=int, default=0, help="the mixed load's length in seconds (default: the profile's)")
    args = parser.parse_args()
    profile = PROFILES[args.profile]
    if args.soak:
        if args.soak < 60:
            parser.error("--soak must be at least 60 seconds")
        profile = dataclasses.replace(profile, soak_seconds=args.soak)
    names = [name for name, _ in EXPERIMENTS]
    chosen = [n.strip() for n in args.only.split(",") if n.strip()] or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown experiment(s): {', '.join(unknown)}; known: {', '.join(names)}")

    # A CI timeout's SIGTERM still stops every process the proof started (they run in sessions of their own).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.monotonic()
    stack: ProofStack | None = None
    if not set(chosen) <= STANDALONE:
        print(f"proof ({profile.name} profile) starting its own stack…", flush=True)
        stack = start_stack()
        print(f"stack up in {time.monotonic() - started:.0f} s: {', '.join(stack.web_urls)}; directory {stack.root}", flush=True)
    rows: list[Row] = []
    try:
        for name, experiment in EXPERIMENTS:
            if name not in chosen:
                continue
            began = time.monotonic()
            print(f"- {name}…", flush=True)
            try:
                # A standalone experiment takes no stack (None when only those run).
                got = experiment(stack, profile)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - a crashed experiment is a row that does not hold
                traceback.print_exc()
                got = [failed(name, exc)]
            try:
                if stack is not None:
                    stack.wait_ready(180)  # every experiment leaves the stack whole for the next
            except TimeoutError as exc:
                got.append(failed(f"{name}: stack whole again", exc))
            for row in got:
                print(f"  {row.experiment}: {row.held}/{row.tries} held, {row.lost} lost, {row.duplicated} duplicated — {row.figure}", flush=True)
            print(f"  ({time.monotonic() - began:.0f} s)", flush=True)
            rows.extend(got)
    finally:
        if stack is not None:
            stack.stop()
            if not args.keep:
                remove_tree(stack.root)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print()
    print(f"make proof ({profile.name} profile), {when}, {machine()}, load average {load()}, "
          f"{(time.monotonic() - started) / 60:.1f} min")  # fmt: skip
    print()
    print(render(rows))
    holds = bool(rows) and all(row.holds for row in rows)
    print()
    print("every row holds" if holds else "NOT every row holds")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
