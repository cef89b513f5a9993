"""The ASGI application: Django over HTTP, the MCP endpoint at /mcp, and the visual gateway over WebSocket."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from core.asgi_handler import get_sync_path_application  # noqa: E402

# Every view is sync: one hop per request instead of Django's five (core/asgi_handler.py).
django_application = get_sync_path_application()

from ramsite.routing import websocket_urlpatterns  # noqa: E402
from runs.mcp import with_mcp  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_mcp(ASGIStaticFilesHandler(django_application)),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
