"""REST endpoints of webhooks. Thin: parse, one service or selector call, render."""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse

from accounts.auth import READER_KEYS, RUNNER_KEY
from accounts.models import ApiKey
from core.api import Router, choice_query, integer_query, json_response, operation, parse_json_body, webhook
from webhooks import selectors, services
from webhooks.catalogue import EVENT_TYPES, TEST_EVENT_TYPE
from webhooks.contracts import (
    DeliveryListOut,
    DeliveryOut,
    EmptyIn,
    EventPayload,
    SecretOut,
    SecretRotateIn,
    WebhookCreatedOut,
    WebhookCreateIn,
    WebhookListOut,
    WebhookOut,
    WebhookUpdateIn,
)
from webhooks.errors import InvalidDeliveryFilter

router = Router()

STATUSES = ("pending", "delivered", "failed")


def _int_param(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,18}", raw) or not low <= int(raw) <= high:
        raise InvalidDeliveryFilter(f"Invalid request: {name} must be an integer from {low} to {high}.")
    return int(raw)


@operation(summary="List the account's webhook endpoints", auth=READER_KEYS, responses={200: WebhookListOut})
def webhooks_list(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    return json_response(WebhookListOut(webhooks=selectors.webhooks_of(account=key.account)).model_dump(mode="json"))


@operation(
    summary="Register a webhook endpoint; its whsec_ signing secret is in this answer only",
    auth=RUNNER_KEY,
    body=WebhookCreateIn,
    responses={
        201: WebhookCreatedOut,
        400: "Invalid URL (absolute http(s), no credentials, no fragment, not a non-public address) or event types.",
        409: "The account has as many endpoints as it may (RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT).",
    },
)
def webhook_create(request: HttpRequest, *, key: ApiKey, body: WebhookCreateIn) -> HttpResponse:
    endpoint, secret = services.webhook_create(
        account=key.account, url=body.url, event_types=list(body.event_types), description=body.description
    )
    out = WebhookCreatedOut(webhook=selectors.webhook_out(endpoint), secret=secret)
    return json_response(out.model_dump(mode="json"), status=201)


@operation(summary="Read a webhook endpoint", auth=READER_KEYS, responses={200: WebhookOut, 404: "No such webhook."})
def webhook_get(request: HttpRequest, *, key: ApiKey, webhook_id: str) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    return json_response(selectors.webhook_out(endpoint).model_dump(mode="json"))


@operation(
    summary="Change a webhook endpoint's URL, event types, description or enabled flag",
    auth=RUNNER_KEY,
    body=WebhookUpdateIn,
    responses={200: WebhookOut, 400: "Invalid body.", 404: "No such webhook."},
)
def webhook_update(request: HttpRequest, *, key: ApiKey, webhook_id: str, body: WebhookUpdateIn) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    endpoint = services.webhook_update(endpoint=endpoint, changes=body)
    return json_response(selectors.webhook_out(endpoint).model_dump(mode="json"))


@operation(
    summary="Delete a webhook endpoint, its secrets and its delivery log",
    auth=RUNNER_KEY,
    responses={204: "Deleted.", 404: "No such webhook."},
)
def webhook_delete(request: HttpRequest, *, key: ApiKey, webhook_id: str) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    services.webhook_delete(endpoint=endpoint)
    return HttpResponse(status=204)


@operation(
    summary="Rotate the signing secret; the old one keeps signing for overlap_seconds (default 86400)",
    auth=RUNNER_KEY,
    body=SecretRotateIn,
    responses={200: SecretOut, 400: "Invalid body.", 404: "No such webhook."},
)
def webhook_secret_rotate(request: HttpRequest, *, key: ApiKey, webhook_id: str, body: SecretRotateIn) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    secret, until = services.webhook_secret_rotate(endpoint=endpoint, overlap_seconds=body.overlap_seconds)
    return json_response(SecretOut(secret=secret, previous_secret_expires_at=until).model_dump(mode="json"))


@operation(
    summary="Send a webhook.test event to this endpoint (delivered, signed and logged like any event)",
    auth=RUNNER_KEY,
    responses={202: DeliveryOut, 404: "No such webhook."},
)
def webhook_test(request: HttpRequest, *, key: ApiKey, webhook_id: str) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    if request.body.strip():
        parse_json_body(request, EmptyIn)
    delivery = services.webhook_test_send(endpoint=endpoint)
    return json_response(selectors.delivery_out(delivery).model_dump(mode="json"), status=202)


@operation(
    summary="The endpoint's delivery log, newest first: status, attempts, last error",
    auth=READER_KEYS,
    responses={200: DeliveryListOut, 400: "Invalid filter or page.", 404: "No such webhook."},
    query={
        "status": choice_query("pending, delivered or failed", STATUSES),
        "limit": integer_query("1-100, default 20", 1, 100),
        "offset": integer_query("default 0", 0, 10**9),
    },
)
def webhook_deliveries(request: HttpRequest, *, key: ApiKey, webhook_id: str) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    status = request.GET.get("status")
    if status is not None and status not in STATUSES:
        raise InvalidDeliveryFilter("Invalid request: status must be pending, delivered or failed.")
    page = selectors.deliveries_page(
        endpoint=endpoint,
        status=status,
        limit=_int_param(request, "limit", 20, 1, 100),
        offset=_int_param(request, "offset", 0, 0, 10**9),
    )
    return json_response(page.model_dump(mode="json"))


@operation(
    summary="Attempt a failed delivery again (same webhook-id and body)",
    auth=RUNNER_KEY,
    responses={202: DeliveryOut, 404: "No such webhook or delivery.", 409: "The delivery has not failed."},
)
def webhook_delivery_retry(request: HttpRequest, *, key: ApiKey, webhook_id: str, delivery_id: str) -> HttpResponse:
    endpoint = selectors.webhook_for_account(account=key.account, webhook_id=webhook_id)
    delivery = selectors.delivery_for_endpoint(endpoint=endpoint, delivery_id=delivery_id)
    delivery = services.delivery_retry(delivery=delivery)
    return json_response(selectors.delivery_out(delivery).model_dump(mode="json"), status=202)


router.route("/api/webhooks", get=webhooks_list, post=webhook_create)
router.route("/api/webhooks/{webhook_id}", get=webhook_get, patch=webhook_update, delete=webhook_delete)
router.route("/api/webhooks/{webhook_id}/rotate-secret", post=webhook_secret_rotate)
router.route("/api/webhooks/{webhook_id}/test", post=webhook_test)
router.route("/api/webhooks/{webhook_id}/deliveries", get=webhook_deliveries)
router.route("/api/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", post=webhook_delivery_retry)

for _name, _text in EVENT_TYPES.items():
    webhook(_name, summary=_text, body=EventPayload)
webhook(TEST_EVENT_TYPE, summary="Sent by 'send test event' (REST or admin) to the one endpoint tested.", body=EventPayload)
