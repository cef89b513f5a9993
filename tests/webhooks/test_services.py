"""Publishing run events into the outbox and delivering them to a real receiver on
loopback: signed the Standard Webhooks way (checked with the official package),
retried with backoff, at least once with a stable webhook-id, under the egress
policy, with the secret never leaving the signature."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from cryptography.fernet import Fernet
from django.db import connection, transaction
from django.utils import timezone
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from accounts.models import Account
from computers.models import Computer
from core.metrics import WEBHOOK_DELIVERIES
from ops.metrics import scrape
from runs.contracts import TakeoverPause
from runs.models import Run, RunEvent
from runs.pauses import run_pause
from runs.selectors import run_to_wire
from runs.services import run_cancel, run_create
from runs.state import run_event_append, run_finish
from tests.support.webhooks import Receiver
from webhooks import services
from webhooks.catalogue import EVENT_TYPES, RUN_EVENT_TYPES
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookSecret
from webhooks.sender import post

ALL_TYPES = list(EVENT_TYPES)


@pytest.fixture
def endpoint(account: Account, receiver: Receiver) -> tuple[WebhookEndpoint, str]:
    return services.webhook_create(account=account, url=receiver.url, event_types=ALL_TYPES)


def attempt_due() -> list[float | None]:
    """What a worker does for each due delivery: one attempt each (the real service, in this process)."""
    due = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now()
    ).order_by("created_at").values_list("id", flat=True)
    return [services.delivery_attempt(delivery_id=d) for d in list(due)]


def paused_run(account: Account, computer: Computer) -> Run:
    run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
    run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
    run.refresh_from_db()
    return run


def test_a_pause_is_delivered_signed_with_its_required_action(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str], receiver: Receiver
) -> None:
    _, secret = endpoint
    run = paused_run(account, computer)
    assert attempt_due() == [None, None]  # run.queued, then run.paused
    first, second = receiver.wait_for(2)
    payloads = [Webhook(secret).verify(r.body, r.headers) for r in (first, second)]
    assert [p["type"] for p in payloads] == ["run.queued", "run.paused"]
    paused = payloads[1]
    assert paused["data"]["run_id"] == str(run.id)
    assert paused["data"]["required_action"] == run_to_wire(run)["required_action"]
    assert paused["data"]["required_action"]["kind"] == "takeover"
    assert paused["data"]["details"] == {"kind": "takeover", "reason": "captcha"}
    assert second.headers["content-type"] == "application/json"
    assert second.headers["webhook-id"].startswith("msg_")
    assert first.headers["webhook-id"] != second.headers["webhook-id"]
    assert second.path == "/hooks/ram"
    assert WebhookDelivery.objects.filter(status="delivered").count() == 2


def test_the_outbox_row_commits_with_the_run_event_or_not_at_all(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str]
) -> None:
    run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
    before = WebhookDelivery.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
        assert WebhookDelivery.objects.count() == before + 1
        raise RuntimeError("the transition fails after the event was appended")
    assert WebhookDelivery.objects.count() == before
    assert not RunEvent.objects.filter(run=run, kind="run_paused").exists()


def test_every_run_event_of_the_table_is_published_once_with_its_type(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str]
) -> None:
    run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
    for kind in RUN_EVENT_TYPES:  # run_create already wrote run_queued: a second one is not announced again
        run_event_append(run=run, kind=kind, data={"note": kind})
    run_event_append(run=run, kind="step_started", data={"index": 0})  # not in the table: never delivered
    published = list(WebhookEvent.objects.filter(run=run).values_list("type", flat=True))
    assert sorted(published) == sorted(set(RUN_EVENT_TYPES.values()))  # run.queued once
    assert set(RUN_EVENT_TYPES.values()) == set(EVENT_TYPES)
    first = json.loads(WebhookEvent.objects.get(run=run, type="run.queued").body)
    assert first["data"]["details"] == {"queue_position": 1}


def test_an_endpoint_gets_only_its_types_of_its_own_account(
    account: Account,
    computer: Computer,
    receiver: Receiver,
    make_account: Callable[..., Account],
    make_computer: Callable[..., Computer],
) -> None:
    mine, _ = services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    other_account = make_account("Other")
    services.webhook_create(account=other_account, url=receiver.url, event_types=ALL_TYPES)
    disabled, _ = services.webhook_create(account=account, url=receiver.url, event_types=ALL_TYPES)
    WebhookEndpoint.objects.filter(pk=disabled.pk).update(is_active=False)
    run = paused_run(account, computer)
    run_finish(run=run, error="gave up")
    assert list(WebhookDelivery.objects.values_list("endpoint_id", "event__type")) == [(mine.id, "run.paused")]


def test_run_failed_and_cancelled_and_continued_carry_their_fields(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str], api: Any, runner_key: str
) -> None:
    failed = run_create(account=account, computer=computer, task={"goal": "a"}, max_model_calls=3)
    run_finish(run=failed, error="The portal is down.")
    cancelled = run_create(account=account, computer=computer, task={"goal": "b"}, max_model_calls=3)
    run_cancel(run=cancelled)
    paused = paused_run(account, computer)
    answer = api.post(f"/api/runs/{paused.id}/continue", {"idempotency_key": "continue-once-1"}, key=runner_key)
    assert answer.status_code == 201, answer.content

    def data(run: Run, type_: str) -> dict[str, Any]:
        return json.loads(WebhookEvent.objects.get(run=run, type=type_).body)["data"]

    assert data(failed, "run.failed")["error"] == "The portal is down."
    assert data(cancelled, "run.cancelled")["run_id"] == str(cancelled.id)
    continued = data(paused, "run.continued")
    assert continued["continued_run_id"] == answer.json()["run"]["id"]
    new_run = Run.objects.get(pk=answer.json()["run"]["id"])
    assert json.loads(WebhookEvent.objects.get(run=new_run, type="run.queued").body)["data"]["details"] == {
        "queue_position": 1
    }


def test_a_receiver_failing_three_times_gets_the_event_exactly_once_more(
    account: Account, computer: Computer, receiver: Receiver, settings: Any
) -> None:
    _, secret = services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    receiver.statuses = [500, 500, 500]
    failed_before = WEBHOOK_DELIVERIES.labels(outcome="failed")._value.get()
    delivered_before = WEBHOOK_DELIVERIES.labels(outcome="delivered")._value.get()
    paused_run(account, computer)
    start = timezone.now()
    waits = []
    with time_machine.travel(start, tick=False) as clock:
        for _ in range(6):
            waits += [w for w in attempt_due() if w is not None]
            clock.shift(timedelta(hours=1))
    # Exponential backoff from the schedule, then one success, then nothing more.
    assert waits == settings.RAM_WEBHOOK_RETRY_SECONDS[:3]
    requests = receiver.wait_for(4)
    assert len(requests) == 4
    assert len({r.headers["webhook-id"] for r in requests}) == 1  # one event: receivers de-duplicate on it
    assert len({r.body for r in requests}) == 1
    for request in requests[:3]:  # each attempt is signed afresh (a new timestamp), all with the same body
        with time_machine.travel(int(request.headers["webhook-timestamp"]), tick=False):
            Webhook(secret).verify(request.body, request.headers)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == ("delivered", 4, 200, "")
    assert WEBHOOK_DELIVERIES.labels(outcome="failed")._value.get() == failed_before + 3
    assert WEBHOOK_DELIVERIES.labels(outcome="delivered")._value.get() == delivered_before + 1


def test_an_unreachable_endpoint_is_tried_on_schedule_then_given_up(
    account: Account, computer: Computer, receiver: Receiver, settings: Any
) -> None:
    services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    receiver.statuses = [503] * 100
    gave_up_before = WEBHOOK_DELIVERIES.labels(outcome="gave_up")._value.get()
    paused_run(account, computer)
    schedule = settings.RAM_WEBHOOK_RETRY_SECONDS
    assert len(schedule) + 1 >= 8 and 20 * 3600 <= sum(schedule) <= 30 * 3600  # >= 8 attempts over ~24 h
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for wait in [*schedule, 0]:
            attempt_due()
            clock.shift(timedelta(seconds=wait) - timedelta(seconds=1))
            assert attempt_due() == []  # not due a second early
            clock.shift(timedelta(seconds=1))
        attempt_due()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("failed", len(schedule) + 1, "HTTP 503.")
    assert len(receiver.requests) == len(schedule) + 1
    assert WEBHOOK_DELIVERIES.labels(outcome="gave_up")._value.get() == gave_up_before + 1


def test_loopback_is_refused_without_the_setting_and_nothing_is_sent(
    account: Account, computer: Computer, receiver: Receiver, settings: Any
) -> None:
    services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    settings.RAM_WEBHOOK_EGRESS_ALLOW = []
    paused_run(account, computer)
    attempt_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert "egress policy" in delivery.last_error and delivery.last_status_code is None
    assert receiver.requests == []


def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    for address in ("10.0.0.7", "169.254.169.254", "127.0.0.1", "::1", "::ffff:192.168.1.1"):
        outcome = post(
            "https://hooks.example.com/x", body=b"{}", headers={}, timeout=1, resolve=lambda h, p, a=address: [a]
        )
        assert not outcome.delivered and "egress policy" in outcome.error, address
    # One bad address among good ones is enough to refuse: the name is resolved once, and all must pass.
    outcome = post("https://hooks.example.com/x", body=b"{}", headers={}, timeout=1, resolve=lambda h, p: ["93.184.216.34", "10.1.1.1"])
    assert "egress policy" in outcome.error


def test_a_name_is_resolved_once_and_the_post_goes_to_the_checked_address(receiver: Receiver) -> None:
    """DNS rebinding: a second lookup would answer a private address, so there must not be one."""
    port = int(receiver.host_port.rpartition(":")[2])
    lookups: list[tuple[str, int]] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append((host, port))
        return ["127.0.0.1"] if len(lookups) == 1 else ["10.9.9.9"]

    outcome = post(f"http://hooks.example.test:{port}/hooks/ram", body=b"{}", headers={}, timeout=5, resolve=rebinding)
    assert outcome.delivered, outcome.error
    assert lookups == [("hooks.example.test", port)]
    [received] = receiver.wait_for(1)
    assert received.headers["host"] == f"hooks.example.test:{port}", "the receiver is addressed by its name"


def test_redirects_are_not_followed(account: Account, computer: Computer, receiver: Receiver) -> None:
    services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])
    receiver.statuses = [307]
    receiver.answer_headers = {"Location": f"{receiver.origin}/elsewhere"}
    paused_run(account, computer)
    attempt_due()
    assert [r.path for r in receiver.requests] == ["/hooks/ram"]
    delivery = WebhookDelivery.objects.get()
    assert delivery.last_status_code == 307 and "redirects are not followed" in delivery.last_error


def test_rotation_signs_with_both_secrets_until_the_old_one_expires(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str], receiver: Receiver
) -> None:
    hook, old = endpoint
    new, until = services.webhook_secret_rotate(endpoint=hook, overlap_seconds=3600)
    assert new != old and until is not None
    services.webhook_test_send(endpoint=hook)
    attempt_due()
    request = receiver.wait_for(1)[0]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(request.body, request.headers)["type"] == "webhook.test"
    with time_machine.travel(timezone.now() + timedelta(seconds=3601), tick=False):
        services.webhook_test_send(endpoint=hook)
        attempt_due()
        later = receiver.wait_for(2)[1]
        assert len(later.headers["webhook-signature"].split(" ")) == 1
        Webhook(new).verify(later.body, later.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(old).verify(later.body, later.headers)


def test_a_forged_or_altered_delivery_fails_verification(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str], receiver: Receiver
) -> None:
    hook, secret = endpoint
    services.webhook_test_send(endpoint=hook)
    attempt_due()
    request = receiver.wait_for(1)[0]
    forged = {**request.headers, "webhook-signature": "v1," + "A" * 44}
    altered_body = request.body.replace(b"webhook.test", b"run.succeeded")
    other_secret = services.webhook_create(account=account, url=receiver.url, event_types=["run.paused"])[1]
    for body, headers, key in (
        (request.body, forged, secret),
        (altered_body, request.headers, secret),
        (request.body, {**request.headers, "webhook-id": "msg_other"}, secret),
        (request.body, request.headers, other_secret),
    ):
        with pytest.raises(WebhookVerificationError):
            Webhook(key).verify(body, headers)


def test_the_secret_is_encrypted_at_rest_and_never_in_logs_events_or_errors(
    account: Account,
    computer: Computer,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    api: Any,
    runner_key: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    created = api.post("/api/webhooks", {"url": receiver.url, "event_types": ALL_TYPES}, key=runner_key).json()
    secret = created["secret"]
    hook = WebhookEndpoint.objects.get(pk=created["webhook"]["webhook_id"])
    rotated = api.post(f"/api/webhooks/{hook.id}/rotate-secret", {}, key=runner_key).json()["secret"]
    receiver.statuses = [500]
    paused_run(account, computer)
    attempt_due()
    api.post(f"/api/webhooks/{hook.id}/test", key=runner_key)
    attempt_due()
    raw_secrets = [secret.removeprefix("whsec_"), rotated.removeprefix("whsec_")]
    with connection.cursor() as cursor:
        for table in ("webhooks_webhooksecret", "webhooks_webhookendpoint", "webhooks_webhookevent", "webhooks_webhookdelivery", "runs_runevent"):
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - fixed table names
            dump = repr(cursor.fetchall())
            for raw in raw_secrets:
                assert raw not in dump, table
    assert WebhookSecret.objects.filter(endpoint=hook).count() == 2
    answers = [
        api.get("/api/webhooks", runner_key).content,
        api.get(f"/api/webhooks/{hook.id}", runner_key).content,
        api.get(f"/api/webhooks/{hook.id}/deliveries", runner_key).content,
    ]
    seen = "\n".join([caplog.text, *(a.decode() for a in answers), *(r.body.decode() for r in receiver.requests)])
    for raw in raw_secrets:
        assert raw not in seen
    assert "HTTP 500." in caplog.text  # the failure was logged, in RAM's words


def test_the_scrape_shows_pending_deliveries_and_how_overdue_they_are(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str]
) -> None:
    paused_run(account, computer)  # run.queued and run.paused wait for a worker
    WebhookDelivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=90))
    text = scrape().decode()
    assert "ram_webhook_deliveries_pending 2.0" in text
    overdue = float(text.split("\nram_webhook_delivery_overdue_seconds ")[1].split()[0])
    assert 90 <= overdue < 120
    attempt_due()
    assert "ram_webhook_deliveries_pending 0.0" in scrape().decode()


def test_the_keys_at_rest_rotate_and_a_secret_that_no_longer_decrypts_fails_the_attempt(
    account: Account, computer: Computer, endpoint: tuple[WebhookEndpoint, str], receiver: Receiver, settings: Any
) -> None:
    hook, secret = endpoint
    old_keys = list(settings.RAM_WEBHOOK_SECRET_KEYS)
    settings.RAM_WEBHOOK_SECRET_KEYS = [Fernet.generate_key().decode(), *old_keys]  # a new key first: rotation
    services.webhook_test_send(endpoint=hook)
    attempt_due()
    Webhook(secret).verify(receiver.wait_for(1)[0].body, receiver.requests[0].headers)
    settings.RAM_WEBHOOK_SECRET_KEYS = [Fernet.generate_key().decode()]  # the old key dropped too early
    services.webhook_test_send(endpoint=hook)
    attempt_due()
    failed = WebhookDelivery.objects.filter(status="pending").get()
    assert failed.attempts == 1 and "does not decrypt" in failed.last_error
    assert len(receiver.requests) == 1
