"""One record per MCP message: what was asked, how it ended, the time.

A transport makes a `Record` as a message arrives and hands it to the dispatcher on the
RequestContext; the dispatcher fills in the protocol facts, the gateway seam reports each upstream
attempt, and the transport finishes it: counted in the metrics (when they are on) and logged to
stderr as one line. Nothing a member must not see in a log can enter a record: it holds names from
the server's own catalog, codes, statuses, times and ids, never a token, a payment, an argument
value, a gateway body or a member's data. Formatting is lazy: a record no handler emits is never
turned into text.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from mcp_server.ops.tracecontext import Trace, from_carriers
from mcp_server.wire.jsonrpc import Id, Invalid, JSONObject, Notification, Request

if TYPE_CHECKING:
    from mcp_server.ops.metrics import ServerMetrics

access = logging.getLogger("fairwins_mcp.access")

# The MCP methods and notifications this server knows: written as they are, and counted by name.
METHODS: Final = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
NOTIFICATIONS: Final = frozenset(
    {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)
# Why the gateway gave no answer (GatewayFailure causes, not_configured aside).
GATEWAY_CAUSES: Final = (
    "timeout",
    "refused",
    "dns",
    "reset",
    "tls",
    "connection",
    "too_large",
    "unreadable",
    "cancelled",
    "unsendable",
)
# What a record may call a failed call: the kinds of the contract's failure facts (the
# `structuredContent.kind` a client is shown), and two that are not failures there: a price asked of
# an unpaid call, and a price asked again of a paid one. tests/test_records.py holds this to the contract.
FAILURE_KINDS: Final = frozenset(
    {
        # refused here, before anything was sent
        "invalid_arguments",
        "no_token",
        "payment_refused",
        # the gateway could not be asked, or gave no answer
        "gateway_not_configured",
        "unreachable",
        # the gateway answered, and the answer is why the call failed
        "unreadable_answer",
        "undescribed_answer",
        "redirected",
        "token_refused",
        "scope_missing",
        "not_found",
        "rate_limited",
        "unavailable",
        "gateway_error",
        "refused_request",
        "settlement_failed",
        "price",
        "payment_rejected",
    }
)
# Characters kept of a string a client chose (HTTP method, path and User-Agent; JSON-RPC method and
# id; clientInfo name and version), each cut by `clip` as it is written, in either format. The
# longest such value a real client sends is a browser's User-Agent (Chrome's is about 120
# characters); a UUID id is 36, and a client's name, version, method or path is shorter still. With
# every field at the bound a line stays near 2 KiB, and about 10 KiB when every character is one
# JSON escapes as 12 bytes (a JSON line repeats the text form in `message`), whatever was sent.
CLIENT_TEXT: Final = 128
# RFC 8615's prefix: a GET under it is a client's discovery (OAuth mode's resource metadata, where a
# member's sign-in starts), logged at INFO like an MCP request, not at DEBUG like a probe or a scrape.
WELL_KNOWN: Final = "/.well-known/"


class Attempt(NamedTuple):
    """One upstream exchange as a record sees it: status or cause, time, span."""

    status: int | None  # the gateway's HTTP status; None when no answer was had
    cause: str | None  # the GatewayFailure cause when there was no answer
    seconds: float
    span_id: str  # the parent-id the gateway received in `traceparent`
    number: int  # 1, then 2, 3… for retries
    paid: bool
    sent: bool  # whether the request may have reached the gateway


def clip(value: str) -> str:
    """A client-chosen string fit for a log line: printable, CLIENT_TEXT long.

    A cut shows how much was left out: `GETGETGET…(+59872)`.
    """
    if len(value) <= CLIENT_TEXT and value.isprintable():
        return value
    shown = "".join(ch if ch.isprintable() else "?" for ch in value[:CLIENT_TEXT])
    left = len(value) - CLIENT_TEXT
    return f"{shown}…(+{left})" if left > 0 else shown


_PLAIN_METHODS: Final = METHODS | NOTIFICATIONS  # written as they are; any other is checked and quoted
_BARE: Final = re.compile(r'[^\s"=\\]+')


def _logfmt(value: str) -> str:
    """A value as logfmt writes it: bare when it can be, else a JSON string."""
    return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)


@dataclass(slots=True)
class HttpFacts:
    """The HTTP side of a record (Cloud Logging's `httpRequest`).

    It holds no header's value but User-Agent's. Method, path and User-Agent are held as the client
    sent them; `clip` cuts them as they are written.
    """

    method: str
    path: str
    status: int = 0
    request_size: int | None = None
    response_size: int | None = None
    user_agent: str | None = None
    protocol: str = "HTTP/1.1"
    batch: int | None = None  # the number of messages when the body was a JSON-RPC batch
    refusal: str | None = None  # a refusal's code (its body's error.data.error): why it never reached MCP


class Record:
    """One MCP message as the operator sees it (over HTTP, with its request).

    Attributes not set for a message keep the class's defaults: a record is made per message, so
    it is made with as little work as possible.
    """

    ended: float | None = None
    method: str | None = None
    kind: str | None = None  # "tool", "resource" or "prompt"
    name: str | None = None  # from the catalog; "(unknown)" for a name it does not hold
    rpc_id: Id | None = None
    era = ""
    version = ""
    outcome = ""  # result | tool_error | error | cancelled; accepted (a notification); ignored
    code: int | None = None
    failure: str | None = None
    attempts: list[Attempt] | None = None
    paid = False  # an attempt carried a payment
    payment: str | None = None  # set when a payment was refused before it could be carried
    client: JSONObject | None = None  # clientInfo, on initialize (and modern requests)
    http: HttpFacts | None = None
    inbound: tuple[str | None, str | None] | None = None  # HTTP traceparent, tracestate
    text: str | None = None  # the text form, once made (a finished record does not change)
    _trace: Trace | None = None
    _meta: object = None  # the request's params._meta, where a trace may ride (SEP-414)

    def __init__(self, transport: str = "", started: float | None = None) -> None:
        self.transport = transport
        self.started = time.perf_counter() if started is None else started

    # ---- filled in by the dispatcher and the gateway seam ---------------------------------------

    def begin(self, message: object) -> None:
        """Take the message this record is about (the dispatcher, as it starts)."""
        if isinstance(message, Request):
            self.method, self.rpc_id = message.method, message.id
            self._meta = message.params.get("_meta")
        elif isinstance(message, Notification):
            self.method, self.outcome = message.method, "accepted"
        elif isinstance(message, Invalid):
            self.rpc_id, self.outcome = message.id, "error"
            self.code = message.error.get("code")
        else:
            self.outcome = "ignored"  # a response from the client: the server never asks, so it is dropped

    @property
    def trace(self) -> Trace:
        """This request's trace, made on first use: the caller's continued, or new."""
        trace = self._trace
        if trace is None:
            meta, inbound = self._meta, self.inbound
            if inbound is None and not (isinstance(meta, dict) and "traceparent" in meta):
                trace = Trace.start()  # nothing to continue: the common case, kept short
            else:
                headers = inbound or (None, None)
                trace = from_carriers(meta, headers[0], headers[1])
            self._trace = trace
        return trace

    @property
    def traced(self) -> Trace | None:
        """The trace to log: the one in use, or the caller's; None if neither."""
        if self._trace is None:
            meta = self._meta
            if (isinstance(meta, dict) and "traceparent" in meta) or (self.inbound and self.inbound[0] is not None):
                return self.trace
        return self._trace

    def target(self, kind: str, name: str | None) -> None:
        self.kind, self.name = kind, name if name is not None else "(unknown)"

    def attempt(self, attempt: Attempt) -> None:
        """The gateway seam's observer: one upstream exchange ended."""
        if self.attempts is None:
            self.attempts = [attempt]
        else:
            self.attempts.append(attempt)
        if attempt.paid:
            self.paid = True

    def fail(self, kind: str) -> None:
        """Why a call ended as an error: the first reason given stays."""
        if self.failure is None:
            self.failure = kind if kind in FAILURE_KINDS else "other"

    def reply(self, message: object, *, cancelled: bool = False) -> None:
        """How the request ended, from the answer the dispatcher gave."""
        self.ended = time.perf_counter()
        if cancelled:
            self.outcome = "cancelled"
            return
        if not isinstance(message, dict):
            return
        result = message.get("result")
        if result is None:
            error = message.get("error")
            if isinstance(error, dict):
                self.outcome, self.code = "error", error.get("code")
        elif result.get("isError") is True:
            self.outcome = "tool_error"
            if self.failure is None:
                self.failure = "other"  # a tool that did not say why (every tool here does)
        else:
            self.outcome = "result"

    # ---- read by the transports, the metrics and the log ----------------------------------------

    @property
    def seconds(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    @property
    def payment_outcome(self) -> str | None:
        """What became of a carried payment (payments metric); None if none."""
        if self.payment is not None:
            return self.payment
        if not self.paid or not self.attempts:
            return None
        paid = next(a for a in self.attempts if a.paid)
        if paid.status is None:
            return "unknown" if paid.sent else "not_sent"
        if 200 <= paid.status < 300:
            return "accepted"
        return "rejected" if paid.status in (402, 412) else "failed"

    @property
    def severity(self) -> int:
        http = self.http
        if http is None:
            return logging.WARNING if self.code == -32603 else logging.INFO
        if self.code == -32603 or (http.status >= 500 and http.status != 503):
            return logging.WARNING
        if (
            not self.outcome
            and http.method in ("GET", "HEAD")
            and 200 <= http.status < 300
            and not http.path.startswith(WELL_KNOWN)
        ):
            return logging.DEBUG  # /healthz and /metrics: probes and scrapes would drown the rest
        return logging.INFO

    def _client_text(self) -> str | None:
        info = self.client
        if not isinstance(info, dict):
            return None
        name, version = info.get("name"), info.get("version")
        if not isinstance(name, str):
            return None
        return clip(name) + (f"/{clip(version)}" if isinstance(version, str) else "")

    def _rpc_id(self) -> int | str | None:
        """The id as written: an integer short enough, else text cut to the bound."""
        rid = self.rpc_id
        if rid is None:
            return None
        if isinstance(rid, int):
            # One limit (sys.get_int_max_str_digits) bounds the digits json.loads reads and str()
            # writes, so any id a client sent can be written.
            digits = str(rid)
            return rid if len(digits) <= CLIENT_TEXT else clip(digits)
        return clip(rid)

    def __str__(self) -> str:
        """The text form: one logfmt line, after the HTTP request line if any."""
        if self.text is None:
            self.text = self._render()
        return self.text

    def _render(self) -> str:
        parts: list[str] = []
        http = self.http
        if http is not None:
            _http_text(http, parts)
        method = self.method
        if method is not None:
            parts.append(method if method in _PLAIN_METHODS else _logfmt(clip(method)))
        elif self.outcome:
            parts.append("(unreadable)")  # a message with no method the server could read
        if self.kind is not None and self.name is not None:
            parts.append(f"{self.kind}={_logfmt(self.name)}")
        if self.outcome:
            parts.append(f"outcome={self.outcome}")
        if self.code is not None:
            parts.append(f"code={self.code}")
        if self.failure is not None:
            parts.append(f"failure={self.failure}")
        parts.append(f"ms={self.seconds * 1000:.1f}")
        if self.version:
            parts.append(f"rev={self.version}")
        if self.client is not None:
            client = self._client_text()
            if client is not None:
                parts.append(f"client={_logfmt(client)}")
        self._gateway_text(parts)
        rid = self._rpc_id()
        if rid is not None:
            parts.append(f"id={rid}" if isinstance(rid, int) else f"id={_logfmt(rid)}")
        trace = self.traced
        if trace is not None:
            parts.append(f"trace={trace.trace_id} span={trace.span_id}")
        return " ".join(parts)

    def _gateway_text(self, parts: list[str]) -> None:
        """Appends the text form's gateway part: each attempt, and the payment."""
        attempts = self.attempts
        if attempts:
            upstream = ",".join(f"{a.status or a.cause}/{a.seconds * 1000:.1f}ms" for a in attempts)
            parts.append(f"upstream={upstream}")
        payment = self.payment_outcome
        if payment is not None:
            parts.append(f"payment={payment}")

    def fields(self) -> dict[str, Any]:
        """The JSON form's fields besides time, severity and message.

        Named as Cloud Logging names them where it does.
        """
        out: dict[str, Any] = {}
        if self.transport:
            out["transport"] = self.transport
        if self.method is not None:
            out["method"] = clip(self.method)
        if self.kind is not None and self.name is not None:
            out[self.kind] = self.name
        if self.outcome:
            out["outcome"] = self.outcome
        if self.code is not None:
            out["errorCode"] = self.code
        if self.failure is not None:
            out["failure"] = self.failure
        if self.version:
            out["revision"] = self.version
            out["era"] = self.era
        client = self.client
        if isinstance(client, dict) and isinstance(client.get("name"), str):
            out["client"] = {k: clip(client[k]) for k in ("name", "version") if isinstance(client.get(k), str)}
        rid = self._rpc_id()
        if rid is not None:
            out["rpcId"] = rid
        out["durationMs"] = round(self.seconds * 1000, 3)
        if self.attempts:
            out["upstream"] = _upstream_fields(self.attempts)
        payment = self.payment_outcome
        if payment is not None:
            out["payment"] = payment
        trace = self.traced
        if trace is not None:
            out["traceId"] = trace.trace_id
            out["spanId"] = trace.span_id
            if trace.parent_id is not None:
                out["parentSpanId"] = trace.parent_id
            out["traceFrom"] = trace.source
            out["logging.googleapis.com/spanId"] = trace.span_id
            out["logging.googleapis.com/trace_sampled"] = trace.sampled
        http = self.http
        if http is not None:
            _http_fields(http, self.seconds, out)
        return out


def _http_text(http: HttpFacts, parts: list[str]) -> None:
    """Appends the text form's HTTP part: the request line, refusal and batch."""
    parts.append(f"{clip(http.method) or '-'} {clip(http.path) or '-'} {http.status}")
    if http.refusal is not None:
        parts.append(f"refused={http.refusal}")
    if http.batch is not None:
        parts.append(f"batch={http.batch}")


def _upstream_fields(attempts: list[Attempt]) -> list[dict[str, Any]]:
    """The JSON form's `upstream`: one object per gateway attempt."""
    return [
        {
            "attempt": a.number,
            **({"status": a.status} if a.status is not None else {"cause": a.cause}),
            "durationMs": round(a.seconds * 1000, 3),
            "spanId": a.span_id,
        }
        for a in attempts
    ]


def _http_fields(http: HttpFacts, seconds: float, out: dict[str, Any]) -> None:
    """Adds the JSON form's HTTP fields: `httpRequest`, batch and refusal."""
    request: dict[str, Any] = {
        "requestMethod": clip(http.method),
        "requestUrl": clip(http.path),
        "status": http.status,
        "latency": f"{seconds:.6f}s",
        "protocol": http.protocol,
    }
    if http.request_size is not None:
        request["requestSize"] = str(http.request_size)
    if http.response_size is not None:
        request["responseSize"] = str(http.response_size)
    if http.user_agent:
        request["userAgent"] = clip(http.user_agent)
    out["httpRequest"] = request
    if http.batch is not None:
        out["batch"] = http.batch
    if http.refusal is not None:
        out["refusal"] = http.refusal


class _AccessLogRecord(logging.LogRecord):
    """The LogRecord of one message's record, made the short way.

    It is what `logging.LogRecord` would make once `logs.configure` has turned off the thread,
    process and caller fields (none of this server's formatters prints them), without working
    them out each time: one is made per MCP message. Handlers, filters and formatters see an
    ordinary LogRecord (every field in its __dict__, where %-style formats look), whose message is
    the Record itself, turned into text only if a handler formats it.
    """

    def __init__(self, level: int, record: Record) -> None:  # LogRecord.__init__ is not called on purpose
        fields = self.__dict__
        fields.update(_CONSTANT_FIELDS)
        now = time.time()
        fields["msg"] = fields["mcp_record"] = record
        fields["levelno"], fields["levelname"] = level, _LEVEL_NAMES[level]
        fields["created"], fields["msecs"] = now, int((now - int(now)) * 1000) + 0.0
        fields["relativeCreated"] = (now - _STARTED) * 1000


# Everything else LogRecord.__init__ would set, as it sets it with the thread, process and caller
# fields off (what logs.configure does).
_CONSTANT_FIELDS: Final[dict[str, object]] = {
    "name": access.name,
    "args": (),
    "pathname": "(unknown file)",
    "filename": "(unknown file)",
    "module": "(unknown file)",
    "lineno": 0,
    "funcName": "(unknown function)",
    "exc_info": None,
    "exc_text": None,
    "stack_info": None,
    "thread": None,
    "threadName": None,
    "processName": None,
    "process": None,
}
if sys.version_info >= (3, 12):
    _CONSTANT_FIELDS["taskName"] = None  # no asyncio task runs here
_LEVEL_NAMES: Final = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARNING"}
_STARTED: Final[float] = getattr(logging, "_startTime", time.time())  # what relativeCreated counts from


def _short_records() -> bool:
    """Whether a LogRecord made the short way is what logging would make now."""
    return (
        logging.getLogRecordFactory() is logging.LogRecord  # nobody asked for records of their own
        and logging._srcfile is None
        and not (logging.logThreads or logging.logProcesses or logging.logMultiprocessing)
    )


def finish(record: Record, metrics: ServerMetrics | None = None) -> None:
    """Count the record (if metrics are on) and log it (if its logger is on)."""
    if record.ended is None:
        record.ended = time.perf_counter()
    if metrics is not None:
        count(record, metrics)
    level = record.severity
    if access.isEnabledFor(level):
        if _short_records():
            access.handle(_AccessLogRecord(level, record))
        else:
            access.log(level, record, extra={"mcp_record": record})


def count(record: Record, metrics: ServerMetrics) -> None:
    """Add one record to the metrics; every label value is from a fixed set."""
    from mcp_server.ops.metrics import REQUEST_OUTCOMES, STATUS_CLASSES, bounded

    if record.outcome == "accepted":
        metrics.notifications.inc(bounded(record.method, NOTIFICATIONS))
        return
    if record.outcome not in REQUEST_OUTCOMES:
        return  # no request: an HTTP refusal, /healthz or /metrics (the transport counts refusals)
    method = bounded(record.method, METHODS) if record.method is not None else "invalid"
    outcome = record.outcome
    metrics.requests.inc(method, outcome)
    metrics.request_seconds.observe(record.seconds, method)
    if record.kind == "tool":
        tool_outcome = (record.failure or "other") if outcome == "tool_error" else outcome
        metrics.tool_calls.inc(bounded(record.name, metrics.tools, "unknown"), tool_outcome)
    if record.method == "initialize" and outcome == "result":
        from mcp_server.wire.versions import SUPPORTED_VERSIONS

        metrics.initializations.inc(bounded(record.version, SUPPORTED_VERSIONS))
    for attempt in record.attempts or ():
        metrics.gateway_seconds.observe(attempt.seconds)
        if attempt.status is not None:
            metrics.gateway_responses.inc(bounded(f"{attempt.status // 100}xx", STATUS_CLASSES))
        else:
            metrics.gateway_failures.inc(bounded(attempt.cause, GATEWAY_CAUSES))
        if attempt.number > 1:
            metrics.gateway_retries.inc()
    payment = record.payment_outcome
    if payment is not None:
        metrics.payments.inc(payment)
