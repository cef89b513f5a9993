"""Webhooks delivered by a real Celery worker through Redis to a real receiver on
loopback: a pause arrives well within a second (measured and printed, not asserted:
speed goals live in ``make bench``), a receiver failing three times gets the event
exactly once more, and a delivery whose task was lost (a restart) still goes out
through the sweep, because the outbox row is in the database."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from standardwebhooks import Webhook

from accounts.models import Account
from ramsite.celery import app
from runs.contracts import TakeoverPause
from runs.models import Run
from runs.pauses import run_pause
from tests.support.waits import eventually
from tests.support.webhooks import Receiver, broker_purge, webhook_workers, worker_env
from webhooks import services
from webhooks.models import WebhookDelivery

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql" or not settings.REDIS_URL,
    reason="a real worker needs the shared PostgreSQL database and the Redis broker",
)


@pytest.fixture
def start_worker(transactional_db: None, receiver: Receiver) -> Iterator[Callable[[], Any]]:
    env = worker_env(RAM_WEBHOOK_EGRESS_ALLOW=receiver.host_port, RAM_WEBHOOK_RETRY_SECONDS="0.2,0.4,0.8,60,60,60,60")
    with webhook_workers(env) as start:
        yield start


def _paused_run(account: Account) -> Run:
    # No computer: nothing else (the run loop) acts on this run while the worker delivers.
    run = Run.objects.create(account=account, computer=None, task={"goal": "webhook"}, max_model_calls=3)
    run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
    return run


def test_a_pause_reaches_the_receiver_through_the_worker_and_redis(
    account: Account, receiver: Receiver, start_worker: Callable[[], Any]
) -> None:
    _, secret = services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    start_worker()
    # Warm the worker up with a first pause: the measurement below is of a running worker.
    _paused_run(account)
    receiver.wait_for(1, 60)
    latencies = []
    for count in range(2, 7):
        committed = time.time()
        run = _paused_run(account)
        arrived = receiver.wait_for(count, 20)[-1]
        latencies.append(arrived.at - committed)
        payload = Webhook(secret).verify(arrived.body, arrived.headers)
        assert payload["type"] == "run.paused" and payload["data"]["run_id"] == str(run.id)
    latencies.sort()
    print(f"\nwebhook run.paused, commit -> receiver, worker + Redis: median {latencies[2] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms")
    eventually(lambda: WebhookDelivery.objects.filter(status="delivered").count() == 6, 20, interval=0.05, what="the log of every delivery")


def test_a_receiver_failing_three_times_gets_the_event_exactly_once_more(
    account: Account, receiver: Receiver, start_worker: Callable[[], Any]
) -> None:
    _, secret = services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    receiver.statuses = [500, 500, 500]
    start_worker()
    _paused_run(account)
    eventually(lambda: WebhookDelivery.objects.filter(status="delivered").exists(), 60, interval=0.05, what="the delivery to succeed")
    # Attempts are made one after the other and the receiver records each before it answers: once
    # delivered, every attempt has been received (a delivered one is never tried again).
    requests = receiver.requests
    assert len(requests) == 4
    assert len({r.headers["webhook-id"] for r in requests}) == 1
    Webhook(secret).verify(requests[-1].body, requests[-1].headers)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.attempts, delivery.status, delivery.last_status_code) == (4, "delivered", 200)


def test_a_delivery_whose_task_was_lost_goes_out_through_the_sweep(
    account: Account, receiver: Receiver, start_worker: Callable[[], Any]
) -> None:
    services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    _paused_run(account)  # no worker yet: the task waits in Redis
    broker_purge()  # ... and is lost, as if the broker had been restarted empty
    assert WebhookDelivery.objects.get().status == "pending"
    start_worker()
    # As if the sweep's grace for freshly queued deliveries had passed (no waiting for it).
    WebhookDelivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=60))
    app.send_task("webhooks.sweep")  # beat sends it every 30 s; the worker runs it now
    eventually(lambda: WebhookDelivery.objects.filter(status="delivered").exists(), 60, interval=0.05, what="the sweep's delivery")
    assert len(receiver.wait_for(1)) == 1
