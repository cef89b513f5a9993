"""Webhook endpoints in the staff admin, in a real browser: create one (its secret is
shown once, on the page after saving), send a test event with the admin action, see it
delivered, signed, in the delivery log; a non-public URL is refused with a message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.async_api import Page
from standardwebhooks import Webhook

from accounts.models import Account
from tests.e2e.conftest import LeakGuard, orm
from tests.e2e.test_admin import STAFF_PASSWORD, admin_sign_in, save
from tests.support.tiers import live
from tests.support.webhooks import Receiver, webhook_receiver
from webhooks import services
from webhooks.models import WebhookDelivery, WebhookEndpoint

pytestmark = pytest.mark.e2e


@pytest.fixture
def staff(transactional_db: None) -> User:
    return User.objects.create_superuser(username="staff", password=STAFF_PASSWORD, email="")


@pytest.fixture
@live
def receiver(settings: Any) -> Iterator[Receiver]:
    with webhook_receiver() as running:
        settings.RAM_WEBHOOK_EGRESS_ALLOW = [running.host_port]
        yield running


def attempt_due() -> None:
    """What a worker does for each due delivery (the real service, in the test's process)."""
    for delivery_id in WebhookDelivery.objects.filter(status="pending").values_list("id", flat=True):
        services.delivery_attempt(delivery_id=delivery_id)


async def test_staff_registers_an_endpoint_and_sends_a_test_event(
    human_origin: str, page: Page, leak_guard: LeakGuard, staff: User, receiver: Receiver
) -> None:
    leak_guard.watch(STAFF_PASSWORD)
    await orm(lambda: Account.objects.create(name="Globex"))
    await admin_sign_in(page, human_origin)

    # A non-public address is refused with the reason, and nothing is created.
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/add/")
    await page.get_by_label("Account").select_option(label="Globex")
    await page.get_by_label("URL").fill("http://10.0.0.8/hooks")
    await page.get_by_label("run.paused", exact=False).check()
    await save(page)
    await page.get_by_text("non-public address").first.wait_for()
    assert await orm(lambda: WebhookEndpoint.objects.count()) == 0

    await page.get_by_label("URL").fill(f"{receiver.url}?token=t0ken-of-the-receiver")
    await page.get_by_label("Description").fill("Harness")
    await save(page)
    await page.get_by_role("heading", name="Webhook endpoint created").wait_for()
    secret = (await page.locator("code.webhook-secret").inner_text()).strip()
    assert secret.startswith("whsec_")
    leak_guard.watch(secret, secret.removeprefix("whsec_"))
    endpoint = await orm(lambda: WebhookEndpoint.objects.get())
    assert endpoint.event_types == ["run.paused"] and endpoint.description == "Harness" and endpoint.is_active

    # The list elides a URL's query (a receiver may keep its own token there).
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/")
    listed = await page.content()
    assert f"{receiver.url}?…" in listed and "t0ken-of-the-receiver" not in listed

    # The endpoint's page never shows the secret again.
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/{endpoint.pk}/change/")
    assert secret.removeprefix("whsec_") not in await page.content()

    # Send a test event with the admin action.
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/")
    await page.locator(f"input[name='_selected_action'][value='{endpoint.pk}']").check()
    await page.locator("select[name='action']").select_option("send_test_event")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Run").click()
    await page.get_by_text("Sent a webhook.test event").first.wait_for()
    await orm(attempt_due)
    request = receiver.wait_for(1)[0]
    assert Webhook(secret).verify(request.body, request.headers)["type"] == "webhook.test"
    assert request.path == "/hooks/ram?token=t0ken-of-the-receiver"

    # The delivery log, from the endpoint's page.
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/{endpoint.pk}/change/")
    async with page.expect_navigation():
        await page.get_by_role("link", name="1 delivered, 0 pending, 0 failed").click()
    row = page.locator("#result_list tbody tr").first
    await row.get_by_text("webhook.test").wait_for()
    assert "Delivered" in await row.inner_text()
    assert request.headers["webhook-id"] in await row.inner_text()

    # Rotating the secret shows the new one once; both sign until the old one's overlap ends.
    await page.goto(f"{human_origin}/admin/webhooks/webhookendpoint/")
    await page.locator(f"input[name='_selected_action'][value='{endpoint.pk}']").check()
    await page.locator("select[name='action']").select_option("rotate_secret")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Run").click()
    await page.get_by_role("heading", name="Webhook secrets rotated").wait_for()
    rotated = (await page.locator("code.webhook-secret").inner_text()).strip()
    assert rotated.startswith("whsec_") and rotated != secret
    leak_guard.watch(rotated, rotated.removeprefix("whsec_"))
    await orm(lambda: services.webhook_test_send(endpoint=endpoint))
    await orm(attempt_due)
    second = receiver.wait_for(2)[1]
    for key in (secret, rotated):
        Webhook(key).verify(second.body, second.headers)
