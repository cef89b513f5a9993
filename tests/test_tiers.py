"""The tiers come from the fixtures' own marks: a test that reaches a ``@live`` fixture through
another fixture is live, and leaves ``make test-fast``; one that uses only the database is db."""

from __future__ import annotations

import pytest

from tests.conftest import tier_of
from tests.support.tiers import live


@pytest.fixture
@live
def started_somewhere() -> str:
    return "a server this fixture would start"


@pytest.fixture
def reached_through(started_somewhere: str) -> str:
    return started_somewhere


def test_a_test_that_reaches_a_live_fixture_through_another_is_live(reached_through: str, request: pytest.FixtureRequest) -> None:
    assert tier_of(request.node) == "live"
    assert request.node.get_closest_marker("live") is not None
    assert request.node.get_closest_marker("unit") is None


def test_a_test_that_uses_the_database_only_is_db(db: None, request: pytest.FixtureRequest) -> None:
    assert tier_of(request.node) == "db"

