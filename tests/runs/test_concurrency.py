"""Concurrent identical continue requests against PostgreSQL create exactly one continuation."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from django.db import connection

from accounts.models import Account
from executor.models import Computer
from runs.models import IdempotencyRecord, Run


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
