"""Flow control of answers to a client, for HTTP and stdio alike.

A module of its own so that stdio loads these numbers without the HTTP connection (which brings
the gate and the rest of the HTTP server).
"""

from __future__ import annotations

from typing import Final

# Bytes queued for a client that is not reading: past the high mark the answer waits (within its
# deadline) before more is queued, until fewer than the low mark wait.
WRITE_HIGH: Final = 256 * 1024
WRITE_LOW: Final = 64 * 1024
# The most handed to the transport at once: one send() copies at most this, about a quarter of a
# millisecond of the loop's time on loopback.
WRITE_SLICE: Final = 256 * 1024
# Notifications are queued without waiting (the dispatcher sends them as it goes); a client that
# lets this much pile up is not reading, and its notifications stop.
STREAM_BACKLOG: Final = 4 * 1024 * 1024
