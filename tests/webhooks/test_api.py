"""The webhooks REST API: register (the secret shown once), read, change, delete,
rotate, send a test event, read the delivery log; closed bodies, account scoping,
key kinds, and the documented error shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from accounts.models import Account, ApiKey
from webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookSecret

URL = "https://hooks.example.com/ram?token=receiver-token"


def patch(api: Any, path: str, body: Any, key: str) -> Any:
    return api.client.patch(path, data=json.dumps(body), content_type="application/json", headers={"Authorization": f"Bearer {key}"})


def delete(api: Any, path: str, key: str) -> Any:
    return api.client.delete(path, headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def created(api: Any, runner_key: str) -> dict[str, Any]:
    answer = api.post("/api/webhooks", {"url": URL, "event_types": ["run.paused", "run.failed"], "description": "CI"}, key=runner_key)
    assert answer.status_code == 201, answer.content
    return dict(answer.json())


def test_registering_answers_the_endpoint_and_its_secret_once(api: Any, runner_key: str, created: dict[str, Any]) -> None:
    webhook, secret = created["webhook"], created["secret"]
    assert secret.startswith("whsec_") and len(secret) == len("whsec_") + 44
    assert webhook["url"] == URL and webhook["event_types"] == ["run.paused", "run.failed"]
    assert webhook["enabled"] is True and webhook["description"] == "CI" and webhook["previous_secret_expires_at"] is None
    for answer in (api.get("/api/webhooks", runner_key), api.get(f"/api/webhooks/{webhook['webhook_id']}", runner_key)):
        assert answer.status_code == 200
        assert secret not in answer.content.decode() and "whsec_" not in answer.content.decode()
    assert api.get("/api/webhooks", runner_key).json()["webhooks"] == [webhook]


@pytest.mark.parametrize(
    "body",
    [
        {"url": URL, "event_types": ["run.paused"], "secret": "whsec_mine"},  # unknown field
        {"url": URL, "event_types": []},
        {"url": URL, "event_types": ["run.paused", "run.paused"]},
        {"url": URL, "event_types": ["run.exploded"]},
        {"url": URL, "event_types": ["webhook.test"]},
        {"url": "ftp://hooks.example.com/x", "event_types": ["run.paused"]},
        {"url": "https://user:pass@hooks.example.com/x", "event_types": ["run.paused"]},
        {"url": "https://hooks.example.com/x#frag", "event_types": ["run.paused"]},
        {"url": "hooks.example.com/x", "event_types": ["run.paused"]},
        {"url": "https://hooks.example.com:99999/x", "event_types": ["run.paused"]},
        {"url": "https://hooks.example.com/" + "a" * 2100, "event_types": ["run.paused"]},
        {"url": "http://127.0.0.1:8080/x", "event_types": ["run.paused"]},
        {"url": "http://localhost/x", "event_types": ["run.paused"]},
        {"url": "http://[::1]/x", "event_types": ["run.paused"]},
        {"url": "http://169.254.169.254/latest", "event_types": ["run.paused"]},
        {"url": "http://10.0.0.8/x", "event_types": ["run.paused"]},
        {"url": "http://[::ffff:0:7f00:1]/x", "event_types": ["run.paused"]},  # IPv4-translated loopback
        {"url": "http://[::ffff:0:a9fe:a9fe]/latest", "event_types": ["run.paused"]},  # ... the metadata address
        {"url": "http://[2606:4700::5efe:a00:8]/x", "event_types": ["run.paused"]},  # ISATAP carrying 10.0.0.8
        {"url": URL, "event_types": ["run.paused"], "description": "x" * 201},
    ],
)
def test_bad_bodies_are_refused_and_change_nothing(api: Any, runner_key: str, body: dict[str, Any]) -> None:
    answer = api.post("/api/webhooks", body, key=runner_key)
    assert answer.status_code == 400, answer.content
    assert set(answer.json()) == {"error"}
    assert not WebhookEndpoint.objects.exists()


def test_a_loopback_receiver_is_allowed_only_by_the_setting(api: Any, runner_key: str, settings: Any) -> None:
    settings.RAM_WEBHOOK_EGRESS_ALLOW = ["127.0.0.1:8080"]
    assert api.post("/api/webhooks", {"url": "http://127.0.0.1:8080/x", "event_types": ["run.paused"]}, key=runner_key).status_code == 201
    assert api.post("/api/webhooks", {"url": "http://127.0.0.1:8081/x", "event_types": ["run.paused"]}, key=runner_key).status_code == 400


def test_updating_changes_only_the_given_fields(api: Any, runner_key: str, created: dict[str, Any]) -> None:
    path = f"/api/webhooks/{created['webhook']['webhook_id']}"
    answer = patch(api, path, {"enabled": False, "event_types": ["run.succeeded"]}, runner_key)
    assert answer.status_code == 200, answer.content
    assert answer.json()["enabled"] is False and answer.json()["event_types"] == ["run.succeeded"]
    assert answer.json()["url"] == URL and answer.json()["description"] == "CI"
    for bad in ({"enabled": "no"}, {"enabled": 0}, {"url": "http://10.1.1.1/"}, {"colour": "red"}, {"event_types": []}):
        refused = patch(api, path, bad, runner_key)
        assert refused.status_code == 400, bad
    assert api.get(path, runner_key).json() == answer.json()


def test_another_accounts_webhook_is_not_found_and_a_task_observer_only_reads(
    api: Any, created: dict[str, Any], make_account: Callable[..., Account], make_key: Callable[..., str], observer_key: str
) -> None:
    other = make_key(make_account("Other"))
    webhook_id = created["webhook"]["webhook_id"]
    path = f"/api/webhooks/{webhook_id}"
    assert api.get(path, other).status_code == 404
    assert api.get("/api/webhooks", other).json() == {"webhooks": []}
    assert patch(api, path, {"enabled": False}, other).status_code == 404
    assert delete(api, path, other).status_code == 404
    assert api.post(f"{path}/test", key=other).status_code == 404
    assert api.get(f"{path}/deliveries", other).status_code == 404
    assert api.get("/api/webhooks/not-a-uuid", other).status_code == 404
    assert api.get(path, observer_key).status_code == 200
    assert api.get(f"{path}/deliveries", observer_key).status_code == 200
    assert api.post("/api/webhooks", {"url": URL, "event_types": ["run.paused"]}, key=observer_key).status_code == 403
    assert patch(api, path, {"enabled": False}, observer_key).status_code == 403
    assert api.post(f"{path}/rotate-secret", {}, key=observer_key).status_code == 403
    assert api.post(f"{path}/test", key=observer_key).status_code == 403
    assert api.get("/api/webhooks").status_code == 401
    assert WebhookEndpoint.objects.get().is_active is True


def test_rotating_gives_a_new_secret_and_keeps_the_old_one_signing_for_the_overlap(
    api: Any, runner_key: str, created: dict[str, Any]
) -> None:
    path = f"/api/webhooks/{created['webhook']['webhook_id']}"
    answer = api.post(f"{path}/rotate-secret", {"overlap_seconds": 600}, key=runner_key)
    assert answer.status_code == 200, answer.content
    assert answer.json()["secret"].startswith("whsec_") and answer.json()["secret"] != created["secret"]
    until = answer.json()["previous_secret_expires_at"]
    assert until is not None and api.get(path, runner_key).json()["previous_secret_expires_at"] == until
    assert api.post(f"{path}/rotate-secret", {"overlap_seconds": -1}, key=runner_key).status_code == 400
    assert api.post(f"{path}/rotate-secret", {"overlap_seconds": True}, key=runner_key).status_code == 400
    now = api.post(f"{path}/rotate-secret", {"overlap_seconds": 0}, key=runner_key)
    assert now.json()["previous_secret_expires_at"] is None
    assert WebhookSecret.objects.count() == 1  # every earlier secret stopped signing at once


def test_a_test_event_is_queued_and_shown_in_the_delivery_log(api: Any, runner_key: str, created: dict[str, Any]) -> None:
    path = f"/api/webhooks/{created['webhook']['webhook_id']}"
    answer = api.post(f"{path}/test", key=runner_key)
    assert answer.status_code == 202, answer.content
    delivery = answer.json()
    assert delivery["event_type"] == "webhook.test" and delivery["status"] == "pending" and delivery["attempts"] == 0
    assert delivery["event_id"].startswith("msg_") and delivery["max_attempts"] >= 8
    assert api.post(f"{path}/test", {"extra": 1}, key=runner_key).status_code == 400
    log = api.get(f"{path}/deliveries", runner_key, limit="1")
    assert log.status_code == 200
    assert log.json() == {"deliveries": [delivery], "count": 1, "next_offset": None}
    assert api.get(f"{path}/deliveries", runner_key, status="delivered").json()["count"] == 0
    assert api.get(f"{path}/deliveries", runner_key, status="lost").status_code == 400
    assert api.get(f"{path}/deliveries", runner_key, limit="0").status_code == 400
    # Only a failed delivery may be attempted again.
    retry = f"{path}/deliveries/{delivery['delivery_id']}/retry"
    assert api.post(retry, key=runner_key).status_code == 409
    WebhookDelivery.objects.update(status="failed", attempts=11, next_attempt_at=None)
    again = api.post(retry, key=runner_key)
    assert again.status_code == 202 and again.json()["status"] == "pending" and again.json()["attempts"] == 0
    assert again.json()["event_id"] == delivery["event_id"]


def test_deleting_removes_the_endpoint_its_secrets_and_its_log(api: Any, runner_key: str, created: dict[str, Any]) -> None:
    path = f"/api/webhooks/{created['webhook']['webhook_id']}"
    api.post(f"{path}/test", key=runner_key)
    assert delete(api, path, runner_key).status_code == 204
    assert api.get(path, runner_key).status_code == 404
    assert not WebhookSecret.objects.exists() and not WebhookDelivery.objects.exists()


def test_an_account_has_at_most_the_configured_number_of_endpoints(api: Any, runner_key: str, settings: Any) -> None:
    settings.RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = 2
    for _ in range(2):
        assert api.post("/api/webhooks", {"url": URL, "event_types": ["run.paused"]}, key=runner_key).status_code == 201
    refused = api.post("/api/webhooks", {"url": URL, "event_types": ["run.paused"]}, key=runner_key)
    assert refused.status_code == 409 and "delete one first" in refused.json()["error"]


def test_the_openapi_document_describes_the_webhook_endpoints(api: Any) -> None:
    document = api.get("/api/openapi.json").json()
    assert {"post", "get"} <= set(document["paths"]["/api/webhooks"])
    assert {"get", "patch", "delete"} == set(document["paths"]["/api/webhooks/{webhook_id}"])
    assert "WebhookCreatedOut" in document["components"]["schemas"]
    assert ApiKey.Kind.RUNNER in document["paths"]["/api/webhooks"]["post"]["description"]
