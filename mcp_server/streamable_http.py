"""Streamable HTTP transport: POST /mcp and GET /healthz on a threaded standard-library server.

Each POST stands alone (no sessions): one JSON-RPC message in, one JSON answer out, or an SSE
stream when notifications (progress, logs) must flow before the answer. The gate decides every
request before its body is read; a refused body is drained or the connection closed, so the
next request on a keep-alive connection is read correctly.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from . import __version__, gate, records
from .context import RequestContext
from .disconnects import DisconnectWatcher
from .http_head import CHUNK_SIZE, MAX_HEADER_BYTES, TOKEN, HeadReader
from .jsonrpc import Batch, JSONObject, Request, dumps, error_object, error_response, parse
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .metrics import ServerMetrics, refusal_reason
from .protocol import Dispatcher, Session
from .versions import LEGACY_VERSIONS
from .watchdog import WATCHDOG

log = logging.getLogger("fairwins_mcp.http")
access = logging.getLogger("fairwins_mcp.access")

DRAIN_LIMIT: Final = 1024 * 1024  # refused bodies up to this size are read and dropped; larger: close
LINGER_SECONDS: Final = 2.0  # after a refusal that closes, how long the rest of the request is read and dropped
LINGER_BYTES: Final = 64 * 1024 * 1024
SERVER_HEADER: Final = f"fairwins-mcp/{__version__}"
CORS_ALLOW_HEADERS: Final = (
    "Content-Type, Accept, Authorization, MCP-Protocol-Version, Mcp-Method, Mcp-Name, X-PAYMENT, PAYMENT-SIGNATURE,"
    " traceparent, tracestate"
)
CORS_EXPOSE_HEADERS: Final = "X-PAYMENT-RESPONSE, PAYMENT-RESPONSE, PAYMENT-REQUIRED"
# Repeated, these would be ambiguous (smuggling, two credentials, two payments): refused outright.
SINGLE_HEADERS: Final = (
    "host",
    "origin",
    "content-length",
    "transfer-encoding",
    "authorization",
    "content-type",
    "x-payment",
    "payment-signature",
)


class McpHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        dispatcher: Dispatcher,
        policy: gate.Policy,
        *,
        env_bearer: str | None = None,
        max_concurrency: int = 32,
        read_timeout: float = 30.0,
        idle_timeout: float = 30.0,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.dispatcher = dispatcher
        self.policy = policy
        self.env_bearer = env_bearer
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_concurrency = max_concurrency
        self.max_connections = max_concurrency * 4 + 16
        self.slots = threading.BoundedSemaphore(max_concurrency)
        self.stopping = False
        self.watcher = DisconnectWatcher()
        self._cond = threading.Condition()
        self._inflight = 0
        self._connections = 0
        self.inflight_at_stop = 0
        self.metrics = metrics
        if metrics is not None:
            metrics.in_flight.set_function(lambda: self._inflight)
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/mcp"

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        # Small answers must not wait out a delayed ACK on keep-alive connections.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._cond:
            full = self._connections >= self.max_connections
            if not full:
                self._connections += 1
        if full:
            body = b'{"error":"busy","message":"Too many connections; retry shortly"}'
            head = (
                "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            try:
                request.sendall(head.encode("ascii") + body)
            except OSError:
                pass
            self.shutdown_request(request)
            if self.metrics is not None:
                self.metrics.refusals.inc("busy")
            return
        super().process_request(request, client_address)

    def connection_closed(self) -> None:
        with self._cond:
            self._connections -= 1
            self._cond.notify_all()

    @property
    def connection_count(self) -> int:
        with self._cond:
            return self._connections

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no connection is open and no request in flight; False if `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._connections == 0 and self._inflight == 0, timeout)

    def server_close(self) -> None:
        super().server_close()
        self.watcher.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that vanished is ordinary; anything else is a bug, logged (never printed) once.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("connection from %s ended: %s", client_address[0], type(exc).__name__)
            return
        log.error("unexpected failure serving a connection", exc_info=True)

    def begin(self) -> bool:
        """A request line was read: count it in flight (False once draining: answer 503 and close)."""
        with self._cond:
            if self.stopping:
                return False
            self._inflight += 1
            return True

    def end(self) -> None:
        with self._cond:
            self._inflight -= 1
            self._cond.notify_all()

    def drain(self, grace: float) -> bool:
        """Stop accepting, let requests in flight finish within `grace` seconds; True if all did."""
        with self._cond:
            self.stopping = True
            self.inflight_at_stop = self._inflight
        self.shutdown()
        ThreadingHTTPServer.server_close(self)  # the listening socket only: calls in flight still watch theirs
        deadline = time.monotonic() + grace
        try:
            with self._cond:
                while self._inflight:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
            return True
        finally:
            self.watcher.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = SERVER_HEADER
    sys_version = ""
    server: McpHTTPServer

    def setup(self) -> None:
        super().setup()
        # An idle or stalled connection gives its thread back after idle_timeout without a byte.
        self.connection.settimeout(self.server.idle_timeout)
        self.budget = HeadReader(self.rfile)  # type: ignore[arg-type]
        self.rfile = self.budget  # type: ignore[assignment]
        self._status = 0
        self._started = 0.0
        self._counted = False
        self._timed_out = False
        self._linger = False
        self._record: records.Record | None = None
        self._request_size: int | None = None

    def finish(self) -> None:
        try:
            super().finish()
            if self._linger and not self._timed_out:
                self._linger_close()
        finally:
            self.server.connection_closed()

    def _linger_close(self) -> None:
        """Close in stages after refusing a request whose body may still be arriving (RFC 9112 §9.6).

        Closing with unread bytes makes the kernel send a reset, which can destroy the refusal
        before the client reads it; so the sending half is closed first and the rest read and
        dropped until the client closes, for at most LINGER_SECONDS.
        """
        try:
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER_SECONDS
            dropped = 0
            while dropped < LINGER_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.connection.settimeout(left)
                chunk = self.connection.recv(65536)
                if not chunk:
                    return
                dropped += len(chunk)
        except OSError:
            return

    def _abort(self) -> None:
        # Only the reading half: a blocked read wakes at once, and the 408 can still be written.
        self._timed_out = True
        try:
            self.connection.shutdown(socket.SHUT_RD)
        except OSError:
            pass

    def _too_slow(self) -> None:
        """The request did not arrive whole within read_timeout (RFC 9110 §15.5.9: 408, then close)."""
        self._respond(408, _error_body("request_timeout", "The request did not arrive in time"), close=True)

    def handle_one_request(self) -> None:
        self.budget.start()
        # The whole request (line, headers, body) must arrive within read_timeout: a client
        # trickling one byte a second would otherwise hold this thread forever.
        self._read_timer = WATCHDOG.schedule(time.monotonic() + self.server.read_timeout, self._abort)
        self._counted = False
        self._status = 0
        self._started = 0.0
        self._record = None
        self._request_size = None
        try:
            super().handle_one_request()
        except http.client.LineTooLong as exc:
            # Only the request line gets here (http.server answers an oversized header line itself).
            self.command, self.request_version, self.requestline = "", "HTTP/1.1", ""
            status = 414 if "request line" in str(exc) else 431
            self._respond(status, _error_body("too_large", f"The {exc.args[0]} is over the 64 KiB limit"), close=True)
        finally:
            self._read_timer.cancel()
            self.budget.remaining = None
            if self._counted:
                self.server.end()
        if self._timed_out:
            self.close_connection = True  # the reading half is shut: nothing more can come on it

    def parse_request(self) -> bool:
        self._started = time.monotonic()
        self._record = records.Record("http")
        self._counted = self.server.begin()
        raw_line: bytes = getattr(self, "raw_requestline", b"")  # set by http.server before it calls us
        words = raw_line.split()
        if self._timed_out:
            self.command, self.request_version = "", "HTTP/1.1"
            self._too_slow()
            return False
        if words and (len(words) < 3 or not TOKEN.fullmatch(words[0])):
            # HTTP/0.9 ("GET /path") has no headers and no body, and a method is a token: the
            # rest of a body the client framed wrongly is not a request.
            self.command, self.request_version, self.requestline = "", "HTTP/1.1", ""
            expected = "Bad request line: expected METHOD /path HTTP/1.1"
            self._respond(400, _error_body("bad_request", expected), close=True)
            return False
        if not super().parse_request():
            return False
        if self._timed_out:
            self._too_slow()
            return False
        if self.budget.malformed is not None:
            self._respond(400, _error_body("bad_header", f"Refused: {self.budget.malformed}"), close=True)
            return False
        if not self._counted:
            self._respond(
                503, _error_body("shutting_down", "The server is shutting down"), close=True, extra={"Retry-After": "1"}
            )
            return False
        return True

    def handle_expect_100(self) -> bool:
        # "100 Continue" is promised only once the gate admits the request (_mcp), so a refused
        # client never sends a body nobody wants.
        return True

    # http.server's own errors (bad request line, 431, 505…) answer in JSON like everything else.
    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == 431:
            text = (
                f"The request line and headers are over the {MAX_HEADER_BYTES // 1024} KiB limit (or over 100 headers)"
            )
            self._respond(code, _error_body("headers_too_large", text), close=True)
            return
        self._respond(code, _error_body("bad_request", message or "Bad request"), close=True)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http.server: " + format, *args)

    def do_POST(self) -> None:
        self._dispatch()

    do_GET = do_DELETE = do_OPTIONS = do_PUT = do_PATCH = do_HEAD = do_POST

    # ---- plumbing -----------------------------------------------------------------------

    def _respond(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
        close: bool = False,
    ) -> None:
        """Status line, headers and body leave in one write."""
        self._status = status
        if self.server.stopping:
            close = True
        reason = self.responses.get(status, ("",))[0]
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"Server: {SERVER_HEADER}",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        for name, value in (extra or {}).items():
            lines.append(f"{name}: {value}")
        if close:
            lines.append("Connection: close")
            self.close_connection = True
            self._linger = status >= 400  # refused: part of the request may still be on its way
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            self.wfile.write(head if self.command == "HEAD" else head + body)
        except OSError:
            self.close_connection = True
        self._log_access(len(body), body if status >= 400 else b"")

    def _log_access(self, response_size: int | None = None, body: bytes = b"") -> None:
        """The request's one record: its MCP message (if it got that far) and Cloud Logging's httpRequest."""
        record = self._record or records.Record("http")
        self._record = None  # one record per request, however many times this is reached
        path = "".join(ch if 32 < ord(ch) < 127 else "?" for ch in (getattr(self, "path", "") or "")[:200])
        record.http = records.HttpFacts(
            self.command or "-",
            path or "-",
            self._status,
            self._request_size,
            response_size,
            self.headers.get("user-agent") if getattr(self, "headers", None) is not None else None,
            self.request_version if self.request_version.startswith("HTTP/") else "HTTP/1.1",
            record.http.batch if record.http is not None else None,
        )
        metrics = self.server.metrics
        if metrics is not None and body and not record.outcome:
            reason = refusal_reason(self._status, _error_code(body))
            if reason is not None:
                metrics.refusals.inc(reason)
        records.finish(record, metrics)

    def _cors(self, origin: str | None) -> dict[str, str]:
        if origin is None:
            return {}
        return {
            "Access-Control-Allow-Origin": origin,
            "Vary": "Origin",
            "Access-Control-Expose-Headers": CORS_EXPOSE_HEADERS,
        }

    def _read_exact(self, n: int) -> bytes | None:
        try:
            data = self.rfile.read(n)
        except OSError:
            data = b""
        return data if len(data) == n else None

    def _read_chunked(self, limit: int) -> bytes | int | None:
        """The body of a chunked request; None if the stream ended, 400 if malformed, 413 if over the limit."""
        parts: list[bytes] = []
        total = 0
        trailer_bytes = 0
        try:
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line.endswith(b"\n"):
                    return None if len(size_line) < 1024 and not self._timed_out else 400
                # chunk-size = 1*HEXDIG, nothing else (no sign, no 0x, no underscores): a size two
                # parsers read differently is a smuggled request.
                match = CHUNK_SIZE.fullmatch(size_line)
                if match is None:
                    return 400
                size = int(match.group(1), 16)
                if size == 0:
                    while True:
                        line = self.rfile.readline(8192)
                        trailer_bytes += len(line)
                        if line in (b"\r\n", b"\n"):
                            return b"".join(parts)
                        if not line.endswith(b"\n"):
                            return None
                        if trailer_bytes > MAX_HEADER_BYTES:
                            return 400  # trailers are ignored, but not without end
                total += size
                if total > limit:
                    return 413
                chunk = self._read_exact(size)
                if chunk is None:
                    return None
                end = self.rfile.readline(3)
                if end not in (b"\r\n", b"\n"):
                    return None if not end else 400
                parts.append(chunk)
        except OSError:
            return None

    def _headers(self) -> dict[str, str] | None:
        for name in SINGLE_HEADERS:
            if len(self.headers.get_all(name) or []) > 1:
                return None
        return {k.lower(): v for k, v in self.headers.items()}

    # ---- routing ------------------------------------------------------------------------

    def _dispatch(self) -> None:
        headers = self._headers()
        if headers is None:
            self._respond(
                400, _error_body("duplicate_header", "A header that must appear once appeared twice"), close=True
            )
            return
        if self._record is not None:
            # W3C Trace Context: a repeated traceparent is invalid once joined; tracestate fields join.
            traceparent = self.headers.get_all("traceparent")
            tracestate = self.headers.get_all("tracestate")
            self._record.inbound = (
                ",".join(traceparent) if traceparent else None,
                ",".join(tracestate) if tracestate else None,
            )
        decision = gate.check(self.command, self.path, headers, self.server.policy)
        if isinstance(decision, gate.Refuse):
            self._refuse(decision, headers)
        elif decision.route == "metrics" and self.server.metrics is not None:
            self._respond(200, self.server.metrics.render().encode("utf-8"), content_type=METRICS_CONTENT_TYPE)
        elif decision.route == "health":
            status = {"status": "ok", "name": "fairwins-mcp", "version": __version__}
            self._respond(200, json.dumps(status, separators=(",", ":")).encode())
        elif decision.route == "preflight":
            self._preflight(decision.cors)
        else:
            self._mcp(decision, headers)

    def _refuse(self, decision: gate.Refuse, headers: dict[str, str]) -> None:
        extra = self._cors(decision.cors)
        if decision.allow:
            extra["Allow"] = decision.allow
        body_bytes = b""
        close = decision.status in (400, 411, 413) and decision.jsonrpc_code is None
        raw = headers.get("content-length")
        if "transfer-encoding" in headers or _expects_continue(headers):
            close = True  # a client waiting for "100 Continue" sends no body to drain
        elif raw is not None and raw.strip().isdigit() and not close:
            length = int(raw)
            if length <= DRAIN_LIMIT:
                read = self._read_exact(length)  # drained, so keep-alive stays in step
                close = read is None
                body_bytes = read or b""
            else:
                close = True
        if decision.jsonrpc_code is not None:
            message = parse(body_bytes) if body_bytes else None
            msg_id = message.id if isinstance(message, Request) else None
            error = (message and self.server.dispatcher.ladder_error(message, headers)) or error_object(
                decision.jsonrpc_code, decision.message, decision.data
            )
            payload = dumps(error_response(msg_id, error))
        else:
            payload = _error_body(decision.error, decision.message)
        self._respond(decision.status, payload, extra=extra, close=close)

    def _preflight(self, origin: str | None) -> None:
        extra = self._cors(origin)
        if origin is not None:
            extra.update(
                {
                    "Access-Control-Allow-Methods": "POST, OPTIONS",
                    "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
                    "Access-Control-Max-Age": "600",
                }
            )
        self._status = 204
        self._respond(204, b"", extra=extra)

    def _credential(self, headers: dict[str, str]) -> tuple[str | None, str] | None:
        auth = headers.get("authorization")
        if auth is None:
            env = self.server.env_bearer
            return (env, "env") if env else (None, "none")
        scheme, _, token = auth.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or any(ch.isspace() for ch in token):
            return None
        # A request's own token always wins over the environment's: a shared instance never mixes members.
        return token, "header"

    def _mcp(self, decision: gate.Admit, headers: dict[str, str]) -> None:
        cors = self._cors(decision.cors)
        if _expects_continue(headers) and self.request_version == "HTTP/1.1":
            try:
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                self.close_connection = True
                return
        if decision.chunked:
            body = self._read_chunked(self.server.policy.max_body)
            if body == 413:
                self._respond(
                    413, _error_body("body_too_large", "The body is over the size limit"), extra=cors, close=True
                )
                return
            if body == 400:
                self._respond(400, _error_body("bad_framing", "The chunked body is malformed"), extra=cors, close=True)
                return
        else:
            body = self._read_exact(decision.length)
        self._read_timer.cancel()  # the request is in; what follows may rightly wait on the gateway
        if self._timed_out:
            self._too_slow()  # late, or cut short by the deadline: either way not served
            return
        if not isinstance(body, bytes):
            self.close_connection = True  # the client stopped sending: nothing to answer
            return
        credential = self._credential(headers)
        if credential is None:
            self._respond(400, _error_body("bad_authorization", "Authorization must be 'Bearer <token>'"), extra=cors)
            return
        if not self.server.slots.acquire(blocking=False):
            self._respond(
                503,
                _error_body("busy", "Too many requests in flight; retry shortly"),
                extra={**cors, "Retry-After": "1"},
            )
            return
        try:
            self._serve_message(body, headers, credential, cors)
        finally:
            self.server.slots.release()

    def _serve_message(
        self, body: bytes, headers: dict[str, str], credential: tuple[str | None, str], cors: dict[str, str]
    ) -> None:
        message = parse(body)
        self._request_size = len(body)
        record = self._record or records.Record("http")
        self._record = record
        header_version = headers.get("mcp-protocol-version")
        session = Session(http=True, version=header_version if header_version in LEGACY_VERSIONS else "")
        payment, conflict = None, None
        if "x-payment" in headers or "payment-signature" in headers:
            from .payments import from_http_headers  # only paid calls load the payments code

            payment, conflict = from_http_headers(headers)

        items: list[records.Record] = []

        def make_ctx(item_record: records.Record | None = None) -> RequestContext:
            if item_record is None:  # a batch item: a record of its own, logged before the request's
                item_record = records.Record("http")
                item_record.inbound = record.inbound
                items.append(item_record)
            return RequestContext(
                bearer=credential[0],
                bearer_source=credential[1],
                payment=payment,
                payment_conflict=conflict,
                http_headers=headers,
                record=item_record,
            )

        if isinstance(message, Batch):
            if payment is not None:
                # One payment is spent once: it cannot ride on every call of a batch.
                payment, conflict = None, "a payment cannot be carried on a batch; send the paid call on its own"
            reply = self.server.dispatcher.handle_batch(message, session, make_ctx)
            for item in items:
                if item.outcome:  # the first context only lent its headers
                    records.finish(item, self.server.metrics)
            record.http = records.HttpFacts("POST", "/mcp", batch=len(message.items))
            self._answer(reply.status, reply.message, cors)
            return
        ctx = make_ctx(record)
        accept = headers.get("accept")
        stream = _Stream(self, cors) if (payment is None and gate.accepts(accept, "text/event-stream")) else None
        if stream is not None:
            ctx.send = stream.send
        unwatch: Callable[[], None] = _nothing
        if self.server.dispatcher.is_blocking(message):
            unwatch = self.server.watcher.watch(self.connection, ctx.cancellation.cancel)
        try:
            reply = self.server.dispatcher.handle(message, session, ctx)
        finally:
            unwatch()
        if ctx.cancellation.is_set:
            self.close_connection = True  # the client went away: nothing more is sent for this request
            self._status = 499
            self._log_access()
            return
        if stream is not None and stream.started:
            stream.finish(reply.message)
            return
        self._answer(reply.status, reply.message, {**cors, **ctx.response_headers})

    def _answer(self, status: int, message: JSONObject | list[JSONObject] | None, extra: dict[str, str]) -> None:
        if message is None:
            self._respond(202, b"", extra=extra)  # a notification or a client response: accepted
        else:
            self._respond(status, dumps(message), extra=extra)


class _Stream:
    """An SSE answer, committed lazily: only the first notification turns the answer into a stream."""

    def __init__(self, handler: Handler, cors: dict[str, str]) -> None:
        self.handler = handler
        self.cors = cors
        self.started = False
        self.broken = False
        self._lock = threading.Lock()

    def _write(self, data: bytes) -> None:
        try:
            self.handler.wfile.write(data)
        except OSError:
            self.broken = True

    def send(self, message: JSONObject) -> None:
        with self._lock:
            if self.broken:
                return
            if not self.started:
                self.started = True
                lines = [
                    "HTTP/1.1 200 OK",
                    f"Server: {SERVER_HEADER}",
                    "Content-Type: text/event-stream",
                    "Cache-Control: no-cache",
                    "X-Accel-Buffering: no",
                    "Transfer-Encoding: chunked",
                ]
                lines += [f"{k}: {v}" for k, v in self.cors.items()]
                self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            self._write(_chunk(b"event: message\ndata: " + dumps(message) + b"\n\n"))

    def finish(self, message: JSONObject | list[JSONObject] | None) -> None:
        with self._lock:
            if message is not None and not self.broken:
                self._write(_chunk(b"event: message\ndata: " + dumps(message) + b"\n\n"))
            self._write(b"0\r\n\r\n")
        self.handler._status = 200
        if self.handler.server.stopping or self.broken:
            self.handler.close_connection = True
        self.handler._log_access()


def _expects_continue(headers: dict[str, str]) -> bool:
    return headers.get("expect", "").strip().lower() == "100-continue"


def _nothing() -> None:
    return None


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n"


def _error_code(body: bytes) -> str | None:
    """The `error` code of a refusal's body (see _error_body); None for a JSON-RPC error or anything else."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    code = value.get("error") if isinstance(value, dict) else None
    return code if isinstance(code, str) else None


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": code, "message": message}, separators=(",", ":")).encode("utf-8")


