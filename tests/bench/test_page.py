"""The page ``make bench`` writes: the latest figures of each table, with where and when they were taken."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import page

pytestmark = pytest.mark.unit

MACHINE = "x86_64, 2 cores, 23.5 GiB, Python 3.12.1, commit `abc1234`"


def measured(title: str, value: str, *, hour: int, load: tuple[float, float, float] | None = (0.5, 0.7, 0.9)) -> page.Measured:
    return page.Measured(
        title=title,
        header=["figure", "value", "goal", "verdict"],
        rows=[["loop overhead per step", value, "≤ 25 ms", "met"]],
        load=load,
        taken_at=datetime(2026, 12, 2, hour, 5, tzinfo=UTC),
        machine=MACHINE,
    )


def test_a_table_is_named_by_its_title_before_the_run_s_own_figures() -> None:
    assert page.table_name("api on SQLite: wrk against the web server (goals: …)") == "api on SQLite"
    assert page.table_name("Frames: delivered vs raw CDP") == "Frames"
    assert page.table_name("Gateway RSS with one stalled viewer (Ping off)") == "Gateway RSS with one stalled viewer"
    assert page.table_name("Inputs") == "Inputs"


def test_the_page_holds_each_table_with_its_machine_load_and_date(tmp_path: Path) -> None:
    target = tmp_path / "docs" / "bench.md"
    page.write(target, [measured("steps: the run loop, median of 3", "9 ms [9 ms–9 ms]", hour=6)])
    text = target.read_text()
    assert text.startswith("# Benchmark results\n")
    assert "## steps\n" in text
    assert f"Taken 2026-12-02 06:05 UTC on {MACHINE}; load average before it 0.50 0.70 0.90." in text
    assert "steps: the run loop, median of 3" in text
    assert "| loop overhead per step | 9 ms [9 ms–9 ms] | ≤ 25 ms | met     |" in text


def test_a_new_run_replaces_the_tables_it_measured_and_keeps_the_others(tmp_path: Path) -> None:
    target = tmp_path / "bench.md"
    page.write(target, [measured("steps: first run", "40 ms", hour=1), measured("Inputs", "11 ms", hour=1, load=None)])
    page.write(target, [measured("steps: second run", "9 ms", hour=7)])
    text = target.read_text()
    assert text.count("## steps\n") == 1
    assert "40 ms" not in text and "steps: first run" not in text  # latest figures only
    assert "9 ms" in text and "Taken 2026-12-02 07:05 UTC" in text
    assert "## Inputs\n" in text and "11 ms" in text and "load average not recorded" in text
    # The page keeps its order: the table kept first, the one re-measured in its old place.
    assert text.index("## steps") < text.index("## Inputs")
    assert page.page_with(text, []) == text  # reading and writing again changes nothing


def test_a_run_that_measured_nothing_leaves_the_page_alone(tmp_path: Path) -> None:
    target = tmp_path / "bench.md"
    page.write(target, [])
    assert not target.exists()


def test_the_machine_names_its_cores_and_python() -> None:
    described = page.machine()
    assert " cores" in described and "Python 3." in described


def test_the_committed_page_parses_into_tables_with_where_they_were_taken() -> None:
    text = page.PAGE.read_text()
    found = page.sections(text)
    assert {"api on SQLite", "steps", "Frames", "browser_login on a local portal"} <= set(found)
    for name, section in found.items():
        assert "Taken " in section and "| " in section, name
    assert page.page_with(text, []) == text
