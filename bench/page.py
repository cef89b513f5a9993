"""The page ``make bench`` writes: ``docs/bench.md``, the latest figures of every table.

Each table the bench prints is also kept here, with when it was taken, on what machine and at
what load average. A run replaces the tables it measured and keeps the others (``--only`` runs
some phases), so the page always holds the latest figures of each table and nothing older.
A table is named by its title up to the first colon or parenthesis (``api on SQLite``,
``Frames``, ``steps``…): the rest of a title may carry the run's own figures.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "bench.md"

INTRO = """# Benchmark results

This page is written by `make bench` (`python -m bench`; `--only api,steps,…` runs some phases,
`--page PATH` writes elsewhere, `--no-page` writes nothing). Each table below is the latest run of
its phase, with the machine and the load average it was taken on; a run replaces the tables it
measured and keeps the others. Every figure is the median [min–max] of `--repeats` repeats
(default 3). A goal is judged only when the load average before the table was at most the
number of cores: on a busier machine the verdict says "not judged". What each phase measures is
in the docstrings of `bench/`. `--api-postgres postgres://USER@HOST:PORT/` also runs the api
table on PostgreSQL: the bench drops and creates its own database `ram_bench_api` on that
server, migrates and seeds it (any database named in the URL is left alone).
"""


@dataclass(frozen=True)
class Measured:
    """One table as the bench printed it, and where and when it was taken."""

    title: str
    header: list[str]
    rows: list[list[str]]
    load: tuple[float, float, float] | None
    taken_at: datetime
    machine: str

    @property
    def name(self) -> str:
        return table_name(self.title)


def table_name(title: str) -> str:
    """A table's stable name: its title up to the first colon or parenthesis."""
    return re.split(r"[:(]", title, maxsplit=1)[0].strip()


def machine() -> str:
    """The machine, as the proof names it: architecture, cores, memory, Python, and the commit."""
    cores = os.cpu_count() or 1
    memory = ""
    try:
        memory = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    described = f"{platform.machine()}, {cores} cores{memory}, Python {platform.python_version()}"
    try:
        commit = subprocess.run(  # noqa: S603 - fixed argv
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH; the commit is optional
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{described}, commit `{commit}`" if commit else described


def render_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in rows]
    return "\n".join(lines)


def render_section(measured: Measured) -> str:
    when = measured.taken_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if measured.load is None:
        load = "load average not recorded"
    else:
        load = "load average before it {:.2f} {:.2f} {:.2f}".format(*measured.load)
    return (
        f"## {measured.name}\n\n"
        f"Taken {when} on {measured.machine}; {load}.\n\n"
        f"{measured.title}\n\n"
        f"{render_table(measured.header, measured.rows)}\n"
    )


def sections(page: str) -> dict[str, str]:
    """The page's sections by table name, in page order (the text before the first is the intro)."""
    found: dict[str, str] = {}
    for part in re.split(r"^(?=## )", page, flags=re.MULTILINE)[1:]:
        name = part.splitlines()[0][3:].strip()
        found[name] = part.rstrip("\n") + "\n"
    return found


def page_with(previous: str, measured: list[Measured]) -> str:
    """The page with the tables just measured in place of their earlier figures, the others kept."""
    kept = sections(previous)
    for table in measured:
        kept[table.name] = render_section(table)  # a table measured twice in one run: the later one
    return INTRO + "".join("\n" + text for text in kept.values())


def write(path: Path, measured: list[Measured]) -> None:
    if not measured:
        return
    previous = path.read_text() if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_with(previous, measured))
    print(f"\nwrote {len(measured)} table(s) to {path}", file=sys.stderr)


def now() -> datetime:
    return datetime.now(UTC)
