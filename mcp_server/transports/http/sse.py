"""An SSE answer, committed lazily: only the first notification turns a JSON answer into an event stream."""

from __future__ import annotations

import threading
from collections.abc import Callable

from mcp_server.transports.http.response import head
from mcp_server.wire.jsonrpc import Encoded, JSONObject, dumps


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n"


def _event(message: JSONObject | Encoded) -> bytes:
    return _chunk(b"event: message\ndata: " + dumps(message) + b"\n\n")


class Stream:
    """Notifications as they come (progress, logs), then the answer, as `text/event-stream` in chunks.

    `write` sends bytes on the connection and says whether it could; once it could not, the
    client is gone and nothing more is written.
    """

    def __init__(self, write: Callable[[bytes], bool], extra: dict[str, str], *, close: bool = False) -> None:
        self._write = write
        self._extra = extra
        self.close = close  # the connection closes after the stream (the server is draining)
        self.started = False
        self.broken = False
        self._lock = threading.Lock()

    def _send(self, data: bytes) -> None:
        if not self.broken and not self._write(data):
            self.broken = True

    def send(self, message: JSONObject) -> None:
        with self._lock:
            if self.broken:
                return
            if not self.started:
                self.started = True
                extra = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **self._extra}
                self._send(head(200, None, content_type="text/event-stream", extra=extra, close=self.close))
            self._send(_event(message))

    def finish(self, message: JSONObject | Encoded | None) -> None:
        with self._lock:
            if message is not None:
                self._send(_event(message))
            self._send(b"0\r\n\r\n")
