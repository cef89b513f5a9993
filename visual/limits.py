"""The gateway's transport limits (the spec's numbers).

Sockets, pending tickets and ``max_fps`` are configurable in settings
(``RAM_VISUAL_MAX_SOCKETS``, ``RAM_VISUAL_MAX_PENDING_TICKETS``,
``RAM_VISUAL_MAX_FPS``); the 16,000-byte control message bound is uvicorn's
``ws_max_size`` (closes with 1009) and the 2 s Ping its ``ws_ping_interval``, its Pong
awaited from when the Ping has left (``visual/heartbeat.py``).
"""

SKIP_FRAMES_AT_PENDING_BYTES = 1_000_000
# A frame is written only once what is pending (the server's buffer and what the kernel
# has not yet sent) is below this: at most one frame waits behind the socket, so a
# Ping or an ``ack`` is never stuck behind seconds of frames on a slow link.
NEXT_FRAME_BELOW_PENDING_BYTES = 64 * 1024
# How often a frame that waits for the socket to drain looks again (no event says so).
DRAIN_POLL_SECONDS = 0.02
TERMINATE_ABOVE_PENDING_BYTES = 4_000_000
# A link too slow for the page (a ram-notices-v1 ``slow_link`` notice): this many frames in a
# row each waited this long for the socket; frames leaving this promptly as often end it.
SLOW_LINK_FRAME_WAIT_SECONDS = 2.0
PROMPT_FRAME_WAIT_SECONDS = 0.5
SLOW_LINK_FRAMES = 2
MAX_QUEUED_INPUTS = 16
MAX_MESSAGES_PER_SECOND = 100
CYCLE_SECONDS = 2.0
MAX_CONTROL_MESSAGE_BYTES = 16_000
SESSION_SECONDS = 900
TICKET_BYTES = 32  # 256 bits -> 43 base64url characters
