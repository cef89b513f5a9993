"""Ending sockets from elsewhere: a revoked key ends the sessions it opened, a
deactivated account all of its sessions."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from visual.consumers import account_group, key_group

logger = logging.getLogger(__name__)


def _notify_after_commit(group: str, message: str) -> None:
    def notify() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group, {"type": "visual.end", "message": message})
        except Exception:  # the 2 s binding check ends them anyway
            logger.warning("could not notify visual sessions", exc_info=True)

    transaction.on_commit(notify)


def end_sessions_of_key(sender: Any, key: Any, **kwargs: Any) -> None:
    _notify_after_commit(key_group(str(key.id)), "The API key that opened this session was revoked.")


def end_sessions_of_account(sender: Any, account: Any, **kwargs: Any) -> None:
    _notify_after_commit(account_group(str(account.id)), "The account is inactive.")
