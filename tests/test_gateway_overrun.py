"""A gateway that writes past its answers never hands one member another's answer (issue 59).

The gateway (or a proxy in front of it) writes more than the answer on a kept-alive connection:
the answer twice in one write, twice in two writes a few milliseconds apart, or a `408` and a
close behind it. What is past an answer answers no request; read as the next request's answer,
it hands that call the data of the call before it, another member's.

Here 8 members (each a bearer of their own) and callers with no token call at once through real
server processes, `--http` (whose gateway pool is the event loop's) and stdio (whose calls run on
a thread pool, each thread's on a loop of its own), against a gateway double that labels every answer with
the call and the credential it answers. No call may read another credential's answer: a pooled
connection carries one credential's calls only (exchange.pool_key). Where the copy comes in the
write of its answer, every call reads its own answer and succeeds: the pools ask the parser, TLS
and the kernel whether anything is past an answer, before a connection goes back and before it
is reused (http1.quiet). A copy written milliseconds later, once the connection may carry the
next request, is that request's answer to any HTTP/1.1 client: there a call may read an earlier
answer of the same credential, never another's.

Then the same rules one at a time, where a scheduler cannot hide them: a member's own next call
on their spoiled connection (both drivers), the loop's connection asked before the loop has read
what waits, TLS records held undecrypted, and the partition's key and bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import socket
import ssl
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

import pytest

from mcp_server.upstream import aio, exchange, gateway, tls
from mcp_server.upstream.gateway import GatewayRequest, parse_base_url
from mcp_server.wire.x402 import Payment
from tests.conftest import ROOT, WAIT, StdioProcess, client_for, server_env
from tests.gateway_drivers import gateway_driver  # noqa: F401
from tests.mcp_http import ModernClient
from tests.sandbox_gateway import SandboxGateway
from tests.test_gateway_pool import MODES as SPOILINGS
from tests.test_gateway_pool import _read_request, assert_own_profile, lingering, profile, wait_until_said
from tests.tls_fixtures import CA_FILE, server_context

MEMBERS: Final = 8
ANONYMOUS: Final = "anonymous"  # the label of a call that carried no credential
# A member's label shares nothing with their token, which the server redacts from every answer.
NAMES: Final = ("ada", "bea", "cai", "dov", "eli", "fay", "gus", "hal")
BEARERS: Final = {f"fw1.overrun-token-{n:02d}-7f3k9q": NAMES[n] for n in range(MEMBERS)}
# Every answer is exactly as long as the loop's one read (aio.RECV): a read can end at the
# answer's end with what follows it still in the kernel, where only the kernel can say so.
ANSWER_BYTES: Final = aio.RECV
REQUEST_TIMEOUT: Final = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
LATER: Final = 0.003  # the longest a copy written apart waits behind its answer

# What the gateway writes past each answer.
MODES: Final = {
    "twice_in_one_write": "the whole answer again, in the same write",
    "twice_in_two_writes": f"the whole answer again, in a write of its own 0-{LATER * 1000:.0f} ms later",
    "408_then_close": "a 408 Request Timeout in the same write, then a lingering close",
}


class OverrunGateway:
    """A gateway whose every answer names its call, and which writes past each answer (MODES).

    It answers a member's wagers (GET /v1/member/wagers?chainId=N) and the public markets
    (GET /v1/polymarket/137/markets?q=call-N) alike, labelled "<credential>/<N>" (_answer).
    `connections` counts the connections it accepted.
    """

    def __init__(self, mode: str, *, tls: ssl.SSLContext | None = None) -> None:
        assert mode in MODES, mode
        self.mode, self.tls = mode, tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.connections = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            # Room for both copies, so one sendall is one write the kernel takes whole.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024 * 1024)
            with self.lock:
                self.connections += 1
                self.open.append(sock)
                thread = threading.Thread(target=self._serve, args=(sock, self.connections), daemon=True)
                self.threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket, number: int) -> None:
        sock = raw
        later = random.Random(number)
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(raw, server_side=True)
                with self.lock:
                    self.open.append(sock)
            buf = b""
            while not self.stop.is_set():
                request, buf = _read_request(sock, buf)
                if request is None:
                    return
                answer = _answer(*request[:3])
                if self.mode == "twice_in_one_write":
                    sock.sendall(answer + answer)
                elif self.mode == "twice_in_two_writes":
                    sock.sendall(answer)
                    self.stop.wait(later.uniform(0.0, LATER))
                    sock.sendall(answer)
                else:
                    sock.sendall(answer + REQUEST_TIMEOUT)
                    # A lingering close, as a server ends an idle connection: whatever the client
                    # still sends is read and dropped, so the 408 is not lost to a reset.
                    sock.shutdown(socket.SHUT_WR)
                    while sock.recv(65536):
                        pass
                    return
        except (OSError, ssl.SSLError):
            return  # the client hung up, as it does with a connection it will not reuse
        finally:
            sock.close()

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept, as close() alone does not
        self.listener.close()
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            threads = list(self.threads)
        for thread in threads:
            thread.join(WAIT)


@contextlib.contextmanager
def overrunning(mode: str, *, tls: ssl.SSLContext | None = None) -> Iterator[OverrunGateway]:
    double = OverrunGateway(mode, tls=tls)
    try:
        yield double
    finally:
        double.close()


def _answer(method: str, target: str, headers: list[tuple[str, str]]) -> bytes:
    """The whole HTTP answer to one request, labelled "<credential>/<N>" with the call and its credential.

    One shape answers both reads (answers stay open to fields they do not name), so an answer
    read by the other kind of call still says whose it was: the label is in `q`.
    """
    authorization = next((v for k, v in headers if k.lower() == "authorization"), None)
    seen = BEARERS.get(authorization.removeprefix("Bearer "), "unknown") if authorization else ANONYMOUS
    path, _, query_text = target.partition("?")
    query = dict(urllib.parse.parse_qsl(query_text))
    if method == "GET" and path == "/v1/member/wagers":
        label = f"{seen}/{query['chainId']}"
    elif method == "GET" and path == "/v1/polymarket/137/markets":
        label = f"{seen}/{query['q'].removeprefix('call-')}"
    else:
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    wager = {"id": label, "stake": "1.00", "asset": "USDC", "deadline": "2026-12-01T00:00:00Z", "status": "open"}
    body = {
        "asOf": "2026-11-29T20:00:00Z",
        "chains": [{"chainId": 137, "state": "read", "wagers": [wager]}],
        "chainId": 137,
        "q": label,
        "markets": [],
    }
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    wager["description"] = ""
    unpadded = len(head % 10_000) + len(json.dumps(body))  # the body's length has 5 digits, as padded
    wager["description"] = "x" * (ANSWER_BYTES - unpadded)
    data = json.dumps(body).encode()
    answer = head % len(data) + data
    assert len(answer) == ANSWER_BYTES, len(answer)
    return answer


@dataclass(frozen=True)
class Call:
    """One tool call: whose (a BEARERS label, or ANONYMOUS) and its number, which its answer must carry."""

    credential: str
    number: int  # a member's: the chain id asked for; a public read's: its search text, call-N

    @property
    def bearer(self) -> str | None:
        return next((b for b, label in BEARERS.items() if label == self.credential), None)

    @property
    def params(self) -> dict[str, Any]:
        if self.bearer is None:
            return {"name": "get_prediction_markets", "arguments": {"chainId": 137, "q": f"call-{self.number}"}}
        return {"name": "get_wagers", "arguments": {"chainId": self.number}}

    def read(self, result: dict[str, Any]) -> tuple[str, int] | str:
        """(credential, number) of the call the answer in `result` was written for; or what failed."""
        if result.get("isError") is not False:
            return "failed: " + " ".join(str(b.get("text", "")) for b in result.get("content", []))[:300]
        credential, _, number = str(result["structuredContent"]["q"]).rpartition("/")
        return credential, int(number)


def calls_of(credential: str, first: int, count: int) -> list[Call]:
    return [Call(credential, first + n) for n in range(count)]


@dataclass
class Tally:
    """What the calls read: their own answer, another call's of their credential, another credential's, nothing."""

    own: int = 0
    same_credential: int = 0
    other_credential: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def add(self, call: Call, read: tuple[str, int] | str) -> None:
        if isinstance(read, str):
            self.failed.append(f"{call}: {read}")
        elif read == (call.credential, call.number):
            self.own += 1
        elif read[0] == call.credential:
            self.same_credential += 1
        else:
            self.other_credential.append(f"{call} read {read}")

    def summary(self) -> str:
        return (
            f"{self.own} own, {self.same_credential} another call's of the same credential, "
            f"{len(self.other_credential)} another credential's, {len(self.failed)} failed; "
            f"{(self.other_credential + self.failed)[:5]}"
        )


def held_to_the_rules(mode: str, tally: Tally, total: int) -> None:
    assert not tally.other_credential, f"a call read another credential's answer: {tally.summary()}"
    assert not tally.failed, f"calls failed: {tally.summary()}"
    if mode != "twice_in_two_writes":  # a copy in a write of its own can be any client's next answer
        assert tally.own == total, f"a call read another call's answer: {tally.summary()}"
    assert tally.own + tally.same_credential == total, tally.summary()


# ---- over Streamable HTTP: the event loop's pool ---------------------------------------------------

# Each caller's calls go one after another; every credential's callers, and all callers, at once.
HTTP_CALLS: Final = 8
STREAMS: Final = 2  # callers of each member's, and of each caller with no token
ANONYMOUS_CALLERS: Final = 2
HTTP_TOTAL: Final = HTTP_CALLS * STREAMS * (MEMBERS + ANONYMOUS_CALLERS)


@contextlib.contextmanager
def http_server(gateway_url: str, **env: str) -> Iterator[str]:
    """`python -m mcp_server --http 0` in front of `gateway_url`: its /mcp URL, while the block runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--http", "0"],
        cwd=ROOT,
        env=server_env(FAIRWINS_API_URL=gateway_url, FAIRWINS_MCP_TIMEOUT=str(WAIT), **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    found: list[str] = []
    listening = threading.Event()
    log: list[bytes] = []

    def read_log() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            match = re.search(rb"listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if match is not None and not found:
                found.append(match.group(1).decode())
                listening.set()

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    try:
        assert listening.wait(WAIT), b"".join(log).decode(errors="replace")
        yield found[0]
    finally:
        proc.terminate()
        proc.wait(WAIT)
        reader.join(WAIT)


def over_http(url: str) -> Tally:
    """Every caller's calls, each caller on a thread of its own: what they read."""
    callers = [
        calls_of(label, 1 + n * 1000 + stream * 100, HTTP_CALLS)
        for n, label in enumerate(BEARERS.values())
        for stream in range(STREAMS)
    ]
    callers += [calls_of(ANONYMOUS, 90_000 + n * 100, HTTP_CALLS) for n in range(ANONYMOUS_CALLERS * STREAMS)]

    def run(calls: list[Call]) -> list[tuple[Call, tuple[str, int] | str]]:
        client = ModernClient(url, bearer=calls[0].bearer)
        return [(call, call.read(client.request("tools/call", call.params).result)) for call in calls]

    tally = Tally()
    with ThreadPoolExecutor(len(callers)) as pool:
        for done in pool.map(run, callers):
            for call, read in done:
                tally.add(call, read)
    return tally


@pytest.mark.parametrize("mode", list(MODES))
def test_over_http_no_call_ever_reads_another_credentials_answer(mode: str) -> None:
    with overrunning(mode) as double, http_server(double.url) as url:
        tally = over_http(url)
    held_to_the_rules(mode, tally, HTTP_TOTAL)


def test_over_https_what_tls_holds_past_an_answer_is_seen_before_reuse() -> None:
    # The copy comes in the records behind the answer's: some held in memory, decrypted or not,
    # where no question to the kernel sees them.
    with (
        overrunning("twice_in_one_write", tls=server_context()) as double,
        http_server(double.url, SSL_CERT_FILE=str(CA_FILE)) as url,
    ):
        tally = over_http(url)
    held_to_the_rules("twice_in_one_write", tally, HTTP_TOTAL)


# ---- over stdio: a thread pool, each thread with a loop of its own ------------------------------

STDIO_CALLS: Final = 12  # each member's calls, and as many public reads, all sent at once


@pytest.mark.parametrize("mode", list(MODES))
def test_over_stdio_no_call_ever_reads_another_credentials_answer(mode: str) -> None:
    tally = Tally()
    with overrunning(mode) as double:
        # One stdio server per member, its token in the environment, as a member's own install has it.
        processes = [
            StdioProcess(
                [sys.executable, "-m", "mcp_server"],
                server_env(FAIRWINS_API_URL=double.url, FAIRWINS_MCP_TIMEOUT=str(WAIT), FAIRWINS_API_TOKEN=bearer),
            )
            for bearer in BEARERS
        ]
        try:
            asked: list[dict[int, Call]] = []
            for n, (process, label) in enumerate(zip(processes, BEARERS.values(), strict=True)):
                # Its public reads carry no token, so they share no connection with the member's calls.
                mine = calls_of(label, 1 + n * 1000, STDIO_CALLS) + calls_of(ANONYMOUS, 90_001 + n * 1000, STDIO_CALLS)
                random.Random(n).shuffle(mine)
                asked.append(dict(enumerate(mine, 1)))
                for number, call in asked[-1].items():
                    process.send({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": call.params})
            for process, calls in zip(processes, asked, strict=True):
                while calls:
                    message = process.next_message()
                    assert message is not None, f"stdout ended; stderr:\n{process.stderr}"
                    call = calls.pop(message.get("id"), None)
                    if call is not None:
                        failure = {"isError": True, "content": [{"text": str(message)}]}
                        tally.add(call, call.read(message.get("result", failure)))
        finally:
            for process in processes:
                process.kill()
    held_to_the_rules(mode, tally, 2 * STDIO_CALLS * MEMBERS)


# ---- a member's own next call: the check before reuse, on both drivers ----------------------------


@pytest.mark.usefixtures("gateway_driver")
@pytest.mark.parametrize("mode", list(SPOILINGS))
def test_a_members_next_call_never_takes_their_own_connection_spoiled_while_idle(
    sandbox: SandboxGateway, mode: str
) -> None:
    # The partition is A's own: only the check before reuse keeps A's next call off it.
    with lingering(sandbox, mode) as spoiling:
        client = client_for(spoiling.url, timeout=WAIT)
        assert_own_profile("A", profile(client, "A"))
        wait_until_said(spoiling)
        assert_own_profile("A", profile(client, "A"))
        assert_own_profile("A", profile(client, "A"))
        assert spoiling.spoiled_requests == 0  # nothing was written on the spoiled one
        assert spoiling.connections == 2  # and its replacement was reused


# ---- on the loop: what only the kernel, or only TLS, knows -----------------------------------------

LOOP_HEAD: Final = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
LOOP_BODY: Final = aio.RECV - len(LOOP_HEAD % aio.RECV)
LOOP_ANSWER: Final = LOOP_HEAD % LOOP_BODY + b"x" * LOOP_BODY  # the loop's one read, exactly
REQUEST: Final = b"GET / HTTP/1.1\r\nHost: gw\r\n\r\n"


def on_a_loop(scenario: Callable[[aio._Connection, socket.socket], Coroutine[Any, Any, None]]) -> None:
    """Run `scenario` on a new loop with a gateway connection (a plain wire) and the gateway's end of it."""

    async def run() -> None:
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        _, wire = await loop.create_connection(lambda: aio._Wire(loop), sock=ours)
        conn = aio._Connection(wire)
        try:
            await scenario(conn, theirs)
        finally:
            conn.close()
            theirs.close()

    asyncio.run(asyncio.wait_for(run(), WAIT))


def test_on_the_loop_a_copy_still_in_the_kernel_past_an_answer_keeps_its_connection_out_of_the_pool() -> None:
    assert len(LOOP_ANSWER) == aio.RECV

    async def scenario(conn: aio._Connection, theirs: socket.socket) -> None:
        # The answer and its copy in one write (from a thread: more than a socket pair's buffer).
        writer = threading.Thread(target=theirs.sendall, args=(LOOP_ANSWER + LOOP_ANSWER,))
        writer.start()
        resp = await conn.exchange(REQUEST, 2 * aio.RECV)
        writer.join(WAIT)
        assert resp.status == 200 and len(resp.body) == LOOP_BODY
        assert not resp.keep_alive and not conn.quiet()

    on_a_loop(scenario)


@pytest.mark.parametrize("arrival", ["a byte", "an end"])
def test_on_the_loop_what_arrives_on_a_pooled_connection_is_seen_before_the_loop_reads_it(arrival: str) -> None:
    async def scenario(conn: aio._Connection, theirs: socket.socket) -> None:
        theirs.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        resp = await conn.exchange(REQUEST, 1024)
        assert resp.keep_alive and conn.quiet()
        if arrival == "a byte":
            theirs.sendall(b"H")
        else:
            theirs.shutdown(socket.SHUT_WR)
        # Nothing awaited since: the loop has not read it, and only the kernel can say it came.
        assert not conn.quiet()

    on_a_loop(scenario)


class QuietWire:
    """A wire that has delivered nothing, over a socket with nothing waiting on it."""

    held = False

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()

    def fileno(self) -> int:
        return self.ours.fileno()

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


def test_on_the_loop_tls_records_received_and_not_yet_decrypted_are_held() -> None:
    wire = QuietWire()
    try:
        stream = aio._Tls(wire, "relay.fairwins.test", tls.context())  # type: ignore[arg-type]
        conn = aio._Connection(stream)
        assert conn.quiet()
        stream._in.write(b"\x17\x03\x03\x00\x10" + bytes(16))  # an application data record, not decrypted yet
        assert stream.held and not conn.quiet()
    finally:
        wire.close()


# ---- a CONNECT tunnel: what the proxy writes past its 200 -----------------------------------------


class OverrunProxy:
    """An HTTPS proxy whose 200 to CONNECT (a head as long as one read) has bytes behind it.

    The gateway speaks only after the client's first TLS record, so those bytes are the proxy's:
    read as the gateway's, they would begin the TLS handshake.
    """

    PAST: Final = b"garbage"

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                with client:
                    client.recv(65536)  # the CONNECT request, sent in one write
                    head = b"HTTP/1.1 200 Connection established\r\nX-Pad: %s\r\n\r\n"
                    pad = b"a" * (aio.RECV - len(head % b""))
                    client.sendall(head % pad + self.PAST)
                    client.recv(65536)  # whatever the client sends next, or its close

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(WAIT)


@pytest.mark.usefixtures("gateway_driver")
def test_bytes_a_proxy_writes_past_its_200_to_connect_end_the_call_before_tls_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = OverrunProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        outcome = gateway.Gateway("https://relay.fairwins.test", timeout=WAIT).call(GatewayRequest("GET", "/status"))
    finally:
        proxy.close()
    assert isinstance(outcome, gateway.GatewayFailure), outcome
    assert (outcome.cause, outcome.detail) == ("unreadable", "it was not a well-formed HTTP answer")


# ---- the partition: which calls may share a connection ---------------------------------------------

TARGET: Final = parse_base_url("https://relay.fairwins.test")
TOKEN_A, TOKEN_B = "fw1.partition-a-7f3k", "fw1.partition-b-9q2z"


def key_of(bearer: str | None = None, payment: Payment | None = None) -> exchange.PoolKey | None:
    return exchange.pool_key(TARGET, GatewayRequest("GET", "/v1/member/me", bearer=bearer, payment=payment))


def test_calls_share_a_connection_only_with_the_same_credential_and_a_paid_one_with_none() -> None:
    assert key_of(TOKEN_A) == key_of(TOKEN_A) != key_of(TOKEN_B)
    assert key_of() == ("https", "relay.fairwins.test", 443, b"") != key_of(TOKEN_A)
    assert key_of(payment=Payment("X-PAYMENT", "e30=")) is None
    elsewhere = parse_base_url("https://other.fairwins.test")
    assert exchange.pool_key(elsewhere, GatewayRequest("GET", "/", bearer=TOKEN_A)) != key_of(TOKEN_A)


def test_the_pool_keeps_no_token_only_a_digest_keyed_by_this_process() -> None:
    key = key_of(TOKEN_A)
    assert key is not None
    digest = key[3]
    assert len(digest) == 16 and TOKEN_A not in repr(key) and TOKEN_A.encode() not in digest
    # Another process (another key) knows the same token by another digest.
    other = subprocess.run(
        [sys.executable, "-c", f"from mcp_server.upstream import exchange; print(exchange._digest({TOKEN_A!r}).hex())"],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    )
    assert other.stdout.strip() != digest.hex()


class Idle:
    """A pooled connection as the pool sees it: closed or not."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_loops_pool_keeps_no_more_idle_than_calls_were_in_flight_and_forgets_a_credential_with_its_last() -> None:
    pool = aio.Pool()
    keys = [("https", "relay.fairwins.test", 443, bytes([n])) for n in range(3)]
    left = [Idle() for _ in range(4)]
    for _ in range(3):
        pool.begin()  # three calls at once: three idle connections may be kept
    for key, conn in zip([keys[0], keys[1], keys[0], keys[2]], left, strict=True):
        pool.leave(key, conn)  # type: ignore[arg-type]
    # One more: the one left in longest ago, of the credential served longest ago, is closed.
    assert [conn.closed for conn in left] == [False, True, False, False]
    assert pool.idle == 3 and keys[1] not in pool
    assert pool.take(keys[0]) is left[2] and pool.take(keys[0]) is left[0]  # the newest first
    assert pool.take(keys[0]) is None and keys[0] not in pool and pool.idle == 1
    assert pool.drain() == [left[3]] and pool.idle == 0 and not pool


def test_members_calling_one_at_a_time_leave_one_idle_connection_not_one_each() -> None:
    pool = aio.Pool()
    left = [Idle() for _ in range(5)]
    for n, conn in enumerate(left):
        pool.begin()
        pool.leave(("https", "relay.fairwins.test", 443, bytes([n])), conn)  # type: ignore[arg-type]
        pool.end()
    assert pool.idle == 1 and pool.peak == 1 and pool.calls == 0
    assert [conn.closed for conn in left] == [True, True, True, True, False]


def test_the_loops_pool_holds_at_most_max_idle_however_many_calls_were_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aio, "MAX_IDLE", 2)
    pool = aio.Pool()
    left = [Idle() for _ in range(4)]
    for _ in left:
        pool.begin()
    for n, conn in enumerate(left):
        pool.leave(("https", "relay.fairwins.test", 443, bytes([n])), conn)  # type: ignore[arg-type]
    assert pool.idle == 2 and [conn.closed for conn in left] == [True, True, False, False]


def test_a_thread_calling_with_one_credential_after_another_keeps_the_last_ones_connection_only(
    sandbox: SandboxGateway,
) -> None:
    client = gateway.Gateway(sandbox.url, timeout=WAIT)
    requests = [GatewayRequest("GET", "/v1/member/me", bearer=f"fw1.thread-{n}-7f3k") for n in range(6)]
    for request in requests:
        answer = client.call(request)
        assert isinstance(answer, gateway.GatewayResponse) and answer.status == 401  # answered, the connection kept
    transport = client.transport
    assert isinstance(transport, aio.HttpTransport)
    (pool,) = transport._pools.values()  # the one of this thread's own loop
    assert list(pool) == [exchange.pool_key(parse_base_url(sandbox.url), requests[-1])] and pool.idle == 1
