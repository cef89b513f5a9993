"""The gateway's heartbeat: a Ping every 2 s whose Pong is awaited from when the Ping has
left, so a frame in flight on a slow link does not cut the person off.

uvicorn's own keepalive counts the 2 s from when the Ping is written; on a link slower
than a frame every 2 s (445 KB at 150 KB/s takes 3 s) the Ping waits behind the frame
and the connection is ended although the client answers every Ping. This protocol
(uvicorn's ``websockets-sansio`` one, chosen with ``ws=``) counts every byte written
to the connection; while the bytes written before the Ping are still leaving, and keep
leaving, the deadline waits; once they have all left, the Pong has the usual 2 s. A
link on which nothing leaves for 2 s is ended as before, and a Ping that has not left
after ``MAX_PING_BEHIND_SECONDS`` ends the connection whatever the progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import struct
import termios
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

# Linux ioctls: bytes in a socket's send queue not yet sent (SIOCOUTQNSD), or
# not yet acknowledged (SIOCOUTQ, the older and wider count) where the first is missing.
_SIOCOUTQNSD = 0x894B
_SIOCOUTQ = termios.TIOCOUTQ
# How often a Ping waiting behind a frame is looked at (the kernel's drain raises no event).
POLL_SECONDS = 0.25
# A Ping still behind other bytes after this long ends the connection (a 2 MB frame at ~70 KB/s).
MAX_PING_BEHIND_SECONDS = 30.0


def kernel_unsent(transport: Any) -> int:
    """Bytes the kernel holds for the socket under ``transport`` and has not yet sent (0 if unknown)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        fd = sock.fileno()
    except Exception:
        return 0
    if fd < 0:
        return 0
    for request in (_SIOCOUTQNSD, _SIOCOUTQ):
        try:
            return int(struct.unpack("i", fcntl.ioctl(fd, request, b"\0\0\0\0"))[0])
        except OSError:
            continue
    return 0


class CountingTransport:
    """The connection's transport, counting the bytes written through it."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def left(self) -> int:
        """Bytes written that have left the server (neither in the transport's buffer nor the kernel's)."""
        pending = 0
        with contextlib.suppress(Exception):
            pending = int(self._transport.get_write_buffer_size())
        return self.written - pending - kernel_unsent(self._transport)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeartbeatProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol whose Pong deadline starts when the Ping has left."""

    transport: Any

    def connection_made(self, transport: Any) -> None:
        super().connection_made(CountingTransport(transport))  # type: ignore[arg-type]  # a transport proxy

    def send_keepalive_ping(self) -> None:
        super().send_keepalive_ping()
        self.ping_end = int(self.transport.written)  # the Ping's last byte
        self.ping_left_at: float | None = None
        self.progress = (self.loop.time(), int(self.transport.left()))
        if self.pong_timer is not None:
            self.pong_timer.cancel()
            self.pong_timer = self.loop.call_later(
                min(POLL_SECONDS, float(self.ping_timeout or 0)), self.keepalive_timeout
            )

    def keepalive_timeout(self) -> None:
        now = self.loop.time()
        if self.pending_ping_payload is None or self.ping_timeout is None:
            super().keepalive_timeout()
            return
        if self.ping_left_at is None:
            left = int(self.transport.left())
            if left >= self.ping_end:
                self.ping_left_at = now
            else:
                if left > self.progress[1]:
                    self.progress = (now, left)
                stalled = now - self.progress[0] >= self.ping_timeout
                if not stalled and now - self.ping_sent_at < MAX_PING_BEHIND_SECONDS:
                    self.pong_timer = self.loop.call_later(POLL_SECONDS, self.keepalive_timeout)
                    return
                super().keepalive_timeout()  # nothing left for 2 s, or far too long behind: ended
                return
        remaining = self.ping_left_at + self.ping_timeout - now
        if remaining > 0:
            self.pong_timer = self.loop.call_later(min(POLL_SECONDS, remaining), self.keepalive_timeout)
            return
        super().keepalive_timeout()
