"""WebSocket routes (the jpeg-websocket-v1 gateway lives in visual/)."""

from typing import Any

from django.urls import path

from visual.consumers import VisualStreamConsumer

websocket_urlpatterns: list[Any] = [
    path("api/visual/stream", VisualStreamConsumer.as_asgi()),
]
