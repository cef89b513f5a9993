"""Fixtures of the webhook tests: a real receiver on loopback that the egress policy lets through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.tiers import live
from tests.support.webhooks import Receiver, webhook_receiver


@pytest.fixture
@live
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1; webhook egress is opened to its exact host:port, never a range."""
    with webhook_receiver() as running:
        settings.RAM_WEBHOOK_EGRESS_ALLOW = [running.host_port]
        yield running
