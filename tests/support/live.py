"""A real uvicorn serving the project's ASGI app on a loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from channels.layers import channel_layers

from ramsite.management.commands.run_embedded import uvicorn_options


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_asgi(app: Any = None, port: int = 0, **options: Any) -> Iterator[str]:
    """Serve ``app`` (default: ramsite.asgi) with the production uvicorn flags; yields the origin."""
    if app is None:
        # Importing ramsite.asgi builds the served app (its middleware chain, a RAM_WEB_THREADS pool)
        # from the settings of that moment: only when a server starts, never at collection.
        from ramsite.asgi import application as app  # noqa: PLC0415 - builds the app when first served
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    global _SERVING
    config = uvicorn.Config(app, **{**uvicorn_options(), "log_level": "warning", **options})
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    _SERVING += 1
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        _SERVING -= 1
        if not _SERVING:
            _channel_layers_forget()


# Live servers of this test process now serving (each on an event loop of its own).
_SERVING = 0


def _channel_layers_forget() -> None:
    """Drop the process's channel layer instances once no live server is left: a Redis layer keeps
    per-event-loop state (its receive lock, bound to the loop of the first receive still pending
    when a server's loop stopped), so the next server, on a new loop, gets instances of its own."""
    channel_layers.backends.clear()
