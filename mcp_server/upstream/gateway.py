"""The ONE outbound HTTP seam: every byte this server sends to the FairWins gateway leaves here.

HTTP status is data (a `GatewayResponse`), and so is a network failure (a `GatewayFailure`):
nothing here raises for what the gateway did. Each call has a deadline, redirects are never
followed, bodies and headers are size-capped, connections are reused per event loop, only by
calls with the same credential (pool_key) and never one on which anything arrived past its last
answer, and only unpaid GETs are ever retried. What to do is decided here, sans-I/O (the retry
policy, Gateway.policy); one client does it, on an event loop (upstream/aio.py), which a caller
that blocks reaches through Gateway.call.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import time
import urllib.parse
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from mcp_server import __version__
from mcp_server.ops.records import Attempt
from mcp_server.ops.tracecontext import Trace
from mcp_server.upstream import http1
from mcp_server.upstream.retry_after import retry_after_seconds
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.x402 import Payment

if TYPE_CHECKING:
    import random
    from hashlib import blake2b

USER_AGENT: Final = f"fairwins-mcp/{__version__}"
RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
RETRY_CAUSES: Final = frozenset({"reset"})
MAX_HEADER_BYTES: Final = 64 * 1024  # x402 offers and receipts can be tens of KB of headers


@dataclass(frozen=True, slots=True)
class Target:
    """The gateway's base URL, parsed once."""

    scheme: str
    host: str
    port: int
    prefix: str  # base path without a trailing slash ("" for the root)

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a URL's host name, lower case) is this machine, by name or loopback address."""
    if host in ("localhost", "127.0.0.1", "::1"):
        return True
    import ipaddress  # the usual names are answered above, so a start rarely pays for this

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_base_url(url: str, *, send_token_in_clear: bool = False) -> Target:
    """FAIRWINS_API_URL → Target; ValueError with a sentence when it is not a usable base URL.

    http:// is for a gateway on this machine (the sandbox, a local test); anywhere else it would
    carry the member's token and payments across the network in clear text, so it needs the
    operator to say so (`--send-token-in-clear`).
    """
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("FAIRWINS_API_URL must be an http:// or https:// URL, e.g. https://relay.fairwins.app")
    if parts.username or parts.password:
        raise ValueError("FAIRWINS_API_URL must not carry a user name or password")
    if parts.query or parts.fragment:
        raise ValueError("FAIRWINS_API_URL must not carry a query or a fragment")
    if parts.scheme == "http" and not send_token_in_clear and not is_loopback_host(parts.hostname):
        raise ValueError(
            f"FAIRWINS_API_URL is http:// to {parts.hostname}, which is not this machine: the member's token "
            "would cross the network in clear text. Use https://, or start the server with "
            "--send-token-in-clear if a cleartext gateway is really intended"
        )
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Target(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


@dataclass(frozen=True, slots=True)
class GatewayRequest:
    method: str
    path: str  # percent-encoded already, starting with "/"
    query: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    bearer: str | None = field(default=None, repr=False)
    payment: Payment | None = None

    @property
    def retriable(self) -> bool:
        # A POST may have acted, and a paid request must reach the gateway exactly once.
        return self.method == "GET" and self.payment is None


@dataclass(frozen=True, slots=True)
class GatewayResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    attempts: int = 1

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)


@dataclass(frozen=True, slots=True)
class GatewayFailure:
    """The gateway could not be asked, or its answer could not be had.

    `sent` is whether the request may have reached the gateway (what a paid call must report).
    """

    cause: (
        str  # not_configured | timeout | refused | dns | reset | tls | connection | too_large | unreadable | cancelled
        # | unsendable
    )
    detail: str
    sent: bool
    attempts: int = 1


Outcome = GatewayResponse | GatewayFailure


class TransportError(Exception):
    def __init__(self, cause: str, detail: str, sent: bool) -> None:
        super().__init__(detail)
        self.cause, self.detail, self.sent = cause, detail, sent


Headers = tuple[tuple[str, str], ...]


