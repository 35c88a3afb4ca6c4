"""The one outbound HTTP seam: every byte for the gateway leaves here.

HTTP status is data (a `GatewayResponse`), and so is a network failure (a `GatewayFailure`):
nothing here raises for what the gateway did. Each call has a deadline, redirects are never
followed, bodies and headers are size-capped, connections are reused per event loop, only by
calls with the same credential (pool_key) and never one on which anything arrived past its last
answer, and only unpaid GETs are ever retried. What to do is decided here, sans-I/O (the retry
policy, Gateway.policy); one client does it, on an event loop (upstream/aio.py), which a caller
that blocks reaches through Gateway.call.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mcp_server.ops.failures import as_value
from mcp_server.ops.records import Attempt
from mcp_server.ops.tracecontext import Trace
from mcp_server.upstream.exchange import (
    GatewayRequest,
    GatewayResponse,
    Headers,
    Send,
    Target,
    Transport,
    TransportError,
    is_loopback_host,
)
from mcp_server.upstream.retry_after import retry_after_seconds
from mcp_server.wire.cancellation import Cancellation

if TYPE_CHECKING:
    import random

# What callers know the seam by, wherever it is defined.
__all__ = [
    "Gateway",
    "GatewayCall",
    "GatewayFailure",
    "GatewayRequest",
    "GatewayResponse",
    "Headers",
    "Outcome",
    "Pause",
    "Send",
    "Target",
    "Transport",
    "TransportError",
    "is_loopback_host",
    "parse_base_url",
]

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
RETRY_CAUSES: Final = frozenset({"reset"})
_LOCK: Final = threading.Lock()  # a gateway's transport is made once, whichever thread calls first


def parse_base_url(url: str, *, send_token_in_clear: bool = False) -> Target:
    """FAIRWINS_API_URL as a Target; ValueError (a sentence) if it is unusable.

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
class GatewayFailure:
    """The gateway could not be asked, or its answer could not be had.

    `sent` is whether the request may have reached the gateway (what a paid call must report).
    """

    cause: str  # not_configured, or one of records.GATEWAY_CAUSES
    detail: str
    sent: bool
    attempts: int = 1


Outcome = GatewayResponse | GatewayFailure


