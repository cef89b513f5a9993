"""Concurrent continue requests against PostgreSQL create exactly one continuation, and a key raced
on two runs is refused as reused."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from accounts.models import Account
from computers.models import Computer
from runs.models import IdempotencyRecord, Run
from tests.support.waits import eventually


def _post(url: str, key: str, body: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _race(url: str, key: str, bodies: list[dict[str, str]]) -> list[tuple[int, bytes]]:
    results: list[tuple[int, bytes]] = [(0, b"")] * len(bodies)
    barrier = threading.Barrier(len(bodies))

    def worker(index: int) -> None:
        barrier.wait()
        results[index] = _post(url, key, bodies[index])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the concurrency guarantee is tested on PostgreSQL")
def test_sixteen_identical_requests_create_exactly_one_continuation(
    live_origin: str,
    account: Account,
    computer: Computer,
    runner_key: str,
    make_paused_run: Callable[..., Run],
) -> None:
    run = make_paused_run(account, computer, "takeover")
    results = _race(f"{live_origin}/api/runs/{run.id}/continue", runner_key, [{"idempotency_key": "same-key-1"}] * 16)
    assert Run.objects.filter(continued_from=run).count() == 1
    assert {status for status, _ in results} == {201}
    assert len({body for _, body in results}) == 1, "every response is the first one, byte for byte"
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the concurrency guarantee is tested on PostgreSQL")
def test_sixteen_different_keys_create_one_continuation_and_fifteen_conflicts(
    live_origin: str,
    account: Account,
    computer: Computer,
    runner_key: str,
    make_paused_run: Callable[..., Run],
) -> None:
    run = make_paused_run(account, computer, "continue")
    bodies = [{"idempotency_key": f"distinct-key-{i:02d}"} for i in range(16)]
    results = _race(f"{live_origin}/api/runs/{run.id}/continue", runner_key, bodies)
    continuation = Run.objects.get(continued_from=run)
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] + [409] * 15
    for status, body in results:
        if status == 409:
            assert json.loads(body)["continued_run_id"] == str(continuation.id)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the concurrency guarantee is tested on PostgreSQL")
def test_a_key_raced_on_two_runs_continues_one_and_refuses_the_other_as_reused(
    live_origin: str,
    account: Account,
    computer: Computer,
    runner_key: str,
    make_paused_run: Callable[..., Run],
) -> None:
    """Two requests with one key on two runs both find the key unused; the one whose record lands
    second hits the unique key (a real IntegrityError), and its next pass reads the winner's record:
    422, not a 409 or a 500.

    Both requests are made to reach that point together: another transaction holds the computer's
    row until both wait, the first at its commit (where its continuation's reference to the computer
    is checked), the second on the first's uncommitted record."""
    runs = [make_paused_run(account, computer, "takeover") for _ in range(2)]
    bodies = [{"idempotency_key": "raced-key-1"}] * 2
    results: list[tuple[int, bytes]] = [(0, b"")] * 2

    def send(index: int) -> None:
        results[index] = _post(f"{live_origin}/api/runs/{runs[index].id}/continue", runner_key, bodies[index])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    holder = psycopg.connect(_dsn(), autocommit=False)
    try:
        holder.execute("SELECT 1 FROM executor_computer WHERE id = %s FOR UPDATE", [computer.pk])
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(holder, 2)
    finally:
        holder.rollback()
        holder.close()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [201, 422]
    refused = next(body for status, body in results if status == 422)
    assert "already used with a different request" in json.loads(refused)["error"]
    assert Run.objects.filter(continued_from__in=runs).count() == 1
    assert IdempotencyRecord.objects.count() == 1


def _dsn() -> str:
    settings = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        host=settings["HOST"],
        port=settings["PORT"],
    )


def _wait_for_lock_waiters(holder: psycopg.Connection[Any], count: int) -> None:
    def waiting() -> bool:
        # The statistics are a snapshot per transaction: take a fresh one each time.
        holder.execute("SELECT pg_stat_clear_snapshot()")
        row = holder.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        return row is not None and row[0] >= count

    eventually(waiting, 60, what=f"{count} requests waiting on the computer's row")
