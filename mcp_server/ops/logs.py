"""Logging to stderr, configured once and redacted: text or JSON lines."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import select
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, Final, Protocol

from mcp_server.ops import signals

_secrets: set[str] = set()
_lock = threading.Lock()
# The process id every JSON record carries as `pid`, once several processes write to one stderr
# (--workers: mark_pid); None in a process serving alone, whose records need not say which.
_pid: int | None = None

# How long a log line may wait before it is written. One record per message would otherwise cost
# a system call per message, on the thread that has just answered it.
FLUSH_AFTER: Final = 0.1
MAX_WAITING: Final = 4 * 1024 * 1024  # bytes of lines queued while stderr is not read; beyond, dropped
# `extra=` for a line that must not wait behind the queue: written by the thread that logs it when
# stderr takes it at once, else by the writer next, before the access records still waiting to be
# formatted (a crowd queues thousands). For the lines an operator acts on, such as `stopping` after
# a signal. Its own time stamp keeps it true.
AHEAD: Final = {"fairwins_ahead": True}
FORMAT_SLICE: Final = 256  # queued lines formatted and written at a time
# A write to a pipe of at most this many bytes is never interleaved with another process's: under
# --workers every process writes the one stderr, so lines go in writes of whole lines this long.
if sys.platform == "win32":
    ATOMIC: Final = 512  # no PIPE_BUF there, and no workers either
else:
    ATOMIC: Final = select.PIPE_BUF
RECORD_SIZE: Final = 1024  # what a queued per-message record counts for (about its memory) until it is formatted

# Python level → Cloud Logging's LogSeverity names.
SEVERITY: Final = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}


def redact(token: str | None) -> str:
    """`fw1.…abcd`: the most of a token a log line or an error may show."""
    if not token:
        return "(none)"
    prefix = "fw1." if token.startswith("fw1.") else ""
    return f"{prefix}…{token[-4:]}" if len(token) > 8 else f"{prefix}…"


def register_secret(value: str) -> None:
    """A value the log filter scrubs wherever it appears (belt and braces)."""
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def scrub(text: str) -> str:
    """`text` with every registered secret replaced by its redacted form."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, redact(secret))
    return text


class _ScrubSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets:
            message = record.getMessage()
            scrubbed = scrub(message)
            if scrubbed != message:
                record.msg, record.args = scrubbed, None
        return True


# ---- the request being handled (a context variable: a task's on the loop, a thread's elsewhere) --


class Scrubber(Protocol):
    def scrub(self, text: str) -> str: ...


class Credentials(Protocol):
    """A request as the log filter sees it (a core.context.RequestContext)."""

    def redactor(self) -> Scrubber | None: ...


_request: contextvars.ContextVar[Credentials | None] = contextvars.ContextVar("fairwins_mcp_request", default=None)


def bind_request(ctx: Credentials) -> contextvars.Token[Credentials | None]:
    """Scrub ctx's values from the records and quoted text of this context.

    From now until `unbind_request`: the running task's on the loop, else this thread's.
    """
    return _request.set(ctx)


def unbind_request(token: contextvars.Token[Credentials | None]) -> None:
    _request.reset(token)


@contextlib.contextmanager
def request_bound(ctx: Credentials) -> Iterator[None]:
    """`bind_request` for the length of a with block."""
    token = bind_request(ctx)
    try:
        yield
    finally:
        unbind_request(token)


def request_scrubber() -> Scrubber | None:
    """The scrubber of the request handled in this context, if it has one."""
    ctx = _request.get()
    return None if ctx is None else ctx.redactor()