class Transport(Protocol):
    """A blocking stand-in for the client (a test's fake): AsyncTransport's contract, on a thread.

    Sends one request and reads one whole answer; raises TransportError for network failures.
    `trace` holds this attempt's W3C Trace Context header fields (a new span id each attempt).
    """

    def send(
        self,
        target: Target,
        request: GatewayRequest,
        deadline: float,
        cancellation: Cancellation,
        fresh: bool,
        trace: Headers = (),
    ) -> GatewayResponse: ...


class AsyncTransport(Protocol):
    """The gateway client's contract (upstream/aio.AsyncHttpTransport): Transport's, on an event loop."""

    async def send(
        self,
        target: Target,
        request: GatewayRequest,
        deadline: float,
        cancellation: Cancellation,
        fresh: bool,
        trace: Headers = (),
    ) -> GatewayResponse: ...


# Which pooled connections a request may take and leave: (scheme, host, port, its credential's digest).
PoolKey = tuple[str, str, int, bytes]
# The key of the credential digests, this process's own: never written anywhere, gone with the process.
_DIGEST_KEY: Final = os.urandom(32)


def pool_key(target: Target, request: GatewayRequest) -> PoolKey | None:
    """Which idle connections `request` may take and leave; None: none.

    A copy of an answer that arrives after its connection went back to the pool (written twice a
    few milliseconds apart, or late by a proxy) is read by the next request on that connection,
    and once that request is written no HTTP/1.1 client can tell the copy from its answer. So a
    connection carries only calls with the credential of the call before it: one member's bearer
    (known here by a digest keyed with this process's random key, never by the token), or none,
    for the public reads. What it may still hand a call is an earlier answer of the same
    credential, never another member's. A paid call shares no connection: its payment is no
    credential to share one by, and it must reach the gateway exactly once.
    """
    if request.payment is not None:
        return None
    if request.bearer is None:
        return (target.scheme, target.host, target.port, b"")
    return (target.scheme, target.host, target.port, _digest(request.bearer))


def _digest(bearer: str) -> bytes:
    """`bearer` as a pool key knows it: a digest keyed by this process."""
    return _blake2b()(bearer.encode("utf-8", "surrogatepass"), key=_DIGEST_KEY, digest_size=16).digest()


@functools.cache
def _blake2b() -> type[blake2b]:
    try:
        # hashlib.blake2b itself: hashlib would also load OpenSSL's libcrypto, which a stdio start
        # never pays for (tests/test_start_path.py).
        from _blake2 import blake2b
    except ImportError:  # a Python built without it (OpenSSL's alone)
        from hashlib import blake2b
    return blake2b


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _encode(target: Target, request: GatewayRequest, trace: Headers = ()) -> bytes:
    path = target.prefix + request.path
    if request.query:
        path += "?" + urllib.parse.urlencode(request.query, quote_via=urllib.parse.quote)
    fields = [
        ("Host", http1.host_header(target.host, target.port, 443 if target.scheme == "https" else 80)),
        ("Accept", "application/json"),
        ("User-Agent", USER_AGENT),
    ]
    fields += trace
    if request.payment is not None:
        fields.append((request.payment.header, request.payment.value))
    elif request.bearer is not None:
        fields.append(("Authorization", f"Bearer {request.bearer}"))
    if request.body is not None:
        fields.append(("Content-Type", "application/json"))
    return http1.encode_request(request.method, path, fields, request.body)