class Gateway:
    """The FairWins gateway as this server sees it; a call never raises."""

    def __init__(
        self,
        base_url: str | None,
        *,
        timeout: float = 10.0,
        max_body: int = 4 * 1024 * 1024,
        attempts: int = 3,
        transport: Transport | None = None,
        rng: random.Random | None = None,
        send_token_in_clear: bool = False,
    ) -> None:
        self.timeout = timeout
        self.attempts = attempts
        self.max_body = max_body
        # What calls are sent on: a test's fake, or the one client (upstream/aio.py), made on first use.
        self.transport: Transport | None = transport
        self._rng = rng
        self.target: Target | None = None
        self.config_problem: str | None = None
        if base_url:
            try:
                self.target = parse_base_url(base_url, send_token_in_clear=send_token_in_clear)
            except ValueError as exc:
                self.config_problem = str(exc)

    def backoff(self, attempt: int) -> float:
        """Capped exponential backoff, with jitter so retries are not in lockstep."""
        ceiling = min(0.25 * 2 ** (attempt - 1), 2.0)
        if self._rng is None:
            import random  # a first retry is rare: not worth loading at start

            self._rng = random.Random()
        return self._rng.uniform(ceiling / 2, ceiling)

    def call(self, request: GatewayRequest, cancellation: Cancellation | None = None) -> Outcome:
        """The call, for a caller that blocks, on this thread's own event loop.

        Such callers: `fairwins-mcp check` and the unit tests; a handler yields `step` instead.
        """
        return self.step(request, cancellation).run()

    def _client(self) -> Transport:
        """The one client, made on first use with this gateway's body cap."""
        from mcp_server.upstream import aio

        with _LOCK:
            if self.transport is None:
                self.transport = aio.HttpTransport(self.max_body)
            return self.transport

    def step(
        self,
        request: GatewayRequest,
        cancellation: Cancellation | None = None,
        on_retry: Callable[[int, str, float], None] | None = None,
        *,
        trace: Trace | None = None,
        observe: Callable[[Attempt], None] | None = None,
    ) -> GatewayCall:
        """This call as a step (core/steps.py), for a handler to yield."""
        return GatewayCall(self, request, cancellation, on_retry, trace, observe)

    def policy(
        self,
        request: GatewayRequest,
        cancellation: Cancellation,
        on_retry: Callable[[int, str, float], None] | None,
        trace: Trace | None,
        observe: Callable[[Attempt], None] | None,
    ) -> Generator[Send | Pause, GatewayResponse | TransportError | bool, Outcome]:
        """The retry policy, sans-I/O.

        It yields an attempt to send (sent back its answer or its TransportError) or a pause
        between attempts (sent back True if cancelled meanwhile), and returns the call's Outcome.
        Its driver, `GatewayCall.arun`, waits for what it yields.
        """
        if self.target is None:
            detail = self.config_problem or "FAIRWINS_API_URL is not set"
            return GatewayFailure("not_configured", detail, False, 0)
        trace = trace or Trace.start()
        deadline = time.monotonic() + self.timeout
        attempts = self.attempts if request.retriable else 1
        paid = request.payment is not None
        attempt = 0
        while True:
            attempt += 1
            traceparent, span = trace.outbound()
            headers: Headers = (("traceparent", traceparent),)
            if trace.tracestate is not None:
                headers += (("tracestate", trace.tracestate),)
            began = time.perf_counter()
            # A request that must not be retried gets a fresh connection: a stale keep-alive
            # socket would make "did it arrive?" unanswerable.
            got = yield Send(deadline, not request.retriable, headers)
            took = time.perf_counter() - began
            delay: float | None = None  # the wait before one more attempt, if one may be made
            if isinstance(got, TransportError):
                outcome: Outcome = GatewayFailure(got.cause, got.detail, got.sent, attempt)
                sent, why = got.sent, got.detail
                if observe is not None:
                    observe(Attempt(None, got.cause, took, span, attempt, paid, got.sent))
                if got.cause in RETRY_CAUSES and attempt < attempts:
                    delay = self.backoff(attempt)
            else:
                assert isinstance(got, GatewayResponse)
                outcome = GatewayResponse(got.status, got.headers, got.body, attempt)
                sent, why = True, f"it answered {got.status}"
                if observe is not None:
                    observe(Attempt(got.status, None, took, span, attempt, paid, True))
                if got.status in RETRY_STATUSES and attempt < attempts:
                    wait = retry_after_seconds(got.header("Retry-After"))
                    delay = self.backoff(attempt) if wait is None else wait
            # A wait (Retry-After's or the backoff's) is taken only when it fits in this call's
            # deadline; otherwise this answer or failure itself (with its wait) is the honest result.
            if delay is None or time.monotonic() + delay >= deadline:
                return outcome
            if on_retry:
                on_retry(attempt, why, delay)
            if (yield Pause(delay)):
                return GatewayFailure("cancelled", "the call was cancelled", sent, attempt)


@dataclass(frozen=True, slots=True)
class Pause:
    """The policy's wait before its next attempt; cut short by a cancel."""

    seconds: float


@dataclass(frozen=True, slots=True)
class GatewayCall:
    """One gateway call as a step (core/steps.py)."""

    gateway: Gateway
    request: GatewayRequest
    cancellation: Cancellation | None = None
    on_retry: Callable[[int, str, float], None] | None = None
    trace: Trace | None = None
    observe: Callable[[Attempt], None] | None = None

    def run(self) -> Outcome:
        """The call on this thread's own event loop (aio.wait), kept with its pool."""
        from mcp_server.upstream import aio  # asyncio loads with the first call, never at start

        return aio.wait(self.arun())

    async def arun(self) -> Outcome:
        """The call on the running loop: the policy driven, each step awaited."""
        from mcp_server.upstream import aio

        gateway, request = self.gateway, self.request
        cancellation = self.cancellation or Cancellation()
        policy = gateway.policy(request, cancellation, self.on_retry, self.trace, self.observe)
        transport = gateway.transport or gateway._client()
        try:
            action = next(policy)
            while True:
                if isinstance(action, Pause):
                    action = policy.send(await aio.pause(action.seconds, cancellation))
                    continue
                assert gateway.target is not None
                try:
                    got: GatewayResponse | TransportError = await transport.send(
                        gateway.target, request, action, cancellation
                    )
                except TransportError as exc:
                    got = as_value(exc)  # kept by the policy as a verdict: none of the frames it crossed
                action = policy.send(got)
        except StopIteration as done:
            outcome: Outcome = done.value
            return outcome