class RequestFilter(logging.Filter):
    """Scrubs a record made while a request is handled, traceback and all.

    A record that changes gets its traceback folded into its message (and exc_info cleared), so
    every formatter, text or JSON, writes the scrubbed text and none formats the original again.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = request_scrubber()
        if redactor is None:
            return True
        message = record.getMessage()
        extra = ""
        if record.exc_info and record.exc_info[1] is not None:
            extra += "\n" + logging.Formatter().formatException(record.exc_info)
        if record.stack_info:
            extra += "\n" + record.stack_info
        original = message + extra
        scrubbed = redactor.scrub(original)
        if scrubbed is not original:
            record.msg, record.args = scrubbed, None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message`, the time formatted once per second."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second = -1
        self._stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        # logging.Formatter.format, less its generality: one line is written per MCP message.
        text = f"{self.formatTime(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            text = f"{text}\n{self.formatStack(record.stack_info)}"
        return text

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the field names Cloud Logging reads.

    Those are `severity`, `message`, `time`, `httpRequest` and `logging.googleapis.com/…`; a
    per-message record adds its own fields.
    """

    def __init__(self, trace_project: str | None = None) -> None:
        super().__init__()
        self.trace_project = trace_project
        self._second = -1
        self._stamp = ""

    def _time(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._stamp}.{int((created - second) * 1_000_000):06d}Z"

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            # Error Reporting reads a stack trace from the message itself.
            message = f"{message}\n{self.formatException(record.exc_info)}"
        entry: dict[str, Any] = {
            "time": self._time(record.created),
            "severity": SEVERITY.get(record.levelno, "DEFAULT"),
            "message": message,
            "logger": record.name,
        }
        if _pid is not None:
            entry["pid"] = _pid
        mcp_record = record.__dict__.get("mcp_record")
        if mcp_record is not None:
            entry.update(mcp_record.fields())
            trace_id = entry.get("traceId")
            if self.trace_project and trace_id:
                entry["logging.googleapis.com/trace"] = f"projects/{self.trace_project}/traces/{trace_id}"
        # The whole line is scrubbed, not only the message: no field may carry a secret either.
        return scrub(json.dumps(entry, ensure_ascii=True, separators=(",", ":"), default=str))


def whole_lines(data: bytes, most: int) -> Iterator[bytes]:
    """`data` in pieces of whole lines, each at most `most` bytes.

    A longer line is a piece alone. Written one piece a write, lines from several processes sharing
    a pipe never mix: a pipe takes a write of at most PIPE_BUF bytes whole, and a larger one may be
    cut by another's.
    """
    start, end = 0, len(data)
    while end - start > most:
        cut = data.rfind(b"\n", start, start + most)
        if cut < 0:  # one line longer than `most`: no write keeps it whole, so it goes alone
            cut = data.find(b"\n", start + most)
            if cut < 0:
                break
        yield data[start : cut + 1]
        start = cut + 1
    if start < end:
        yield data[start:]


