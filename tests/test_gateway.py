"""The one outbound HTTP seam: retry policy against a fake Transport, the rest against real loopback sockets."""

from __future__ import annotations

import random
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcp_server import __version__
from mcp_server.upstream.gateway import (
    Gateway,
    GatewayFailure,
    GatewayRequest,
    GatewayResponse,
    Send,
    Target,
    TransportError,
)
from mcp_server.upstream.retry_after import retry_after_seconds
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.x402 import Payment
from tests.gateway_drivers import gateway_driver  # noqa: F401
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

pytestmark = pytest.mark.usefixtures("gateway_driver")

WAIT = 10.0

# ---- the retry policy, against a fake transport ---------------------------------------------------


@dataclass(frozen=True)
class Sent:
    request: GatewayRequest
    fresh: bool
    at: float
    deadline: float


class ScriptedTransport:
    """A Transport that answers from a script (the last step repeats) and records what it was sent."""

    def __init__(self, *steps: GatewayResponse | TransportError) -> None:
        self.steps = list(steps)
        self.sent: list[Sent] = []
        self.first_sent = threading.Event()

    async def send(
        self, target: Target, request: GatewayRequest, attempt: Send, cancellation: Cancellation
    ) -> GatewayResponse:
        self.sent.append(Sent(request, attempt.fresh, time.monotonic(), attempt.deadline))
        self.first_sent.set()
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, TransportError):
            raise step
        return step


def answer(status: int, *headers: tuple[str, str], body: bytes = b"{}") -> GatewayResponse:
    return GatewayResponse(status, headers, body)


def reset() -> TransportError:
    return TransportError("reset", "the connection was reset", True)


GET = GatewayRequest("GET", "/v1/member/wagers", bearer=TOKEN_MEMBER_A)
POST = GatewayRequest("POST", "/v1/member/intents/build", body=b"{}", bearer=TOKEN_MEMBER_A)
PAID_GET = GatewayRequest("GET", "/v1/member/wagers", payment=Payment("X-PAYMENT", "opaque"))


def seam(transport: ScriptedTransport, timeout: float = 5.0) -> Gateway:
    return Gateway("https://gateway.test", timeout=timeout, transport=transport, rng=random.Random(7))


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_an_unpaid_get_is_retried_on_a_retryable_status_until_it_succeeds(status: int) -> None:
    transport = ScriptedTransport(answer(status), answer(status), answer(200))
    outcome = seam(transport).call(GET)
    assert isinstance(outcome, GatewayResponse)
    assert outcome.status == 200 and outcome.attempts == 3
    assert len(transport.sent) == 3


def test_an_unpaid_get_is_retried_after_a_reset() -> None:
    transport = ScriptedTransport(reset(), answer(200))
    outcome = seam(transport).call(GET)
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200 and outcome.attempts == 2


def test_retries_stop_after_three_attempts_and_the_last_answer_is_the_result() -> None:
    transport = ScriptedTransport(answer(503))
    outcome = seam(transport).call(GET)
    assert isinstance(outcome, GatewayResponse) and outcome.status == 503 and outcome.attempts == 3
    assert len(transport.sent) == 3


def test_resets_that_persist_end_as_a_reset_failure_naming_the_attempts() -> None:
    outcome = seam(ScriptedTransport(reset())).call(GET)
    assert isinstance(outcome, GatewayFailure)
    assert outcome.cause == "reset" and outcome.attempts == 3


@pytest.mark.parametrize("status", [200, 400, 401, 402, 403, 404, 500, 501])
def test_other_statuses_are_never_retried(status: int) -> None:
    transport = ScriptedTransport(answer(status), answer(200))
    outcome = seam(transport).call(GET)
    assert isinstance(outcome, GatewayResponse) and outcome.status == status
    assert len(transport.sent) == 1


@pytest.mark.parametrize("cause", ["timeout", "refused", "dns", "tls", "connection", "too_large", "unreadable"])
def test_failures_other_than_a_reset_are_never_retried(cause: str) -> None:
    transport = ScriptedTransport(TransportError(cause, "why", False), answer(200))
    outcome = seam(transport).call(GET)
    assert isinstance(outcome, GatewayFailure) and outcome.cause == cause
    assert len(transport.sent) == 1


@pytest.mark.parametrize("step", [answer(503), answer(429, ("Retry-After", "0")), reset()], ids=["503", "429", "reset"])
def test_a_post_is_never_retried_and_goes_on_a_fresh_connection(step: GatewayResponse | TransportError) -> None:
    transport = ScriptedTransport(step, answer(200))
    seam(transport).call(POST)
    assert len(transport.sent) == 1
    assert transport.sent[0].fresh is True


