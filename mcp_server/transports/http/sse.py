"""An SSE answer, begun by the first notification (until then, plain JSON)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from mcp_server.transports.http.response import head
from mcp_server.wire.jsonrpc import Encoded, JSONObject, Part, encode, pieces

Write = Callable[[bytes | memoryview], bool]
_EVENT: Final = b"event: message\ndata: "
_END: Final = b"0\r\n\r\n"  # the chunked body's last chunk


def _event(message: JSONObject | Encoded) -> list[Part]:
    """One event as one chunk, in jsonrpc.encode's pieces: large ones unjoined."""
    parts = encode(message)
    size = len(_EVENT) + sum(len(part) for part in parts) + 2
    chunk = [f"{size:x}\r\n".encode("ascii") + _EVENT, *parts, b"\n\n\r\n"]
    return chunk if size >= 65536 else [b"".join(pieces(chunk))]  # a small event is one write


class Stream:
    """Progress and log notifications, then the answer, as an event stream.

    `write` sends a notification's bytes on the connection and says whether it could; once it
    could not, the client is gone (or not reading) and nothing more is written. The answer is not
    written here: `finish` hands its bytes over, for the connection to write as it writes any
    answer (within the answer's deadline, as fast as the client takes it).
    """

    def __init__(self, write: Write, extra: dict[str, str], *, close: bool = False) -> None:
        self._write = write
        self._extra = extra
        self.close = close  # the connection closes after the stream (the server is draining)
        self.started = False
        self.broken = False
        self._ended = False  # the answer was handed over: nothing may follow the body's end
        self._lock = threading.Lock()

    def _send(self, *parts: Part) -> None:
        for piece in pieces(parts):
            if not self.broken and not self._write(piece):
                self.broken = True

    def send(self, message: JSONObject) -> None:
        with self._lock:
            if self.broken or self._ended:
                return
            if not self.started:
                self.started = True
                extra = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **self._extra}
                self._send(head(200, None, content_type="text/event-stream", extra=extra, close=self.close))
            self._send(*_event(message))

    def finish(self, message: JSONObject | Encoded | None) -> list[Part] | None:
        """The stream's last bytes: the answer's event and the body's end.

        None when the stream broke before them: they would not reach a client that left or
        stopped reading. Nothing is sent on the stream after this.
        """
        with self._lock:
            self._ended = True
            if self.broken:
                return None
            last = _event(message) if message is not None else []
            last.append(_END)
            return last