class StderrHandler(logging.Handler):
    """Lines handed to a writer thread, so no serving thread waits on stderr.

    A line is formatted (and scrubbed) on the thread that logs it, then queued; the writer thread
    writes what is queued at most FLUSH_AFTER seconds later, a slice of FORMAT_SLICE lines per
    system call, at once for a warning or worse or on a terminal. A line logged with
    `extra=AHEAD` is written next, before the rest of the queue. Should stderr stop being read (a
    client may ignore it), lines beyond MAX_WAITING bytes are dropped and counted, and the count
    is written when stderr moves again. logging.shutdown (at exit) writes the rest.
    """

    def __init__(self, fd: int, *, interactive: bool = False) -> None:
        super().__init__()
        self.fd = fd
        self.interactive = interactive
        self._closed = False
        self._broken = False
        self._owns_fd = True  # until close() closes it
        self._fresh()
        _HANDLERS.add(self)

    def _fresh(self) -> None:
        """Nothing queued and no writer thread: as made, or in a child just forked.

        In a child (--workers) no writer thread came along and a lock may be held; lines the
        parent had queued are the parent's to write.
        """
        self._cond = threading.Condition(threading.Lock())
        self._write_lock = threading.Lock()  # one write at a time on fd: a line never lands inside another
        self._lines: list[str | logging.LogRecord] = []
        self._ahead: list[str] = []  # lines written before those queued (AHEAD)
        self._size = 0
        self._dropped = 0
        self._urgent = False
        self._writing = False
        self._thread: threading.Thread | None = None
        self.in_place = False  # written by the thread that logs (a process that must stay single-threaded)

    def write_in_place(self) -> None:
        """From now on, each line is written by the thread that logs it.

        For a process that must fork with no other thread alive (the --workers supervisor).
        """
        self._end_writer()
        with self._cond:
            self.in_place = True
            self._closed = False
            self._thread = None

    def handle(self, record: logging.LogRecord) -> bool:
        """Queue a per-message record (records.py's); the writer formats it.

        It is finished (nothing in it changes any more) and made after its request was handled
        (no request's credentials are bound to the thread then), so its filters and formatter may
        run later, on the writer, in one batch: the thread that answered goes straight back to
        serving. Any other record is filtered and formatted here, at once, as logging does.
        """
        if "mcp_record" in record.__dict__ and not self.in_place and record.levelno < logging.WARNING:
            self._queue(record, RECORD_SIZE, urgent=False)
            return True
        return bool(super().handle(record))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + "\n"
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return
        if self.in_place:
            # One thread logs (write_in_place), so no lock: _write takes the condition itself when
            # stderr is gone, and holding it here would leave that thread hung in its own lock.
            if not self._broken:
                self._write(line.encode("utf-8", "backslashreplace"))
            return
        if record.__dict__.get("fairwins_ahead"):
            if self._write_now(line.encode("utf-8", "backslashreplace")):
                return
            with self._cond:
                if not self._broken:
                    self._ahead.append(line)
                    self._start_writer()
                    self._urgent = True
                    self._cond.notify_all()
            return
        self._queue(line, len(line), urgent=self.interactive or record.levelno >= logging.WARNING)

    def _write_now(self, data: bytes) -> bool:
        """Write `data` on this thread if that cannot wait; False if it might.

        A thread that serves never waits on stderr: so only a line stderr takes whole at once (no
        longer than PIPE_BUF, stderr ready for it, the writer thread not in the middle of a write).
        """
        if sys.platform == "win32":
            return False  # no poll() there, and select() takes sockets only: the writer thread writes it
        if len(data) > select.PIPE_BUF or self._broken or not self._write_lock.acquire(blocking=False):
            return False
        try:
            ready = select.poll()
            ready.register(self.fd, select.POLLOUT)
            if not ready.poll(0):
                return False
            self._write(data)
            return True
        except (OSError, ValueError):
            return False
        finally:
            self._write_lock.release()

    def _start_writer(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fairwins-mcp-log", daemon=True)
            signals.start(self._thread)  # a stop signal must reach the main thread, not this one

    def _line(self, item: str | logging.LogRecord) -> str:
        """A queued item as text: a line already made, or a record formatted."""
        if isinstance(item, str):
            return item
        try:
            return self.format(item) + "\n" if self.filter(item) else ""
        except Exception:
            self.handleError(item)
            return ""

    def _queue(self, item: str | logging.LogRecord, size: int, *, urgent: bool) -> None:
        with self._cond:
            if self._broken:
                return
            if self._size + size > MAX_WAITING:
                self._dropped += 1
                return
            self._lines.append(item)
            self._size += size
            urgent = urgent or self.interactive
            self._start_writer()
            if urgent and not self._urgent:
                self._urgent = True
                self._cond.notify_all()
            elif len(self._lines) == 1:
                self._cond.notify_all()  # the first line waiting: the writer starts its FLUSH_AFTER

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._lines and not self._ahead and not self._dropped and not self._closed:
                    self._cond.wait()
                if not self._lines and not self._ahead and not self._dropped:
                    return  # closed, and nothing left
                deadline = time.monotonic() + FLUSH_AFTER
                while not (self._urgent or self._closed):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)  # more lines gather meanwhile: one write for all of them
                # The batch stays counted in _size until it is written: MAX_WAITING bounds every
                # byte not yet on stderr, not only those still queued behind a blocked write.
                lines, self._lines, held = self._lines, [], self._size
                ahead, self._ahead = self._ahead, []
                dropped, self._dropped = self._dropped, 0
                self._urgent = False
                self._writing = True
            if dropped:
                why = f"{dropped} log lines were dropped: stderr was not being read"
                note = logging.LogRecord("fairwins_mcp.logs", logging.WARNING, "", 0, why, None, None)
                lines.insert(0, self.format(note) + "\n")
            # Formatted a slice at a time: a crowd's backlog takes a while, and a line sent AHEAD
            # meanwhile is written before the next slice, not after the whole backlog.
            for start in range(0, max(len(lines), 1), FORMAT_SLICE):
                if start:
                    with self._cond:
                        ahead, self._ahead = self._ahead, []
                if ahead:
                    with self._write_lock:
                        self._write("".join(ahead).encode("utf-8", "backslashreplace"))
                text = "".join(map(self._line, lines[start : start + FORMAT_SLICE]))
                with self._write_lock:
                    self._write(text.encode("utf-8", "backslashreplace"))
            with self._cond:
                self._size = max(0, self._size - held)  # 0 already if stderr broke meanwhile
                self._writing = False
                self._cond.notify_all()

    def _write(self, data: bytes) -> None:
        try:
            for piece in whole_lines(data, ATOMIC):
                view = memoryview(piece)
                while view:
                    view = view[os.write(self.fd, view) :]
        except OSError:
            with self._cond:  # stderr is closed (the client went away): nothing more can be said there
                self._broken = True
                self._lines, self._size = [], 0

    def flush(self, timeout: float = 5.0) -> None:
        """Wait up to `timeout` s until every line queued so far is written."""
        with self._cond:
            if self._thread is None:
                return
            self._urgent = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._broken or not (self._lines or self._ahead or self._writing), timeout)

    def _end_writer(self) -> None:
        """Write what is queued, then let the writer thread end."""
        self.flush()
        with self._cond:
            self._closed = True  # the writer thread, if any, ends once nothing is left
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)

    def close(self) -> None:
        self._end_writer()
        with self._cond:
            # Once: logging.shutdown closes every handler again at exit, and by then the number
            # may name another file this process opened since.
            owned, self._owns_fd = self._owns_fd, False
        if owned:
            with contextlib.suppress(OSError):
                os.close(self.fd)
        super().close()


