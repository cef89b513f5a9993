"""The soak's flatness verdict: what it counts, what it judges, and a restart never holds."""

from __future__ import annotations

import pytest

from proof.load import Sample, _flat_row

pytestmark = pytest.mark.unit

ROOTS = {"web-1": 10, "executor-pc-1": 20}


def samples(web: int, executor: int, roots: dict[str, int] = ROOTS) -> list[Sample]:
    return [Sample(pss={"web-1": web, "executor-pc-1": executor}, fds={}, roots=roots) for _ in range(5)]


def test_a_tree_within_ten_percent_holds_and_one_beyond_does_not() -> None:
    row = _flat_row("memory", samples(100, 500), samples(109, 551), "pss", "", 1, True)
    assert (row.tries, row.held) == (2, 1)
    assert "worst executor-pc-1 +10.2%" in row.figure


def test_a_short_warm_up_shows_the_executors_without_judging_them() -> None:
    row = _flat_row("memory", samples(100, 500), samples(105, 700), "pss", "", 1, False)
    assert (row.tries, row.held) == (1, 1)
    assert "executor-pc-1 500→700" in row.figure and "executors not judged" in row.figure
    grown = _flat_row("memory", samples(100, 500), samples(120, 500), "pss", "", 1, False)
    assert (grown.tries, grown.held) == (1, 0)


def test_a_restarted_tree_does_not_hold_even_at_the_same_size() -> None:
    row = _flat_row("memory", samples(100, 500), samples(100, 500, {"web-1": 11, "executor-pc-1": 20}), "pss", "", 1, True)
    assert (row.tries, row.held) == (2, 1)
    assert row.figure.startswith("1 tree(s) restarted")
