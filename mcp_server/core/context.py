"""What travels with a request: credential, payment, cancellation, record.

Transports create a `RequestContext` per request (nothing about a member outlives it), with the
sink its notifications go to; the dispatcher fills in the protocol facts; features read it and
report progress and logs through it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from mcp_server.core import redaction
from mcp_server.ops.records import Record
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import MISSING_CAPABILITY, Id, JSONObject, McpError, notification
from mcp_server.wire.x402 import Payment

if TYPE_CHECKING:
    from mcp_server.core.redaction import Redactor

LOG_LEVELS: Final[tuple[str, ...]] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class PaymentAllowance:
    """The one payment an HTTP request or stdio line may forward.

    Every context made for one message shares one allowance, so no path, however many calls a
    message carries, can spend a payment twice: the first claim wins, every later one is told
    why not. An allowance made `closed` refuses every claim with that reason (a batch).
    """

    def __init__(self, closed: str | None = None) -> None:
        self._lock = threading.Lock()
        self._refusal = closed

    def claim(self) -> str | None:
        """None: forward this payment (and no other after it); else why not."""
        with self._lock:
            refusal = self._refusal
            if refusal is None:
                self._refusal = "a payment is forwarded at most once per request, and one already was"
            return refusal


def _drop(_: JSONObject) -> None:
    return None


@dataclass(slots=True)
class RequestContext:
    """One request's facts: transports fill the first group, protocol the rest."""

    bearer: str | None = field(default=None, repr=False)
    bearer_source: str = "none"  # "header", "signed_in" (an OAuth access token), "env" or "none"
    payment: Payment | None = None
    payment_conflict: str | None = None  # why the supplied payments were refused, if they were
    payment_sent: bool = False  # the payment may have reached the gateway (set just before it is sent)
    # Shared by every context made for one inbound message (batches.py); None: this context is its
    # message's only one, and gets an allowance of its own when it first carries a payment.
    payment_allowance: PaymentAllowance | None = None
    send: Callable[[JSONObject], None] = _drop  # notifications for this request's stream
    cancellation: Cancellation = field(default_factory=Cancellation)
    http_headers: Mapping[str, str] | None = None  # lower-cased names; None on stdio
    response_headers: dict[str, str] = field(default_factory=dict)  # extra HTTP headers (receipts)
    record: Record = field(default_factory=Record)  # the log record and metrics of this message

    request_id: Id | None = None
    era: str = "legacy"
    version: str = ""
    client_capabilities: JSONObject = field(default_factory=dict)
    progress_token: str | int | None = None
    log_level: str | None = None
    _progress: float | None = None  # the last progress value sent; None until the first one
    _redactor: tuple[tuple[str | None, Payment | None], Redactor | None] | None = field(default=None, repr=False)

    def redactor(self) -> Redactor | None:
        """A redactor for this request's exact bearer and payment, if it has any.

        Built on first use and rebuilt only if they change (a payment in `_meta` is added late).
        """
        key = (self.bearer, self.payment)
        if self._redactor is None or self._redactor[0] != key:
            if self.bearer_source == "env" and self.payment is None:
                made = redaction.for_operator_token(self.bearer)  # the process holds that one anyway
            else:
                made = redaction.Redactor(self.bearer, self.payment)
            self._redactor = (key, made if made else None)
        return self._redactor[1]

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` if asked, unless not above the last.

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
        """Send `notifications/message` if this level was asked for."""
        if self.log_level is None or self.cancellation.is_set:
            return
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        self.send(notification("notifications/message", {"level": level, "logger": logger, "data": data}))

    def require_capability(self, name: str) -> None:
        """Refuse (-32021) work needing a client capability not declared."""
        if name not in self.client_capabilities:
            raise McpError(
                MISSING_CAPABILITY,
                f"This request needs the client capability '{name}', which the client did not declare",
                {"requiredCapabilities": {name: {}}},
            )
