"""Logging to stderr, configured once, and the one redaction helper for tokens."""

from __future__ import annotations

import logging
import sys
import threading

_secrets: set[str] = set()
_lock = threading.Lock()


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


def configure(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_ScrubSecrets())
    from .redaction import LogFilter  # the credentials of the request being handled, by value

    handler.addFilter(LogFilter())
    root = logging.getLogger("fairwins_mcp")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