@pytest.mark.parametrize("step", [answer(503), answer(429, ("Retry-After", "0")), reset()], ids=["503", "429", "reset"])
def test_a_paid_get_is_never_retried_and_goes_on_a_fresh_connection(step: GatewayResponse | TransportError) -> None:
    transport = ScriptedTransport(step, answer(200))
    seam(transport).call(PAID_GET)
    assert len(transport.sent) == 1
    assert transport.sent[0].fresh is True


def test_an_unpaid_get_may_reuse_a_pooled_connection() -> None:
    transport = ScriptedTransport(answer(200))
    seam(transport).call(GET)
    assert transport.sent[0].fresh is False


def test_backoff_is_jittered_within_half_to_all_of_a_doubling_ceiling_capped_at_two_seconds() -> None:
    gateway = seam(ScriptedTransport(answer(200)))
    for attempt, ceiling in [(1, 0.25), (2, 0.5), (3, 1.0), (4, 2.0), (5, 2.0), (12, 2.0)]:
        samples = [gateway.backoff(attempt) for _ in range(200)]
        assert all(ceiling / 2 <= s <= ceiling for s in samples), (attempt, min(samples), max(samples))
        assert len(set(samples)) > 100, "jittered: retrying clients must not arrive in lockstep"


def test_the_wait_between_retries_is_the_jittered_backoff() -> None:
    transport = ScriptedTransport(answer(503), answer(503), answer(200))
    seam(transport).call(GET)
    first, second = (b.at - a.at for a, b in zip(transport.sent, transport.sent[1:], strict=False))
    assert 0.125 <= first <= 0.25 + 0.5
    assert 0.25 <= second <= 0.5 + 0.5


def test_retry_after_within_the_deadline_is_honoured() -> None:
    transport = ScriptedTransport(answer(429, ("Retry-After", "1")), answer(200))
    outcome = seam(transport, timeout=3.0).call(GET)
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    waited = transport.sent[1].at - transport.sent[0].at
    assert 1.0 <= waited < 2.5


def test_retry_after_longer_than_the_deadline_is_not_waited_and_the_answer_is_returned() -> None:
    transport = ScriptedTransport(answer(429, ("Retry-After", "30")), answer(200))
    started = time.monotonic()
    outcome = seam(transport, timeout=2.0).call(GET)
    assert time.monotonic() - started < 1.0
    assert isinstance(outcome, GatewayResponse)
    assert outcome.status == 429 and outcome.header("Retry-After") == "30" and outcome.attempts == 1
    assert len(transport.sent) == 1


def test_a_backoff_that_would_pass_the_deadline_is_not_waited() -> None:
    transport = ScriptedTransport(answer(503), answer(200))
    outcome = seam(transport, timeout=0.1).call(GET)
    assert len(transport.sent) == 1, "the backoff would have passed the deadline: no retry"
    assert isinstance(outcome, GatewayResponse) and outcome.status == 503


def test_every_attempt_shares_one_deadline() -> None:
    transport = ScriptedTransport(answer(503), answer(503), answer(200))
    seam(transport, timeout=5.0).call(GET)
    assert len({s.deadline for s in transport.sent}) == 1


def test_cancelling_during_a_retry_wait_stops_at_once() -> None:
    transport = ScriptedTransport(answer(429, ("Retry-After", "3")), answer(200))
    cancellation = Cancellation()

    def cancel_after_first_send() -> None:
        if transport.first_sent.wait(WAIT):
            cancellation.cancel()

    canceller = threading.Thread(target=cancel_after_first_send)
    canceller.start()
    started = time.monotonic()
    outcome = seam(transport, timeout=5.0).call(GET, cancellation)
    canceller.join(WAIT)
    assert time.monotonic() - started < 2.0
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "cancelled"
    assert len(transport.sent) == 1


def test_each_retry_is_reported_before_it_waits() -> None:
    reports: list[tuple[int, str, float]] = []
    transport = ScriptedTransport(answer(503), answer(200))
    seam(transport).step(GET, on_retry=lambda attempt, why, delay: reports.append((attempt, why, delay))).run()
    assert len(reports) == 1
    assert reports[0][0] == 1 and "503" in reports[0][1] and 0.125 <= reports[0][2] <= 0.25


