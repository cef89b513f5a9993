"""Ending sockets from elsewhere: a revoked key ends the sessions it opened."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from visual.consumers import key_group

logger = logging.getLogger(__name__)


def end_sessions_of_key(sender: Any, key: Any, **kwargs: Any) -> None:
    def notify() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(
                key_group(str(key.id)), {"type": "visual.end", "message": "The API key that opened this session was revoked."}
            )
        except Exception:  # the 2 s binding check ends them anyway
            logger.warning("could not notify visual sessions of a revoked key", exc_info=True)

    transaction.on_commit(notify)
