"""Query counts of the hot endpoints, pinned: a page of runs costs the same
whatever its size and whichever kinds its runs are paused at."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accounts.models import Account
from computers.models import Computer
from runs.models import Run
from runs.pauses import PAUSE_KINDS
from tests.conftest import Api

pytestmark = pytest.mark.django_db

# Key lookup (with its account); the key's last use is recorded at most once a minute.
AUTH = 1


@pytest.fixture
def warm(api: Api, runner_key: str) -> str:
    """A key whose last use was just recorded, so each request costs only its lookup."""
    assert api.get("/api/computers", runner_key).status_code == 200
    return runner_key


def _paused_set(account: Account, computer: Computer, make_paused_run: Callable[..., Run], rounds: int) -> None:
    for _ in range(rounds):
        for kind in PAUSE_KINDS:
            make_paused_run(account, computer, kind)


@pytest.mark.parametrize("rounds", [1, 4])
def test_listing_runs_costs_a_constant_number_of_queries(
    api: Api,
    warm: str,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    django_assert_num_queries: Any,
    rounds: int,
) -> None:
    _paused_set(account, computer, make_paused_run, rounds)
    # the page with its total (and computer, continuation), credential requests, connection requests
    with django_assert_num_queries(AUTH + 3):
        response = api.get("/api/runs", warm, limit="100")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(PAUSE_KINDS) * rounds
    assert all("required_action" in run for run in body["runs"])


@pytest.mark.parametrize("kind", list(PAUSE_KINDS))
def test_reading_a_run_is_pinned(
    api: Api,
    warm: str,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    django_assert_num_queries: Any,
    kind: str,
) -> None:
    run = make_paused_run(account, computer, kind)
    # the run (with computer, account, continuation), then its kind's request rows
    queries = {"credential": 1, "connection": 1}.get(kind, 0)
    with django_assert_num_queries(AUTH + 1 + queries):
        response = api.get(f"/api/runs/{run.id}", warm)
    assert response.status_code == 200
    assert response.json()["required_action"]["kind"] == kind


@pytest.mark.parametrize("kind", ["takeover", "credential", "connection"])
def test_the_descriptor_is_pinned(
    api: Api,
    warm: str,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    django_assert_num_queries: Any,
    kind: str,
) -> None:
    run = make_paused_run(account, computer, kind)
    # the run (with computer, account, continuation), then the kind's request row
    queries = {"credential": 1, "connection": 1}.get(kind, 0)
    with django_assert_num_queries(AUTH + 1 + queries):
        response = api.get(f"/api/runs/{run.id}/intervention-descriptor", warm)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("kind", ["takeover", "continue", "credits"])
def test_a_page_without_request_backed_pauses_reads_no_request_rows(
    api: Api,
    warm: str,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    django_assert_num_queries: Any,
    kind: str,
) -> None:
    for _ in range(3):
        make_paused_run(account, computer, kind)
    # the page with its total only: credential and connection requests are read only for the runs paused at them
    with django_assert_num_queries(AUTH + 1):
        response = api.get("/api/runs", warm, limit="100")
    assert response.status_code == 200
    assert [run["required_action"]["kind"] for run in response.json()["runs"]] == [kind] * 3
