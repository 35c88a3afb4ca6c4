"""One exchange with the gateway, sans-I/O.

The rules the client (upstream/aio.py) follows for every request, each said once: the exchange
itself (`Exchange`: what each event means, what was sent, whether a connection is kept), the
request as bytes (`encode`), the pooled connections it may take and leave (`pool_key`), the
proxy an https:// gateway is reached through (`https_proxy`, `tunnel_request`), and the name and
words of each way an exchange can fail (`classify`). The answer's rules are http1.Parser's.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from mcp_server import __version__
from mcp_server.upstream import http1
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.x402 import Payment

if TYPE_CHECKING:
    from hashlib import blake2b

USER_AGENT: Final = f"fairwins-mcp/{__version__}"
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
    """Whether `host` (a URL's host name, in lower case) is this machine."""
    if host in ("localhost", "127.0.0.1", "::1"):
        return True
    import ipaddress  # the usual names are answered above, so a start rarely pays for this

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


class TransportError(Exception):
    def __init__(self, cause: str, detail: str, sent: bool) -> None:
        super().__init__(detail)
        self.cause, self.detail, self.sent = cause, detail, sent


Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Send:
    """One attempt of a call: sent within `deadline`, fresh if `fresh`.

    A fresh attempt takes a new connection and leaves none. `trace` holds this attempt's W3C
    Trace Context header fields (a new span id each attempt).
    """

    deadline: float
    fresh: bool
    trace: Headers = ()


class Transport(Protocol):
    """What sends one request and reads one whole answer.

    The gateway client (aio.HttpTransport), or a test's fake. Awaited on an event loop;
    raises TransportError for network failures.
    """

    async def send(
        self, target: Target, request: GatewayRequest, attempt: Send, cancellation: Cancellation
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


def size_text(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def encode(target: Target, request: GatewayRequest, trace: Headers = ()) -> bytes:
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


def tunnel_request(target: Target) -> bytes:
    """The CONNECT request asking a proxy for a tunnel to the gateway."""
    authority = http1.host_header(target.host, target.port, -1)
    return f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode("ascii")


class Exchange:
    """One request's exchange with the gateway, sans-I/O.

    The client (upstream/aio.py) carries the bytes and says what happened: the deadline passed or
    the call was cancelled (`abort`), a connection is about to carry the request (`writing`), an
    answer was read (`answered`), something failed (`again`, then `failed`). Its rules, each said
    once: nothing is written once the call is aborted; whether the request may have reached the
    gateway (`sent`) is known at every step; a kept-alive connection the gateway closed while idle
    is replaced, once per connection; an answer read after an abort is never passed on; an answer
    goes back to the pool only if it allows it and the call has a credential to pool by (`key`).
    """

    __slots__ = ("aborted", "data", "deadline", "key", "max_body", "sent")

    def __init__(
        self, target: Target, request: GatewayRequest, deadline: float, fresh: bool, trace: Headers, max_body: int
    ) -> None:
        """TransportError "unsendable" if the request cannot be written as HTTP."""
        try:
            self.data = encode(target, request, trace)
        except (UnicodeError, ValueError):
            # Never "could not be reached": nothing left this process. The callers refuse such
            # values first (lone surrogates, a token outside ASCII); this is the seam's own net.
            raise TransportError("unsendable", "this server could not write the request as HTTP", False) from None
        # A request that must not be retried (`fresh`) takes no pooled connection and leaves none.
        self.key = None if fresh else pool_key(target, request)
        self.deadline = deadline
        self.max_body = max_body
        self.aborted: str | None = None  # "timeout" or "cancelled": the first stands
        self.sent = False

    def abort(self, reason: str) -> None:
        """The deadline passed ("timeout") or the call was cancelled ("cancelled")."""
        if self.aborted is None:
            self.aborted = reason

    def go_on(self) -> None:
        """Nothing, or the call's TransportError once it was aborted."""
        if self.aborted is not None:
            raise self.failed(ConnectionResetError())

    def writing(self) -> bytes:
        """The request, about to be written: from here the gateway may have it."""
        self.go_on()
        self.sent = True
        return self.data

    def again(self, exc: Exception, reused: bool) -> bool:
        """Whether, after `exc`, the request goes once more on a new connection.

        Only a connection kept alive from an earlier answer (`reused`) that the gateway closed
        while it sat idle: no byte of an answer came, so the request was never read, and one more
        connection is not a retry of the call.
        """
        closed = isinstance(exc, (ConnectionResetError, BrokenPipeError))  # http1.Closed included
        return reused and closed and self.aborted is None and not getattr(exc, "partial", False)

    def answered(self, resp: http1.Response) -> tuple[GatewayResponse, bool]:
        """The answer to pass on, and whether its connection goes back to the pool.

        An empty read also follows an abort closing the connection: a body cut short by it is never
        passed on as a whole answer.
        """
        self.go_on()
        return GatewayResponse(resp.status, resp.headers, resp.body), resp.keep_alive and self.key is not None

    def failed(self, exc: Exception) -> TransportError:
        """The exchange ended by `exc`, as a TransportError."""
        if isinstance(exc, TransportError):
            return exc
        if isinstance(exc, http1.BodyTooLarge):
            return TransportError("too_large", f"it was over the {size_text(self.max_body)} limit", True)
        return classify(exc, self.aborted, self.sent, self.deadline)


def classify(exc: Exception, aborted: str | None, sent: bool, deadline: float) -> TransportError:
    """What a failed exchange is called, in words; `aborted`: why it stopped."""
    if aborted == "cancelled":
        return TransportError("cancelled", "the call was cancelled", sent)
    if aborted == "timeout" or isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
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
        return TransportError("unreadable", f"its headers were over the {size_text(MAX_HEADER_BYTES)} limit", sent)
    if isinstance(exc, http1.ProtocolError):
        return TransportError("unreadable", "it was not a well-formed HTTP answer", sent)
    if isinstance(exc, OSError):
        return TransportError("connection", "the connection failed", sent)
    return TransportError("connection", f"the connection failed ({type(exc).__name__})", sent)


def https_proxy(host: str) -> tuple[str, int] | None:
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