def _classify(exc: Exception, aborted: list[str], sent: bool, deadline: float) -> TransportError:
    if "cancelled" in aborted:
        return TransportError("cancelled", "the call was cancelled", sent)
    if "timeout" in aborted or isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
        return TransportError("timeout", "it did not answer in time", sent)
    if isinstance(exc, socket.gaierror):
        return TransportError("dns", "its host name did not resolve", False)
    if isinstance(exc, ConnectionRefusedError):
        return TransportError("refused", "the connection was refused", False)
    if isinstance(exc, http1.TunnelRefused):
        # Only an https:// gateway is ever reached through a proxy, and only by CONNECT.
        if exc.status == 407:
            detail = "the proxy named by HTTPS_PROXY asks for credentials (407), which this server does not send"
        else:
            detail = f"the proxy named by HTTPS_PROXY refused to open a tunnel to it ({exc.status})"
        return TransportError("connection", detail, False)
    ssl = sys.modules.get("ssl")  # loaded with asyncio; no TLS error exists without it
    if ssl is not None and isinstance(exc, ssl.SSLError):
        from mcp_server.upstream import tls

        return TransportError("tls", tls.describe(exc), sent)
    if isinstance(exc, http1.Closed) and exc.partial:
        return TransportError("reset", "the connection closed in the middle of the answer", sent)
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return TransportError("reset", "the connection was reset", sent)
    if isinstance(exc, http1.HeadTooLarge):
        # x402 offers and receipts ride in headers; a head too large is refused by name, not as garbage.
        return TransportError("unreadable", f"its headers were over the {_size(MAX_HEADER_BYTES)} limit", sent)
    if isinstance(exc, http1.ProtocolError):
        return TransportError("unreadable", "it was not a well-formed HTTP answer", sent)
    if isinstance(exc, OSError):
        return TransportError("connection", "the connection failed", sent)
    return TransportError("connection", f"the connection failed ({type(exc).__name__})", sent)


def _https_proxy(host: str) -> tuple[str, int] | None:
    import urllib.request  # only an https:// gateway that is not on loopback reads the proxy settings

    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        # Going around a proxy the operator named would be a guess; failing says what to fix.
        raise TransportError(
            "connection",
            "HTTPS_PROXY is not an http://host:port proxy URL, the only kind this server can tunnel through "
            "(https:// and SOCKS proxies are not supported): give the proxy's http:// address; what it "
            "carries is TLS either way",
            False,
        )
    return parts.hostname, parts.port or 8080