@pytest.mark.parametrize("url", [None, ""])
def test_no_base_url_is_a_not_configured_failure_and_nothing_is_sent(url: str | None) -> None:
    transport = ScriptedTransport(answer(200))
    outcome = Gateway(url, transport=transport).call(GET)
    assert isinstance(outcome, GatewayFailure)
    assert outcome.cause == "not_configured" and "FAIRWINS_API_URL is not set" in outcome.detail
    assert outcome.sent is False and transport.sent == []


@pytest.mark.parametrize(
    "url", ["ftp://relay.fairwins.app", "relay.fairwins.app", "https://user:pw@relay.fairwins.app", "https://x/?q=1"]
)
def test_an_unusable_base_url_is_a_not_configured_failure_naming_the_problem(url: str) -> None:
    transport = ScriptedTransport(answer(200))
    outcome = Gateway(url, transport=transport).call(GET)
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "not_configured"
    assert "FAIRWINS_API_URL must" in outcome.detail
    assert transport.sent == []


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(" 0 ") == 0.0
    assert retry_after_seconds("Sun, 29 Nov 2026 20:00:10 GMT", now=1795982400.0) == pytest.approx(10.0)
    assert retry_after_seconds("Sun, 29 Nov 2026 19:00:00 GMT", now=1795982400.0) == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("-5") is None


# ---- real loopback sockets --------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def handle(self) -> None:
        with self.server.lock:
            self.server.connections += 1
        super().handle()

    def do_GET(self) -> None:
        self.server.respond(self)

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass


class LoopbackServer(ThreadingHTTPServer):
    """A tiny HTTP server on 127.0.0.1:0 that counts connections; `respond` decides each answer."""

    daemon_threads = True

    def __init__(self, respond: Callable[[BaseHTTPRequestHandler], None]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.respond = respond
        self.connections = 0
        self.lock = threading.Lock()
        self.released = threading.Event()  # handlers that hold a request open wait on this
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def server_bind(self) -> None:
        # Skip HTTPServer's getfqdn(), which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client hanging up (the size cap, a timeout) is what several tests do on purpose

    def stop(self) -> None:
        self.released.set()
        self.shutdown()
        self.server_close()
        self._thread.join(WAIT)


@pytest.fixture
def loopback() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], LoopbackServer]]:
    servers: list[LoopbackServer] = []

    def start(respond: Callable[[BaseHTTPRequestHandler], None]) -> LoopbackServer:
        server = LoopbackServer(respond)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def json_ok(handler: BaseHTTPRequestHandler) -> None:
    body = b'{"ok":true}'
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_accept_json_and_our_user_agent_are_sent(sandbox: SandboxGateway) -> None:
    outcome = Gateway(sandbox.url, timeout=2).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    seen = sandbox.seen[0]
    assert seen.header("Accept") == "application/json"
    assert seen.header("User-Agent") == f"fairwins-mcp/{__version__}"
    assert seen.header("Authorization") is None


def test_the_bearer_travels_as_an_authorization_header(sandbox: SandboxGateway) -> None:
    outcome = Gateway(sandbox.url, timeout=2).call(GatewayRequest("GET", "/v1/member/me", bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    assert sandbox.seen[0].header_values("Authorization") == [f"Bearer {TOKEN_MEMBER_A}"]


def test_a_base_path_prefix_and_a_trailing_slash_are_kept_once(loopback) -> None:  # type: ignore[no-untyped-def]
    paths: list[str] = []

    def record(handler: BaseHTTPRequestHandler) -> None:
        paths.append(handler.path)
        json_ok(handler)

    server = loopback(record)
    outcome = Gateway(server.url + "/relay/", timeout=2).call(GatewayRequest("GET", "/status", (("q", "a b&c"),)))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    assert paths == ["/relay/status?q=a%20b%26c"]


def test_a_silent_gateway_times_out_within_the_deadline(loopback) -> None:  # type: ignore[no-untyped-def]
    server = loopback(lambda handler: handler.server.released.wait(WAIT))
    started = time.monotonic()
    outcome = Gateway(server.url, timeout=1.0).call(GatewayRequest("GET", "/status"))
    elapsed = time.monotonic() - started
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "timeout"
    assert outcome.sent is True
    assert 0.9 <= elapsed < 2.5


def direct_status(sandbox: SandboxGateway) -> bytes:
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=5) as conn:
        conn.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data.partition(b"\r\n\r\n")[2]


def test_a_trickle_slower_than_the_deadline_ends_within_the_deadline(sandbox: SandboxGateway) -> None:
    whole = len(direct_status(sandbox))  # 566 bytes: a 0.2 s trickle would take almost two minutes
    sandbox.fault("/status", "trickle", interval=0.2)
    started = time.monotonic()
    outcome = Gateway(sandbox.url, timeout=1.0).call(GatewayRequest("GET", "/status"))
    assert time.monotonic() - started < 3.0
    assert not (isinstance(outcome, GatewayResponse) and len(outcome.body) >= whole), "the trickle was not cut"


def test_a_trickle_cut_by_the_deadline_is_a_timeout_not_a_truncated_answer(sandbox: SandboxGateway) -> None:
    # The deadline shuts the socket down; a short read after that is the deadline, not the end of
    # the body. Returning the partial body as a 200 would hand a truncated answer on as if whole.
    sandbox.fault("/status", "trickle", interval=0.2)
    outcome = Gateway(sandbox.url, timeout=1.0).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure), f"a truncated body was returned as an answer: {outcome!r}"
    assert outcome.cause == "timeout"


