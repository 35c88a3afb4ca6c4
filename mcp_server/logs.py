"""Logging to stderr, configured once: text for a terminal or one JSON object per line, and token redaction."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any, Final

_secrets: set[str] = set()
_lock = threading.Lock()

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


def configure(level: str = "info", fmt: str = "text", trace_project: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(trace_project) if fmt == "json" else TextFormatter())
    handler.addFilter(_ScrubSecrets())
    root = logging.getLogger("fairwins_mcp")
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
