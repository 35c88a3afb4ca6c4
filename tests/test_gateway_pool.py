"""A pooled gateway connection is never trusted blindly (issue 23): what arrives on it while idle is no answer.

A gateway (or something in front of it) can write on a kept-alive connection while it sits idle
in this server's pool: an unsolicited second answer, a duplicate, a `408` before an
idle close, or just the close. Taken blindly, that connection hands the next member's request
the bytes already waiting on it: member B reads member A's profile, and member C then reads B's.
Each test here has the gateway do one of those things after member A's answer, on the very
connection A's call left in the pool, then has other members call on the same thread (in
process, over one Streamable HTTP connection, and through nginx's pooled upstream): each must
read their own data, and nothing may be written on the spoiled connection. Each member has a
connection of their own, as a pooled connection carries one credential's calls only
(exchange.pool_key); a member's own next call on a spoiled connection is tests/test_gateway_overrun.py's.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.upstream import http1
from tests.conftest import NGINX, WAIT, McpClient, client_for
from tests.gateway_drivers import ClientEnd, gateway_driver  # noqa: F401
from tests.mcp_http import serving
from tests.nginx import Nginx
from tests.sandbox_gateway import (
    ACCOUNT_A,
    ACCOUNT_B,
    TOKEN_MEMBER_A,
    TOKEN_MEMBER_B,
    TOKEN_PROFILE_ONLY,
    SandboxGateway,
)
from tests.test_payments import WAGERS, v1_payment
from tests.tls_fixtures import CA_FILE, server_context

pytestmark = pytest.mark.usefixtures("gateway_driver")

# Three members, told apart by the token id the gateway reports (C is a second token of A's account).
MEMBERS: Final = {
    "A": (TOKEN_MEMBER_A, ACCOUNT_A, "tok_a_7f3k"),
    "B": (TOKEN_MEMBER_B, ACCOUNT_B, "tok_b_9q2z"),
    "C": (TOKEN_PROFILE_ONLY, ACCOUNT_A, "tok_a_3c8d"),
}
LATER: Final = 0.15  # how long after A's answer the unsolicited one is written, as in the issue
HOP_BY_HOP: Final = frozenset({"connection", "keep-alive", "content-length", "transfer-encoding", "host"})

# What the gateway does on the first connection once it has answered member A, while the
# connection waits in the client's pool.
MODES: Final = {
    "unsolicited": f"a second complete 200 with A's data, {LATER} s later",
    "duplicate": "the same answer again at once, in a write of its own",
    "tail": "the answer's head alone, then its body and a whole copy of the answer in one write",
    "timeout_408": f"a 408 Request Timeout and a lingering close, {LATER} s later (an idle timeout)",
    "eof": f"a lingering close without a word, {LATER} s later (an idle timeout)",
}


class LingeringGateway:
    """A gateway in front of the sandbox that says one thing more on its first connection once A is answered.

    Every request is relayed to the sandbox and its answer written back whole (so profiles,
    receipts and the record of payments are the sandbox's own). After the first answer on the
    first connection, `mode` (see MODES) is acted out on it; `written` is set once it has been.
    `connections` counts the connections accepted; `spoiled_requests`, the requests written on the
    first one after that (none, when the client dropped it).
    """

    def __init__(self, sandbox: SandboxGateway, mode: str, *, tls: ssl.SSLContext | None = None) -> None:
        assert mode in MODES, mode
        self.sandbox, self.mode, self.tls = sandbox, mode, tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.connections = 0
        self.spoiled_requests = 0  # requests that reached the first connection after it was spoiled
        self.written = threading.Event()
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
            with self.lock:
                self.connections += 1
                first = self.connections == 1
                self.open.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock, first), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket, first: bool) -> None:
        sock: socket.socket = raw
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(raw, server_side=True)
                with self.lock:
                    self.open.append(sock)
            buf = b""
            spoiled = False
            while True:
                request, buf = _read_request(sock, buf)
                if request is None:
                    return
                if spoiled:
                    with self.lock:
                        self.spoiled_requests += 1
                head, body = self._relay(*request)
                if not first:
                    sock.sendall(head + body)
                    continue
                first = False
                spoiled = True
                if self._misbehave(sock, head, body):
                    return
        except (OSError, ssl.SSLError):
            return  # the client hung up, as it does with a connection it will not reuse
        finally:
            sock.close()

    def _misbehave(self, sock: socket.socket, head: bytes, body: bytes) -> bool:
        """Act out the mode after A's answer; True when the connection is over."""
        answer = head + body
        if self.mode == "tail":
            sock.sendall(head)
            sock.sendall(body + answer)
        else:
            sock.sendall(answer)
        if self.mode in ("unsolicited", "timeout_408", "eof") and self.stop.wait(LATER):
            return True
        if self.mode == "unsolicited":
            sock.sendall(answer)
        elif self.mode == "duplicate":
            sock.sendall(answer)
        elif self.mode == "timeout_408":
            sock.sendall(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        if self.mode in ("timeout_408", "eof"):
            # A lingering close, as servers end an idle connection: no more writes, and whatever
            # the client still sends is read and dropped, so the 408 is not lost to a reset.
            sock.shutdown(socket.SHUT_WR)
            self.written.set()
            if sock.recv(65536):
                with self.lock:
                    self.spoiled_requests += 1
            while sock.recv(65536):
                pass
            return True
        self.written.set()
        return False

    def _relay(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> tuple[bytes, bytes]:
        upstream = http.client.HTTPConnection("127.0.0.1", self.sandbox.port, timeout=WAIT)
        try:
            upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            upstream.putheader("Host", f"127.0.0.1:{self.sandbox.port}")
            for name, value in headers:
                if name.lower() not in HOP_BY_HOP:
                    upstream.putheader(name, value)
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            resp = upstream.getresponse()
            answer = resp.read()
            lines = [f"HTTP/1.1 {resp.status} {resp.reason}"]
            lines += [f"{k}: {v}" for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            lines.append(f"Content-Length: {len(answer)}")
            return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), answer
        finally:
            upstream.close()

    def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept, as close() alone does not
        self.listener.close()
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        for thread in self.threads:
            thread.join(WAIT)


def _read_request(
    sock: socket.socket, buf: bytes
) -> tuple[tuple[str, str, list[tuple[str, str]], bytes] | None, bytes]:
    """The next request on `sock` (None once the client has closed), and the bytes read past it."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        buf += chunk
    raw_head, buf = buf.split(b"\r\n\r\n", 1)
    request_line, *lines = raw_head.decode("latin-1").split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    while len(buf) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        buf += chunk
    return (method, target, headers, buf[:length]), buf[length:]


@contextlib.contextmanager
def lingering(sandbox: SandboxGateway, mode: str, *, tls: ssl.SSLContext | None = None) -> Iterator[LingeringGateway]:
    gateway = LingeringGateway(sandbox, mode, tls=tls)
    try:
        yield gateway
    finally:
        gateway.close()


def profile_of(structured: Any) -> tuple[object, object]:
    assert isinstance(structured, dict), structured
    return structured.get("account"), structured.get("tokenId")


def assert_own_profile(member: str, result: dict[str, Any]) -> None:
    _, account, token_id = MEMBERS[member]
    assert result.get("isError") is False, (member, result)
    assert profile_of(result.get("structuredContent")) == (account, token_id), f"{member} read another's profile"


def wait_until_said(gateway: LingeringGateway) -> None:
    assert gateway.written.wait(WAIT), "the gateway never wrote on the idle connection"


# ---- the check itself, on a connection's two ends ----------------------------------------------

ANSWER: Final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


@contextlib.contextmanager
def answered(extra: bytes = b"") -> Iterator[tuple[ClientEnd, socket.socket, http1.Response]]:
    """A client connection that has read one whole answer (with `extra` written right behind it), and its peer."""
    ours, theirs = socket.socketpair()
    conn = ClientEnd(ours)
    try:
        theirs.sendall(ANSWER + extra)
        response = conn.read_response(1024, 1024)
        yield conn, theirs, response
    finally:
        conn.end()
        theirs.close()


def test_a_connection_that_read_a_whole_answer_is_quiet_and_reusable() -> None:
    with answered() as (conn, _, response):
        assert response.keep_alive and conn.quiet()
        assert conn.quiet()  # asking reads nothing


@pytest.mark.parametrize("arrival", ["a byte", "an end", "a close"])
def test_anything_that_arrives_while_idle_makes_a_connection_not_quiet(arrival: str) -> None:
    with answered() as (conn, theirs, _):
        if arrival == "a byte":
            theirs.sendall(b"H")
        elif arrival == "an end":
            theirs.shutdown(socket.SHUT_WR)
        else:
            theirs.close()
        assert not conn.quiet()


def test_a_closed_connection_is_not_quiet() -> None:
    with answered() as (conn, _, _):
        conn.close()
        assert not conn.quiet()


def test_bytes_read_past_an_answer_make_its_connection_not_reusable() -> None:
    with answered(extra=ANSWER) as (conn, _, response):
        assert response.body == b"{}"
        assert not response.keep_alive and not conn.quiet()


# ---- in process: one thread, one pool ------------------------------------------------------------


def profile(client: McpClient, member: str) -> dict[str, Any]:
    return client.call_tool("get_profile", bearer=MEMBERS[member][0])


def each_reads_their_own_after_the_spoiling(gateway: LingeringGateway) -> None:
    """A, then (once the gateway has spoiled A's idle connection) B and C on one client: each their own."""
    client = client_for(gateway.url, timeout=WAIT)
    assert_own_profile("A", profile(client, "A"))
    wait_until_said(gateway)
    assert_own_profile("B", profile(client, "B"))
    assert_own_profile("C", profile(client, "C"))


@pytest.mark.parametrize("mode", list(MODES))
def test_what_arrives_on_an_idle_pooled_connection_never_reaches_the_next_member(
    sandbox: SandboxGateway, mode: str
) -> None:
    with lingering(sandbox, mode) as gateway:
        each_reads_their_own_after_the_spoiling(gateway)
        # Nothing was written on A's spoiled connection; B and C, other credentials, each had one of their own.
        assert gateway.spoiled_requests == 0
        assert gateway.connections == 3
    assert [r.header("Authorization") for r in sandbox.seen] == [f"Bearer {MEMBERS[m][0]}" for m in "ABC"]


# "tail" over TLS: the copy rides in the record after the head, so part of it is held decrypted
# in memory, past the body, where no poll of the socket sees it.
@pytest.mark.parametrize("mode", ["unsolicited", "tail", "timeout_408", "eof"])
def test_a_pooled_https_connection_is_checked_the_same_way_including_what_tls_holds_in_memory(
    sandbox: SandboxGateway, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(CA_FILE))
    with lingering(sandbox, mode, tls=server_context()) as gateway:
        each_reads_their_own_after_the_spoiling(gateway)
        assert gateway.spoiled_requests == 0
        assert gateway.connections == 3


# ---- over Streamable HTTP: members on one client connection, as a proxy's pooled upstream --------


@contextlib.contextmanager
def served(gateway: LingeringGateway) -> Iterator[int]:
    """The real Streamable HTTP server in front of `gateway`: its port."""
    with serving(build_dispatcher(Config(api_url=gateway.url, timeout=WAIT))) as server:
        yield server.server_address[1]


def mcp_call(conn: http.client.HTTPConnection, member: str | None, message_id: int, **extra: Any) -> Any:
    tool = extra.pop("tool", "get_profile")
    headers = {"Content-Type": "application/json", "Accept": "application/json", **extra}
    if member is not None:
        headers["Authorization"] = f"Bearer {MEMBERS[member][0]}"
    body = {"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 200 and answer.get("id") == message_id, answer
    return answer["result"], dict(resp.getheaders())


@pytest.mark.parametrize("mode", ["unsolicited", "timeout_408"])
def test_members_on_one_streamable_http_connection_each_read_their_own_profile(
    sandbox: SandboxGateway, mode: str
) -> None:
    with lingering(sandbox, mode) as gateway, served(gateway) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        try:
            assert_own_profile("A", mcp_call(conn, "A", 1)[0])
            wait_until_said(gateway)
            assert_own_profile("B", mcp_call(conn, "B", 2)[0])
            assert_own_profile("C", mcp_call(conn, "C", 3)[0])
        finally:
            conn.close()
        assert gateway.spoiled_requests == 0
        assert gateway.connections == 3


@NGINX
def test_through_nginx_members_behind_one_pooled_upstream_each_read_their_own_profile(
    sandbox: SandboxGateway,
) -> None:
    # Each member has a connection of their own to nginx; nginx carries all three calls on one
    # kept-alive upstream connection, so one server thread (and its gateway pool) serves them all.
    with (
        lingering(sandbox, "unsolicited") as gateway,
        served(gateway) as port,
        Nginx(port) as nginx,
    ):
        for number, member in enumerate("ABC", 1):
            conn = http.client.HTTPConnection("127.0.0.1", nginx.port, timeout=WAIT)
            try:
                assert_own_profile(member, mcp_call(conn, member, number)[0])
            finally:
                conn.close()
            if member == "A":
                wait_until_said(gateway)
        assert gateway.spoiled_requests == 0
        assert gateway.connections == 3, nginx.error_log()
        # nginx logs a request once it has sent its answer, so the last line may trail the answer.
        pause, statuses = threading.Event(), [entry.status for entry in nginx.access_log()]
        for _ in range(int(WAIT / 0.01)):
            if len(statuses) >= 3:
                break
            pause.wait(0.01)
            statuses = [entry.status for entry in nginx.access_log()]
        assert statuses == [200, 200, 200]


# ---- a payment is sent at most once ---------------------------------------------------------------


def test_a_paid_call_beside_a_spoiled_pooled_connection_leaves_on_a_fresh_one_and_is_seen_once(
    sandbox: SandboxGateway,
) -> None:
    payment = base64.b64encode(json.dumps(v1_payment()).encode()).decode()
    with lingering(sandbox, "unsolicited") as gateway, served(gateway) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        try:
            assert_own_profile("A", mcp_call(conn, "A", 1)[0])
            wait_until_said(gateway)
            paid, headers = mcp_call(conn, None, 2, tool="get_wagers", **{"X-PAYMENT": payment})
            assert gateway.connections == 2  # the paid call had a connection of its own
            assert_own_profile("B", mcp_call(conn, "B", 3)[0])
        finally:
            conn.close()
        assert gateway.connections == 3  # and B's call one of its own, never A's spoiled one
        assert gateway.spoiled_requests == 0
    assert paid["isError"] is False, paid
    assert set(paid["structuredContent"]) == {"asOf", "chains"}  # wagers, not a profile someone else was sent
    assert headers.get("X-PAYMENT-RESPONSE")
    carried = [r for r in sandbox.seen if r.header("X-PAYMENT") is not None]
    assert [(r.method, r.path, r.header("X-PAYMENT")) for r in carried] == [("GET", WAGERS, payment)]