def test_a_body_shorter_than_its_content_length_is_never_an_answer(loopback) -> None:  # type: ignore[no-untyped-def]
    def short(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        handler.wfile.write(b"[1,2]")
        handler.close_connection = True

    outcome = Gateway(loopback(short).url, timeout=2.0).call(GatewayRequest("POST", "/x", body=b"{}"))
    assert isinstance(outcome, GatewayFailure), f"a truncated body was returned as an answer: {outcome!r}"


def test_a_refused_connection_is_reported_as_refused_and_not_sent() -> None:
    with socket.socket() as bound:  # bound but not listening: connecting to it is refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        started = time.monotonic()
        outcome = Gateway(f"http://127.0.0.1:{port}", timeout=2.0).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure)
    assert outcome.cause == "refused" and outcome.sent is False
    assert time.monotonic() - started < 1.0


def test_a_host_name_that_does_not_resolve_is_reported_as_dns_and_not_sent() -> None:
    outcome = Gateway("https://fairwins-gateway.invalid", timeout=2.0).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure)
    assert outcome.cause == "dns" and outcome.sent is False


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_returned_never_followed_so_the_token_goes_nowhere_else(
    sandbox: SandboxGateway,
    loopback,  # type: ignore[no-untyped-def]
    status: int,
) -> None:
    elsewhere = loopback(json_ok)
    sandbox.fault("/v1/member/me", "redirect", status=status, location=elsewhere.url + "/steal")
    outcome = Gateway(sandbox.url, timeout=2.0).call(GatewayRequest("GET", "/v1/member/me", bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayResponse)
    assert outcome.status == status and outcome.header("Location") == elsewhere.url + "/steal"
    assert elsewhere.connections == 0
    assert len(sandbox.seen) == 1


def test_a_body_over_the_cap_with_a_content_length_is_refused_without_reading_it(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "large", size=1 << 30)  # a client reading it all would take seconds
    started = time.monotonic()
    outcome = Gateway(sandbox.url, timeout=5.0, max_body=64 * 1024).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure)
    assert outcome.cause == "too_large" and "64 KiB" in outcome.detail
    assert time.monotonic() - started < 2.0


def test_a_body_over_the_cap_without_a_content_length_is_cut_at_the_cap(loopback) -> None:  # type: ignore[no-untyped-def]
    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        chunk = b"a" * 65536
        try:
            for _ in range(1000):  # 64 MiB, far past the cap; the client hangs up first
                handler.wfile.write(chunk)
        except OSError:
            pass

    outcome = Gateway(loopback(endless).url, timeout=5.0, max_body=64 * 1024).call(GatewayRequest("GET", "/"))
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "too_large"


def test_a_body_exactly_at_the_cap_is_accepted(loopback) -> None:  # type: ignore[no-untyped-def]
    def exact(handler: BaseHTTPRequestHandler) -> None:
        body = b'"' + b"a" * 1022 + b'"'
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    outcome = Gateway(loopback(exact).url, timeout=2.0, max_body=1024).call(GatewayRequest("GET", "/"))
    assert isinstance(outcome, GatewayResponse) and len(outcome.body) == 1024


def test_keep_alive_reuses_one_connection_for_sequential_gets(loopback) -> None:  # type: ignore[no-untyped-def]
    server = loopback(json_ok)
    gateway = Gateway(server.url, timeout=2.0)
    outcomes = [gateway.call(GatewayRequest("GET", f"/r{i}")) for i in range(3)]
    assert [getattr(o, "status", o) for o in outcomes] == [200, 200, 200]
    assert server.connections == 1


