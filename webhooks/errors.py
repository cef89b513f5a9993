"""Named errors of webhooks."""

from core.errors import Conflict, InvalidInput, NotFound


class WebhookNotFound(NotFound):
    code = "webhook.not_found"
    message_default = "No such webhook endpoint."


class WebhookUrlRefused(InvalidInput):
    code = "webhook.url_refused"
    message_default = "Invalid request: the webhook URL is not allowed."


class WebhookLimitReached(Conflict):
    code = "webhook.limit_reached"
    message_default = "The account has as many webhook endpoints as it may."


class InvalidDeliveryFilter(InvalidInput):
    code = "webhook.invalid_filter"


class DeliveryNotFailed(Conflict):
    code = "webhook.delivery_not_failed"
    message_default = "Only a failed delivery can be attempted again; this one is pending or delivered."
