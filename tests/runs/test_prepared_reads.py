"""The run reads compiled once per connection (core/prepared.py) answer exactly what the plain
queryset answers: the same runs, related rows, queue positions and counts, for every shape, and
never another account's run."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from django.db import connection

from accounts.models import Account
from computers.models import Computer
from runs import selectors
from runs.errors import InvalidFilter, RunNotFound
from runs.models import Run
from runs.queue import queue_ahead
from runs.services import run_create

pytestmark = pytest.mark.django_db


def _plain(account: Account, **filters: object) -> list[Run]:
    return list(
        Run.objects.filter(account=account, **filters)
        .select_related("computer", "continuation")
        .annotate(queue_ahead=queue_ahead())
    )


@pytest.fixture
def two_accounts(
    account: Account,
    computer: Computer,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
) -> tuple[list[Run], Run]:
    """Queued runs on two computers of one account (so queue positions differ), a paused one, and a
    run of another account."""
    second = make_computer(account, "pc-2")
    runs = [run_create(account=account, computer=c, task={"goal": str(n)}, max_model_calls=3) for n, c in enumerate([computer, second] * 3)]
    runs.append(make_paused_run(account, computer, "takeover"))
    other_account = make_account("Other")
    other = run_create(account=other_account, computer=make_computer(other_account, "pc-x"), task={"goal": "x"}, max_model_calls=3)
    return runs, other


def test_a_prepared_run_read_is_the_querysets(account: Account, two_accounts: tuple[list[Run], Run]) -> None:
    runs, _ = two_accounts
    for expected in _plain(account):
        run = selectors.run_for_account(account=account, run_id=expected.id)
        assert (run.id, run.status, run.computer_id, getattr(run.computer, "name", None), getattr(run, "continuation", None)) == (
            expected.id,
            expected.status,
            expected.computer_id,
            getattr(expected.computer, "name", None),
            getattr(expected, "continuation", None),
        )
        assert run.queue_ahead == expected.queue_ahead  # type: ignore[attr-defined]
    assert sorted(r.queue_ahead for r in _plain(account, status=Run.Status.QUEUED)) == [0, 0, 1, 1, 2, 2]  # type: ignore[attr-defined]
    assert len(runs) == 7


def test_a_prepared_run_read_never_answers_another_accounts_run(
    account: Account, two_accounts: tuple[list[Run], Run]
) -> None:
    _, other = two_accounts
    with pytest.raises(RunNotFound):
        selectors.run_for_account(account=account, run_id=other.id)
    with pytest.raises(RunNotFound):
        selectors.run_for_account(account=account, run_id=uuid.uuid4())
    assert selectors.run_for_account(account=other.account, run_id=other.id).id == other.id


@pytest.mark.parametrize(
    ("filters", "plain"),
    [
        ({}, {}),
        ({"status": "queued"}, {"status": "queued"}),
        ({"status": "waiting_for_input"}, {"status": "waiting_for_input"}),
        ({"kind": "takeover"}, {"status": "waiting_for_input", "pause_kind": "takeover", "continuation__isnull": True}),
        ({"computer_id": "pc-2"}, {"computer_id": "pc-2"}),
        ({"computer_id": "pc-x"}, {"computer_id": "pc-x"}),
        ({"status": "queued", "computer_id": "pc-1"}, {"status": "queued", "computer_id": "pc-1"}),
    ],
)
def test_a_prepared_page_is_the_querysets(
    account: Account, two_accounts: tuple[list[Run], Run], filters: dict[str, str], plain: dict[str, object]
) -> None:
    expected = _plain(account, **plain)
    for offset, limit in [(0, 20), (0, 2), (2, 3), (6, 5), (50, 5)]:
        page = selectors.runs_page(account=account, limit=limit, offset=offset, **filters)  # type: ignore[arg-type]
        window = expected[offset : offset + limit]
        assert [r.id for r in page.runs] == [r.id for r in window]
        assert [r.queue_position for r in page.runs] == [selectors.queue_position(r) for r in window]
        assert page.count == len(expected)
        assert page.next_offset == (offset + limit if offset + limit < len(expected) else None)


def test_bad_filters_are_refused_before_any_query(account: Account) -> None:
    with pytest.raises(InvalidFilter):
        selectors.runs_page(account=account, status="bogus")
    with pytest.raises(InvalidFilter):
        selectors.runs_page(account=account, kind="bogus")


def test_each_thread_prepares_on_its_own_connection(account: Account, two_accounts: tuple[list[Run], Run]) -> None:
    """A web thread's compiled query is bound to that thread's connection: another thread (here with
    its own connection, which does not see this test's uncommitted rows) prepares its own."""
    runs, _ = two_accounts
    assert selectors.run_for_account(account=account, run_id=runs[0].id).id == runs[0].id
    seen: list[object] = []

    def other_thread() -> None:
        try:
            selectors.run_for_account(account=account, run_id=runs[0].id)
            seen.append("found")
        except RunNotFound:
            seen.append("not found")
        finally:
            connection.close()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen == ["not found"]  # its own connection, outside this test's transaction
    assert selectors.run_for_account(account=account, run_id=runs[0].id).id == runs[0].id