_HANDLERS: weakref.WeakSet[StderrHandler] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for handler in list(_HANDLERS):
        handler._fresh()


if sys.platform != "win32":  # Windows has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


def flush() -> None:
    """Write every queued log line (before os._exit, which runs no atexit)."""
    for handler in list(_HANDLERS):
        handler.flush()


def mark_pid() -> None:
    """Name this process (`pid`) in every JSON record from now on (--workers)."""
    global _pid
    _pid = os.getpid()


def write_in_place() -> None:
    """Log lines written in place from now on: no writer thread here."""
    for handler in list(_HANDLERS):
        handler.write_in_place()


def _stderr_handler() -> logging.Handler:
    """A StderrHandler on a dup of fd 2; a plain one where stderr is no file."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return logging.StreamHandler(sys.stderr)  # a test's capture: written as it comes
    return StderrHandler(os.dup(fd), interactive=sys.stderr.isatty())


def configure(level: str = "info", fmt: str = "text", trace_project: str | None = None) -> None:
    handler = _stderr_handler()
    handler.setFormatter(JsonFormatter(trace_project) if fmt == "json" else TextFormatter())
    handler.addFilter(_ScrubSecrets())
    handler.addFilter(RequestFilter())  # the credentials of the request being handled, by value
    root = logging.getLogger("fairwins_mcp")
    for old in root.handlers:
        old.close()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # No formatter here prints the thread, the process or the caller's source line: skipping them
    # keeps a per-message record cheap ("Setting _srcfile to None will prevent findCaller() from
    # being called", logging/__init__.py).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
