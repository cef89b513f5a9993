"""WebSocket routes (the jpeg-websocket-v1 gateway lives in visual/)."""

from typing import Any

websocket_urlpatterns: list[Any] = []