def test_a_post_never_rides_a_pooled_connection_and_is_not_pooled(loopback) -> None:  # type: ignore[no-untyped-def]
    server = loopback(json_ok)
    gateway = Gateway(server.url, timeout=2.0)
    first = gateway.call(GatewayRequest("GET", "/a"))
    post = gateway.call(GatewayRequest("POST", "/b", body=b"{}"))
    last = gateway.call(GatewayRequest("GET", "/c"))
    assert [getattr(o, "status", o) for o in (first, post, last)] == [200, 200, 200]
    assert server.connections == 2  # the GETs share one; the POST had its own


def test_a_pooled_connection_the_gateway_closed_while_idle_is_replaced(loopback) -> None:  # type: ignore[no-untyped-def]
    def then_hang_up(handler: BaseHTTPRequestHandler) -> None:
        json_ok(handler)  # claims keep-alive, then closes anyway (as idle timeouts do)
        handler.close_connection = True

    server = loopback(then_hang_up)
    gateway = Gateway(server.url, timeout=2.0)
    outcomes = [gateway.call(GatewayRequest("GET", f"/r{i}")) for i in range(2)]
    assert [getattr(o, "status", o) for o in outcomes] == [200, 200]


def test_a_reset_before_the_answer_is_reported_as_reset(sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/member/intents/build", "reset_before")
    request = GatewayRequest("POST", "/v1/member/intents/build", body=b"{}", bearer=TOKEN_MEMBER_A)
    outcome = Gateway(sandbox.url, timeout=2.0).call(request)
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "reset"
    assert outcome.sent is True, "a POST that may have arrived must say so"
    assert len(sandbox.seen) == 1, "a POST is sent once"


def test_cancelling_closes_the_wait_on_a_slow_gateway_at_once(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=5)
    cancellation = Cancellation()

    def cancel_when_seen() -> None:
        sandbox.wait_for_requests(1, timeout=WAIT)
        cancellation.cancel()

    canceller = threading.Thread(target=cancel_when_seen)
    canceller.start()
    started = time.monotonic()
    outcome = Gateway(sandbox.url, timeout=8.0).call(GatewayRequest("GET", "/status"), cancellation)
    canceller.join(WAIT)
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "cancelled"
    assert time.monotonic() - started < 3.0


def test_a_call_cancelled_before_it_starts_sends_nothing(sandbox: SandboxGateway) -> None:
    # E.g. stdio: the cancellation arrived while the call still queued for a worker. Sending it
    # anyway spends the gateway's time (and, for a paid call, the payment) on an unwanted answer.
    sandbox.fault("/status", "delay", seconds=5)
    cancellation = Cancellation()
    cancellation.cancel()
    started = time.monotonic()
    outcome = Gateway(sandbox.url, timeout=3.0).call(GatewayRequest("GET", "/status"), cancellation)
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "cancelled"
    assert outcome.sent is False
    assert sandbox.seen == []
    assert time.monotonic() - started < 2.0


def test_environment_proxies_are_never_used_for_plain_http(
    sandbox: SandboxGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Environment only (not our code): a proxy would see the member's token in clear text.
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    outcome = Gateway(sandbox.url, timeout=2.0).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200


def test_large_answers_to_calls_made_at_once_arrive_whole_each_to_its_own_call(loopback) -> None:  # type: ignore[no-untyped-def]
    # On the loop every gateway connection is read into one buffer (upstream/receiving.py). Six
    # calls at once, each answered with its own body of several reads written in pieces, must
    # each get exactly its own bytes: a read kept by reference, not copied, would be overwritten
    # by the next connection's read.
    def bodies(handler: BaseHTTPRequestHandler) -> None:
        n = int(handler.path.rsplit("/", 1)[1])
        body = b'{"n":%d,"pad":"%s"}' % (n, bytes([97 + n]) * (200_000 + 7_919 * n))
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for start in range(0, len(body), 30_000):
            handler.wfile.write(body[start : start + 30_000])
            handler.wfile.flush()
            time.sleep(0.002)  # so the six answers' pieces arrive interleaved

    server = loopback(bodies)
    gateway = Gateway(server.url, timeout=WAIT)
    outcomes: dict[int, object] = {}

    def call(n: int) -> None:
        outcomes[n] = gateway.call(GatewayRequest("GET", f"/big/{n}"))

    threads = [threading.Thread(target=call, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    for n in range(6):
        outcome = outcomes.get(n)
        assert isinstance(outcome, GatewayResponse) and outcome.status == 200, outcome
        assert outcome.body == b'{"n":%d,"pad":"%s"}' % (n, bytes([97 + n]) * (200_000 + 7_919 * n))