def serve(
    dispatcher: Dispatcher,
    *,
    host: str,
    port: int,
    allowed_origins: tuple[str, ...],
    env_bearer: str | None,
    max_concurrency: int,
    max_body: int,
    grace: float,
    metrics: bool = False,
) -> int:
    """Run until SIGTERM or SIGINT, then drain requests in flight and return 0."""
    origins = frozenset(o for o in (gate.normalise_origin(x) for x in allowed_origins) if o)
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    policy = gate.Policy(loopback_bind=loopback, allowed_origins=origins, max_body=max_body, metrics=metrics)
    registry = ServerMetrics((t.name for t in dispatcher.catalog.tools), __version__) if metrics else None
    server = McpHTTPServer(
        (host, port), dispatcher, policy, env_bearer=env_bearer, max_concurrency=max_concurrency, metrics=registry
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="fairwins-mcp-accept")
    thread.start()
    log.info("fairwins-mcp listening on %s (health: %s)", server.url, server.url.replace("/mcp", "/healthz"))
    if registry is not None:
        log.info("metrics: %s", server.url.replace("/mcp", "/metrics"))
    while not stop.wait(3600):
        pass
    log.info("stopping: no new connections; letting requests in flight finish (up to %.0f s)", grace)
    drained = server.drain(grace)
    thread.join(timeout=5)
    if not drained:
        log.warning("some requests were still in flight after %.0f s", grace)
    else:
        log.info("stopped: all %d requests in flight at the signal were answered", server.inflight_at_stop)
    return 0
