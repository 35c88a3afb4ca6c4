"""Logging to stderr, configured once: text for a terminal or one JSON object per line, and token redaction."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any, Final, TextIO

from .watchdog import WATCHDOG

_secrets: set[str] = set()
_lock = threading.Lock()

# How long a line may wait in the stderr buffer. One record per message would otherwise cost a
# system call per message (and, on a pipe, waking its reader each time): the stdio server's
# CPU per call grew by a sixth with records at one write each.
FLUSH_AFTER: Final = 0.1

# Python level → Cloud Logging's LogSeverity names.
SEVERITY: Final = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "CRITICAL",
}


def redact(token: str | None) -> str:
    """`fw1.…abcd`: the most of a token that may ever appear in a log line or an error."""
    if not token:
        return "(none)"
    prefix = "fw1." if token.startswith("fw1.") else ""
    return f"{prefix}…{token[-4:]}" if len(token) > 8 else f"{prefix}…"


def register_secret(value: str) -> None:
    """A value the log filter scrubs wherever it would otherwise appear (belt and braces)."""
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
            scrubbed = message
            for secret in _secrets:
                scrubbed = scrubbed.replace(secret, redact(secret))
            if scrubbed != message:
                record.msg, record.args = scrubbed, None
        return True


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message`, the time formatted once per second, not once per line."""

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
    """One JSON object per line with the field names Cloud Logging reads (`severity`, `message`, `time`,
    `httpRequest`, `logging.googleapis.com/…`); a per-message record adds its own fields."""

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
        mcp_record = record.__dict__.get("mcp_record")
        if mcp_record is not None:
            entry.update(mcp_record.fields())
            trace_id = entry.get("traceId")
            if self.trace_project and trace_id:
                entry["logging.googleapis.com/trace"] = f"projects/{self.trace_project}/traces/{trace_id}"
        # The whole line is scrubbed, not only the message: no field may carry a secret either.
        return scrub(json.dumps(entry, ensure_ascii=True, separators=(",", ":"), default=str))


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Lines written to a block-buffered stream, flushed within FLUSH_AFTER seconds of the first
    line waiting, at once for a warning or worse, and at exit (logging.shutdown flushes handlers)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._flush_pending = False

    def emit(self, record: logging.LogRecord) -> None:
        # Called with the handler's lock held (logging.Handler.handle).
        try:
            self.stream.write(self.format(record) + self.terminator)
            if record.levelno >= logging.WARNING:
                self.flush()
            elif not self._flush_pending:
                self._flush_pending = True
                WATCHDOG.schedule(time.monotonic() + FLUSH_AFTER, self.flush)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        self.acquire()
        try:
            self._flush_pending = False
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stderr is gone (the client closed it): nothing more can be said there
        finally:
            self.release()

    def close(self) -> None:
        self.flush()
        if self.stream is not sys.stderr:
            self.stream.close()
        super().close()


def _stderr() -> TextIO:
    """A stream of its own on fd 2: line by line on a terminal, in blocks otherwise."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stderr  # not a file (a test's capture): written as it comes
    interactive = sys.stderr.isatty()
    return os.fdopen(
        os.dup(fd),
        "w",
        buffering=1 if interactive else 64 * 1024,
        encoding=sys.stderr.encoding or "utf-8",
        errors="backslashreplace",
    )


def configure(level: str = "info", fmt: str = "text", trace_project: str | None = None) -> None:
    handler = StderrHandler(_stderr())
    handler.setFormatter(JsonFormatter(trace_project) if fmt == "json" else TextFormatter())
    handler.addFilter(_ScrubSecrets())
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
