"""What travels with one request: its credential, payment, cancellation and notification sink.

Transports create a `RequestContext` per request (nothing about a member outlives it); the
dispatcher fills in the protocol facts; features read it and report progress and logs through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .jsonrpc import MISSING_CAPABILITY, Id, JSONObject, McpError, notification

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class Cancellation:
    """A one-way switch, plus callbacks that stop blocking work (e.g. close a socket) when thrown."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            callback()

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds; True if cancelled meanwhile."""
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` on cancel (at once if already cancelled); returns the unregister function."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        callback()
        return lambda: None


@dataclass(frozen=True, slots=True)
class Payment:
    """An x402 payment somebody else made, carried upstream untouched (PAYMENTS.md).

    `header` is the upstream header name, `value` its exact bytes as text. repr hides the value:
    a payment is a bearer instrument until it expires.
    """

    header: str
    value: str = field(repr=False)
    source: str = "meta"  # "meta" (params._meta) or "header" (an inbound HTTP header)


class PaymentAllowance:
    """A payment is forwarded at most once per inbound message (one HTTP request, one stdio line).

    Every context made for one message shares one allowance, so no path, however many calls a
    message carries, can spend a payment twice: the first claim wins, every later one is told
    why not. An allowance made `closed` refuses every claim with that reason (a batch).
    """

    def __init__(self, closed: str | None = None) -> None:
        self._lock = threading.Lock()
        self._refusal = closed

    def claim(self) -> str | None:
        """None: forward this payment (and no other after it); else why it must not be forwarded."""
        with self._lock:
            refusal = self._refusal
            if refusal is None:
                self._refusal = "a payment is forwarded at most once per request, and one already was"
            return refusal


def _drop(_: JSONObject) -> None:
    return None


@dataclass(slots=True)
class RequestContext:
    """One request's facts. Transports set the first group; the dispatcher sets the second."""

    bearer: str | None = field(default=None, repr=False)
    bearer_source: str = "none"  # "header", "env" or "none"
    payment: Payment | None = None
    payment_conflict: str | None = None  # why the supplied payments were refused, if they were
    payment_allowance: PaymentAllowance = field(default_factory=PaymentAllowance)
    send: Callable[[JSONObject], None] = _drop  # notifications for this request's stream
    cancellation: Cancellation = field(default_factory=Cancellation)
    http_headers: Mapping[str, str] | None = None  # lower-cased names; None on stdio
    response_headers: dict[str, str] = field(default_factory=dict)  # extra HTTP headers (receipts)

    request_id: Id | None = None
    era: str = "legacy"
    version: str = ""
    client_capabilities: JSONObject = field(default_factory=dict)
    progress_token: str | int | None = None
    log_level: str | None = None
    _progress: float | None = None  # the last progress value sent; None until the first one

    def progress(self, message: str, *, total: float | None = None) -> None:
        """Send `notifications/progress` (only when the request asked for it), always increasing."""
        if self.progress_token is None or self.cancellation.is_set:
            return
        self._progress = (self._progress or 0) + 1
        params: JSONObject = {"progressToken": self.progress_token, "progress": self._progress, "message": message}
        if total is not None:
            params["total"] = total
        self.send(notification("notifications/progress", params))

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Explicit progress values (must increase; a value that does not is skipped, not sent).

        The first value may be 0 ("The progress value MUST increase with each notification" binds
        only the ones after it), so a 0-of-100 start is reported, not swallowed.
        """
        if self.progress_token is None or self.cancellation.is_set:
            return
        if self._progress is not None and progress <= self._progress:
            return
        self._progress = progress
        params: JSONObject = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.send(notification("notifications/progress", params))

    def log(self, level: str, data: Any, logger: str = "fairwins-mcp") -> None:
        """Send `notifications/message` when the request (or legacy session) asked for this level."""
        if self.log_level is None or self.cancellation.is_set:
            return
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        self.send(notification("notifications/message", {"level": level, "logger": logger, "data": data}))

    def require_capability(self, name: str) -> None:
        """Refuse, with -32021, work that needs a client capability the client did not declare."""
        if name not in self.client_capabilities:
            raise McpError(
                MISSING_CAPABILITY,
                f"This request needs the client capability '{name}', which the client did not declare",
                {"requiredCapabilities": {name: {}}},
            )
