"""One HTTP request as the access log sees it, around its MCP record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from mcp_server.ops import records
from mcp_server.ops.metrics import refusal_reason

if TYPE_CHECKING:
    from mcp_server.ops.metrics import ServerMetrics

# The status logged for a request whose client did not have its answer: it left before the answer
# (its call cancelled, or dropped while it waited for a slot), or did not take all of it within the
# answer's deadline. nginx's "client closed request"; no answer carries it, and it is no refusal.
CLIENT_LEFT: Final = 499


@dataclass(slots=True)
class Exchange:
    """An HTTP request's record, from its first byte to its one log line.

    `record` is the request's records.Record: the dispatcher fills in its MCP message (one POST,
    one message); a JSON-RPC batch's messages get records of their own, logged before this one.
    """

    peer: str
    started: float  # time.monotonic() of the request's first byte
    method: str = "-"
    path: str = "-"
    status: int = 0
    logged: bool = False
    record: records.Record = field(default_factory=lambda: records.Record("http"))
    request_size: int | None = None
    response_size: int | None = None
    user_agent: str | None = None
    protocol: str = "HTTP/1.1"
    batch: int | None = None
    error: str | None = None  # a refusal's code (its JSON-RPC error's data.error)

    def log(self, metrics: ServerMetrics | None = None) -> None:
        """Log the request's one record: HTTP facts and MCP message, no credential."""
        if self.logged:
            return
        self.logged = True
        record = self.record
        record.http = records.HttpFacts(
            self.method or "-",
            self.path or "-",
            self.status,
            self.request_size,
            self.response_size,
            self.user_agent,
            self.protocol,
            self.batch,
            None if record.outcome else self.error,
        )
        if metrics is not None and not record.outcome and self.status != CLIENT_LEFT:
            reason = refusal_reason(self.status, self.error)
            if reason is not None:
                metrics.refusals.inc(reason)
        records.finish(record, metrics)
