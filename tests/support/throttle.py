"""A TCP proxy on loopback that models a slow link toward the client: it reads
what the server sends at a fixed rate through a small receive buffer, and passes
the client's bytes through as they come. Used by the slow-link tests and ``make bench``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import Any


class ThrottleProxy:
    def __init__(self, target_port: int, *, rate: float = 500_000, receive_buffer: int = 64 * 1024) -> None:
        self.target_port = target_port
        self.rate = rate
        self.receive_buffer = receive_buffer
        self.server: asyncio.Server | None = None
        self.port = 0
        self.tasks: set[asyncio.Task[Any]] = set()
        self.bytes_down = 0

    async def __aenter__(self) -> ThrottleProxy:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = int(self.server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            with contextlib.suppress(BaseException):
                await task

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = socket.socket()
        upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        upstream.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_connect(upstream, ("127.0.0.1", self.target_port))
        except OSError:
            upstream.close()
            writer.close()
            return
        self._spawn(self._up(reader, upstream))
        self._spawn(self._down(upstream, writer))

    async def _up(self, reader: asyncio.StreamReader, upstream: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await loop.sock_sendall(upstream, data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    async def _down(self, upstream: socket.socket, writer: asyncio.StreamWriter) -> None:
        """Read the server's bytes no faster than ``rate``: the rest waits in the kernel's buffers."""
        loop = asyncio.get_running_loop()
        next_at = time.monotonic()
        try:
            while data := await loop.sock_recv(upstream, 16 * 1024):
                self.bytes_down += len(data)
                writer.write(data)
                await writer.drain()
                next_at = max(next_at, time.monotonic()) + len(data) / self.rate
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        except OSError:
            pass
        finally:
            upstream.close()
            writer.close()