class Gateway:
    """The FairWins gateway as this server sees it: call(request) → Outcome, never an exception."""

    def __init__(
        self,
        base_url: str | None,
        *,
        timeout: float = 10.0,
        max_body: int = 4 * 1024 * 1024,
        attempts: int = 3,
        transport: Transport | None = None,
        async_transport: AsyncTransport | None = None,
        rng: random.Random | None = None,
        send_token_in_clear: bool = False,
    ) -> None:
        self.timeout = timeout
        self.attempts = attempts
        self.max_body = max_body
        # A test's blocking fake (sent from the loop's executor), or None: the one client, upstream/aio.py.
        self.transport: Transport | None = transport
        # The transport calls are sent on (upstream/aio.py), made on first use; a test may give its own.
        self.async_transport: AsyncTransport | None = async_transport
        self._rng = rng
        self.target: Target | None = None
        self.config_problem: str | None = None
        if base_url:
            try:
                self.target = parse_base_url(base_url, send_token_in_clear=send_token_in_clear)
            except ValueError as exc:
                self.config_problem = str(exc)

    def backoff(self, attempt: int) -> float:
        """Capped exponential backoff with jitter, so retrying clients do not arrive in lockstep."""
        ceiling = min(0.25 * 2 ** (attempt - 1), 2.0)
        if self._rng is None:
            import random  # a first retry is rare: not worth loading at start

            self._rng = random.Random()
        return self._rng.uniform(ceiling / 2, ceiling)

    def call(
        self,
        request: GatewayRequest,
        cancellation: Cancellation | None = None,
        on_retry: Callable[[int, str, float], None] | None = None,
        *,
        trace: Trace | None = None,
        observe: Callable[[Attempt], None] | None = None,
    ) -> Outcome:
        """`trace`: the request's W3C trace (None: this call starts one); each attempt goes upstream
        with a span id of its own, and `observe` hears of each attempt once it has ended.

        For a caller that blocks (stdio's call threads, `fairwins-mcp check`): upstream/aio.call run
        on this thread's own event loop (aio.wait). Code on a loop awaits aio.call instead."""
        from mcp_server.upstream import aio  # asyncio loads with the first call, never at start

        return aio.wait(aio.call(self, request, cancellation, on_retry, trace=trace, observe=observe))

    def step(
        self,
        request: GatewayRequest,
        cancellation: Cancellation | None = None,
        on_retry: Callable[[int, str, float], None] | None = None,
        *,
        trace: Trace | None = None,
        observe: Callable[[Attempt], None] | None = None,
    ) -> GatewayCall:
        """This call as a step (core/steps.py), for a handler that yields what it waits for."""
        return GatewayCall(self, request, cancellation, on_retry, trace, observe)

    def policy(
        self,
        request: GatewayRequest,
        cancellation: Cancellation,
        on_retry: Callable[[int, str, float], None] | None,
        trace: Trace | None,
        observe: Callable[[Attempt], None] | None,
    ) -> Generator[Send | Pause, GatewayResponse | TransportError | bool, Outcome]:
        """The retry policy, sans-I/O: yields an attempt to send (sent back its answer or its
        TransportError) or a pause between attempts (sent back True if cancelled meanwhile), and
        returns the call's Outcome. Its driver, upstream/aio.call, waits for what it yields."""
        if self.target is None:
            detail = self.config_problem or "FAIRWINS_API_URL is not set"
            return GatewayFailure("not_configured", detail, False, 0)
        trace = trace or Trace.start()
        deadline = time.monotonic() + self.timeout
        attempts = self.attempts if request.retriable else 1
        attempt = 0
        while True:
            attempt += 1
            traceparent, span = trace.outbound()
            state = trace.tracestate
            headers = (
                (("traceparent", traceparent),)
                if state is None
                else (("traceparent", traceparent), ("tracestate", state))
            )
            began = time.perf_counter()
            # A request that must not be retried gets a fresh connection: a stale keep-alive
            # socket would make "did it arrive?" unanswerable.
            got = yield Send(deadline, not request.retriable, headers)
            if isinstance(got, TransportError):
                exc = got
                if observe is not None:
                    took = time.perf_counter() - began
                    observe(Attempt(None, exc.cause, took, span, attempt, request.payment is not None, exc.sent))
                if exc.cause in RETRY_CAUSES and attempt < attempts:
                    delay = self.backoff(attempt)
                    if time.monotonic() + delay < deadline:
                        if on_retry:
                            on_retry(attempt, exc.detail, delay)
                        if (yield Pause(delay)):
                            return GatewayFailure("cancelled", "the call was cancelled", exc.sent, attempt)
                        continue
                return GatewayFailure(exc.cause, exc.detail, exc.sent, attempt)
            assert isinstance(got, GatewayResponse)
            resp = got
            if observe is not None:
                took = time.perf_counter() - began
                observe(Attempt(resp.status, None, took, span, attempt, request.payment is not None, True))
            if resp.status in RETRY_STATUSES and attempt < attempts:
                wait = retry_after_seconds(resp.header("Retry-After"))
                delay = self.backoff(attempt) if wait is None else wait
                # Honour Retry-After only when it fits in this call's deadline; otherwise the
                # answer itself (with its wait) is the honest result.
                if time.monotonic() + delay < deadline:
                    if on_retry:
                        on_retry(attempt, f"it answered {resp.status}", delay)
                    if (yield Pause(delay)):
                        return GatewayFailure("cancelled", "the call was cancelled", True, attempt)
                    continue
            return GatewayResponse(resp.status, resp.headers, resp.body, attempt)


@dataclass(frozen=True, slots=True)
class Send:
    """The policy's next attempt: sent by the transport within `deadline`, on a fresh connection if `fresh`."""

    deadline: float
    fresh: bool
    trace: Headers


@dataclass(frozen=True, slots=True)
class Pause:
    """The policy's wait before its next attempt; cut short by a cancel."""

    seconds: float


@dataclass(frozen=True, slots=True)
class GatewayCall:
    """One gateway call as a step (core/steps.py): `run` waits for it on this thread's own loop; on a
    running loop, upstream/aio.run waits for it there."""

    gateway: Gateway
    request: GatewayRequest
    cancellation: Cancellation | None = None
    on_retry: Callable[[int, str, float], None] | None = None
    trace: Trace | None = None
    observe: Callable[[Attempt], None] | None = None

    def run(self) -> Outcome:
        return self.gateway.call(self.request, self.cancellation, self.on_retry, trace=self.trace, observe=self.observe)
