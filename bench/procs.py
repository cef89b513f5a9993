"""Processes of the benchmark: a process tree and its CPU time, from /proc."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> dict[int, str]:
    """``pid`` and every process below it, with their names."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            head, tail = stat.read_text().rsplit(")", 1)
            parents[int(stat.parent.name)] = int(tail.split()[1])
            names[int(stat.parent.name)] = head.split("(", 1)[1]
    tree, grew = {pid}, True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grew = True
    return {member: names.get(member, "") for member in tree}


def tree_cpu_seconds(pid: int) -> float:
    total = 0.0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            total += cpu_seconds(member)
    return total
