"""The real StdioServer run in-process on a pipe: write one line, read the lines it answers, with timeouts.

Cheaper than a subprocess and just as real about framing, concurrency and ordering; the
subprocess smoke tests use conftest's StdioProcess instead.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from typing import Any

from mcp_server.core.protocol import Dispatcher
from mcp_server.transports.stdio import StdioServer

TIMEOUT = 10.0
Json = dict[str, Any]


class _QueueWire:
    """Stands in for the claimed stdout: every line the server writes becomes one parsed message."""

    def __init__(self, sink: queue.Queue[Json]) -> None:
        self.sink = sink
        self._partial = b""

    def write(self, data: bytes) -> int:
        self._partial += data
        *lines, self._partial = self._partial.split(b"\n")
        for line in lines:
            self.sink.put(json.loads(line))
        return len(data)

    def flush(self) -> None:
        pass


class StdioHarness:
    def __init__(self, dispatcher: Dispatcher, *, bearer: str | None = None, workers: int = 16) -> None:
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "rb")
        self._writer = os.fdopen(write_fd, "wb")
        self.out: queue.Queue[Json] = queue.Queue()
        self.server = StdioServer(dispatcher, _QueueWire(self.out), bearer=bearer, workers=workers)  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.server.run, args=(self._reader,), daemon=True)
        self.thread.start()
        self._next_id = 0

    def send(self, message: Json) -> None:
        self._writer.write(json.dumps(message).encode("utf-8") + b"\n")
        self._writer.flush()

    def next(self, timeout: float = TIMEOUT) -> Json:
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the stdio server within {timeout} s") from None

    def request(self, method: str, params: Json | None = None) -> tuple[Json, list[Json]]:
        """Send a request; return its response and every message that came before it."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        before: list[Json] = []
        while True:
            message = self.next()
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message, before
            before.append(message)

    def close(self) -> None:
        """EOF on stdin: the server finishes what it read and returns."""
        self._writer.close()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the stdio server did not stop after EOF"
        self._reader.close()
