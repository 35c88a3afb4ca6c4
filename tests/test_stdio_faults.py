"""The stdin reader thread's own failures: each struck where the thread reads, then a collection.

stdin the loop cannot watch (Windows' pipes, a regular file, an in-memory reader) is read by one
thread (`fairwins-mcp-stdin`). A fake reader strikes there: an OSError or a closed file's
ValueError from the read, an exception of no kind expected, the input ending mid-line, bytes that
are not UTF-8, a message handed in one byte at a time. After each: every whole line read before
is answered, the server exits 0, and after two collections nothing is unraisable, no thread died
with an exception, and nothing is logged at ERROR but what a bug must be.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.transports.stdio import StdioServer
from tests.conftest import WAIT

PARSE_ERROR: Final = -32700


def line(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def ping(request_id: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


class Reader:
    """stdin as the reader thread sees it: each read takes the next step, a chunk or an exception; then EOF."""

    def __init__(self, *steps: bytes | BaseException) -> None:
        self.steps = list(steps)

    def read1(self, size: int) -> bytes:
        if not self.steps:
            return b""
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        assert len(step) <= size
        return step

    read = read1


@dataclass
class Seen:
    """What a fault left behind, besides the answers."""

    code: int
    answers: list[dict[str, Any]]
    logged: list[tuple[int, str]] = field(default_factory=list)
    unraisable: list[Any] = field(default_factory=list)
    died: list[Any] = field(default_factory=list)

    def errors(self) -> list[str]:
        return [message for level, message in self.logged if level >= logging.ERROR]


class _Log(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


@contextmanager
def _watching() -> Iterator[tuple[_Log, list[Any], list[Any]]]:
    """The log at INFO (ours and asyncio's), unraisable exceptions and threads that died, meanwhile."""
    handler = _Log()
    loggers = [logging.getLogger("fairwins_mcp"), logging.getLogger("asyncio")]
    levels = [logger.level for logger in loggers]
    unraisable: list[Any] = []
    died: list[Any] = []
    unraisable_hook, thread_hook = sys.unraisablehook, threading.excepthook
    sys.unraisablehook, threading.excepthook = unraisable.append, died.append
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield handler, unraisable, died
    finally:
        sys.unraisablehook, threading.excepthook = unraisable_hook, thread_hook
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def serve(reader: Reader) -> Seen:
    """The real server over `reader` (on a thread of its own, so no signal handler is set), then two collections."""
    wire = io.BytesIO()
    server = StdioServer(Dispatcher(Catalog()), wire)
    codes: list[int] = []
    with _watching() as (log, unraisable, died):
        thread = threading.Thread(target=lambda: codes.append(server.run(reader)), daemon=True)  # type: ignore[arg-type]
        thread.start()
        thread.join(WAIT)
        assert not thread.is_alive(), "run() did not return: the fault left the server waiting for stdin"
        gc.collect()
        gc.collect()
    answers = [json.loads(raw) for raw in wire.getvalue().splitlines()]
    return Seen(codes[0], answers, log.records, unraisable, died)


def ids(seen: Seen) -> list[Any]:
    return [answer.get("id") for answer in seen.answers]


def clean(seen: Seen) -> None:
    assert seen.code == 0
    assert seen.unraisable == [], seen.unraisable
    assert seen.died == [], seen.died


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        (OSError(5, "Input/output error"), "Input/output error"),
        (ValueError("I/O operation on closed file."), "closed file"),
    ],
)
def test_a_read_that_fails_is_the_end_of_input_and_every_line_before_it_is_answered(
    fault: BaseException, why: str
) -> None:
    seen = serve(Reader(ping(1) + ping(2), ping(3), fault, ping(4)))
    clean(seen)
    assert ids(seen) == [1, 2, 3]  # nothing is read past the failure
    assert seen.errors() == []
    assert any("stdin could not be read" in message and why in message for _, message in seen.logged), seen.logged


def test_an_exception_of_no_kind_expected_from_the_read_is_logged_once_as_a_bug_and_ends_the_input() -> None:
    seen = serve(Reader(ping(1), RuntimeError("a reader's bug"), ping(2)))
    clean(seen)
    assert ids(seen) == [1]
    assert len(seen.errors()) == 1 and "stdin" in seen.errors()[0], seen.logged


def test_input_that_ends_mid_line_has_its_last_line_read_whole_or_refused_as_unparseable() -> None:
    seen = serve(Reader(ping(1), b'{"jsonrpc":"2.0","id":2,"method":"ping"}'))
    clean(seen)
    assert ids(seen) == [1, 2]  # a last line whole but for its newline is a request
    cut = serve(Reader(ping(1), b'{"jsonrpc":"2.0","id":2,"meth'))
    clean(cut)
    assert ids(cut) == [1, None] and cut.answers[1]["error"]["code"] == PARSE_ERROR
    assert seen.errors() == [] and cut.errors() == []


def test_bytes_that_are_not_utf8_get_a_parse_error_and_the_next_line_is_served() -> None:
    seen = serve(Reader(b"\xff\xfe\xc3(\n", ping(2), b'{"jsonrpc":"2.0","id":"\xe2\x82"}\n', ping(3)))
    clean(seen)
    assert ids(seen) == [None, 2, None, 3]
    assert [answer["error"]["code"] for answer in seen.answers if answer["id"] is None] == [PARSE_ERROR] * 2
    assert seen.errors() == []


def test_a_message_handed_in_one_byte_at_a_time_is_one_request() -> None:
    data = ping("é€😀") + ping(2)
    seen = serve(Reader(*(data[at : at + 1] for at in range(len(data)))))
    clean(seen)
    assert ids(seen) == ["é€😀", 2]
    assert seen.errors() == []
