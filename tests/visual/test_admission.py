"""The gateway's admission limits hold under concurrent creates (no count-then-insert race)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from accounts.models import Account
from computers.models import Computer
from core.errors import DomainError, category_of
from visual.models import VisualTicket
from visual.services import visual_session_create

CONCURRENT = 64


def _ready_computer(account: Account, computer_id: str) -> Computer:
    return Computer.objects.create(
        id=computer_id,
        account=account,
        name=computer_id,
        status=Computer.Status.READY,
        generation=uuid.uuid4(),
        executor_address="127.0.0.1:9",
        last_heartbeat_at=timezone.now(),
    )


def _create_all_at_once(targets: list[tuple[Account, str]]) -> Counter[str]:
    """One thread (and one database connection) per create, all released together."""
    barrier = threading.Barrier(len(targets))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def create(account: Account, computer_id: str) -> None:
        try:
            barrier.wait(timeout=60)
            try:
                visual_session_create(account=account, computer_id=computer_id, mode="observe")
                outcome = "created"
            except DomainError as exc:
                outcome = category_of(exc).__name__
            with lock:
                outcomes[outcome] += 1
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def _pending_by_account() -> Counter[Any]:
    return Counter(VisualTicket.objects.values_list("session__account_id", flat=True))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs concurrent writers (PostgreSQL)")
def test_64_concurrent_creates_of_one_account_stop_at_its_limit(transactional_db: None, settings: Any) -> None:
    settings.RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT = 8
    account = Account.objects.create(name="flood")
    _ready_computer(account, "pc-1")
    outcomes = _create_all_at_once([(account, "pc-1")] * CONCURRENT)
    assert outcomes == {"created": 8, "TooMany": CONCURRENT - 8}
    assert VisualTicket.objects.count() == 8


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs concurrent writers (PostgreSQL)")
def test_64_concurrent_creates_of_eight_accounts_hold_both_limits(transactional_db: None, settings: Any) -> None:
    # Eight accounts of eight creates each: 6 per account would allow 48, the gateway allows 32.
    settings.RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT = 6
    settings.RAM_VISUAL_MAX_PENDING_TICKETS = 32
    targets = []
    for n in range(8):
        account = Account.objects.create(name=f"tenant {n}")
        _ready_computer(account, f"pc-{n}")
        targets += [(account, f"pc-{n}")] * 8
    outcomes = _create_all_at_once(targets)
    assert outcomes == {"created": 32, "TooMany": CONCURRENT - 32}
    per_account = _pending_by_account()
    assert sum(per_account.values()) == 32
    assert max(per_account.values()) <= 6
