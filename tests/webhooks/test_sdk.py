"""The Python SDK against a live server: manage an endpoint, send a test event, verify
what the receiver got with ``verify_webhook``, read the delivery log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ram_sdk import RamApiError, RamClient, verify_webhook

from tests.support.tiers import live
from tests.support.webhooks import Receiver
from webhooks import services
from webhooks.models import WebhookDelivery


@pytest.fixture
@live
def ram(live_origin: str, runner_key: str) -> Iterator[RamClient]:
    with RamClient(live_origin, credential=lambda: runner_key) as client:
        yield client


def test_the_sdk_manages_an_endpoint_and_verifies_its_test_event(ram: RamClient, receiver: Receiver) -> None:
    created = ram.webhook_create(url=receiver.url, event_types=["run.paused", "run.failed"], description="sdk")
    webhook_id, secret = created["webhook"]["webhook_id"], created["secret"]
    assert ram.webhooks_list()["webhooks"] == [created["webhook"]]
    queued = ram.webhook_test(webhook_id)
    assert queued["status"] == "pending"
    services.delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)  # what the worker does
    request = receiver.wait_for(1)[0]
    event = verify_webhook(secret, request.body, request.headers)
    assert event["type"] == "webhook.test" and event["data"] == {"webhook_id": webhook_id}
    log = ram.webhook_deliveries(webhook_id, status="delivered")
    assert log["count"] == 1 and log["deliveries"][0]["event_id"] == request.headers["webhook-id"]
    rotated = ram.webhook_rotate_secret(webhook_id, overlap_seconds=60)
    assert rotated["secret"] != secret and rotated["previous_secret_expires_at"]
    assert ram.webhook_update(webhook_id, enabled=False)["enabled"] is False
    assert ram.webhook_get(webhook_id)["enabled"] is False
    assert ram.webhook_delete(webhook_id) is None
    with pytest.raises(RamApiError) as gone:
        ram.webhook_get(webhook_id)
    assert gone.value.status == 404
