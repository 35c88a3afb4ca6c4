"""The https path to the gateway, against the sandbox gateway served over real TLS.

The server under test trusts the test CA (tests/tls/) the way a member trusts a private one: by
SSL_CERT_FILE, read by the standard library's own default context. Each TLS failure is named in
the member's sentence and in `fairwins-mcp check`, nothing reaches the gateway past a failed
handshake, and nothing can turn verification off.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import os
import pathlib
import re
import selectors
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcp_server.fairwins import payments
from mcp_server.setup import doctor
from mcp_server.setup.config import Config, argument_parser, from_env, parse_args
from mcp_server.upstream import aio, tls
from mcp_server.upstream.gateway import (
    Gateway,
    GatewayFailure,
    GatewayRequest,
    GatewayResponse,
    parse_base_url,
)
from mcp_server.wire import x402
from tests.conftest import PROCFS, ROOT, WAIT, McpClient, client_for, server_env
from tests.gateway_drivers import gateway_driver  # noqa: F401
from tests.outputs import failure_facts
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import canary_payment, header_value, record_output
from tests.test_gateway_faults import connections_to, open_fds
from tests.tls_fixtures import (
    CA_FILE,
    EXPIRED,
    GATEWAY_NAME,
    NOT_YET_VALID,
    SELF_SIGNED,
    UNTRUSTED,
    WRONG_HOST,
    no_shared_cipher,
    old_versions_only,
    server_context,
)

pytestmark = pytest.mark.usefixtures("gateway_driver")

DEADLINE = 1.0  # FAIRWINS_MCP_TIMEOUT for the slow faults
SLACK = 1.0  # scheduling slack on a loaded machine
UNKNOWN = "This is an UNKNOWN, not an empty result"
WAGERS = "/v1/member/wagers"
MIB = 1024 * 1024


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test CA is trusted as a member trusts a private CA: SSL_CERT_FILE names it."""
    monkeypatch.setenv("SSL_CERT_FILE", str(CA_FILE))


@contextlib.contextmanager
def tls_sandbox(
    leaf: str = "gateway", configure: Callable[[ssl.SSLContext], None] | None = None
) -> Iterator[SandboxGateway]:
    with SandboxGateway(tls=server_context(leaf, configure)) as gateway:
        yield gateway


@pytest.fixture
def secure(trusted: None) -> Iterator[SandboxGateway]:
    """The sandbox gateway over TLS with a certificate the test CA issued for 127.0.0.1."""
    with tls_sandbox() as gateway:
        yield gateway


def words(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"])


def wagers(client: McpClient) -> dict[str, Any]:
    return client.call_tool("get_wagers", bearer=TOKEN_MEMBER_A)


def honest_error(result: dict[str, Any], *phrases: str) -> str:
    assert result["isError"] is True, result
    failure_facts(result)  # the failure as data, and no data that could be read as an answer
    text = words(result)
    assert UNKNOWN in text, text
    for phrase in phrases:
        assert any(p in text for p in phrase.split("|")), f"{phrase!r} not in {text!r}"
    return text


def check_report(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """`fairwins-mcp check` in-process against `url`: (exit code, what it printed)."""
    out = io.StringIO()
    config = Config(api_url=url, api_token=TOKEN_MEMBER_A, timeout=timeout)
    code = doctor.run(config, out, gateway=Gateway(url, timeout=timeout))
    return code, out.getvalue()


def gateway_line(report: str) -> str:
    return next(line for line in report.splitlines() if re.match(r"^\S+\s+gateway\s", line))


# ---- the fixtures themselves -------------------------------------------------------------------


def test_the_fixture_certificates_pass_the_strict_checks_newer_pythons_turn_on(trusted: None) -> None:
    # Python 3.13 adds VERIFY_X509_STRICT and VERIFY_X509_PARTIAL_CHAIN to the default context:
    # the fixtures must keep working there, or the suite would break on an upgrade.
    context = tls.context()
    context.verify_flags |= ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN
    with tls_sandbox() as gateway:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=WAIT) as sock:
            secured = context.wrap_socket(sock, server_hostname="127.0.0.1")
            assert secured.version() in ("TLSv1.2", "TLSv1.3")
            assert secured.selected_alpn_protocol() == "http/1.1"


# ---- 1. the https path works ---------------------------------------------------------------------


def test_a_call_over_https_succeeds_with_verification_on_and_reads_what_http_reads(
    secure: SandboxGateway, sandbox: SandboxGateway
) -> None:
    over_tls = wagers(client_for(secure.url))
    over_http = wagers(client_for(sandbox.url))
    assert over_tls["isError"] is False, over_tls
    assert over_tls["structuredContent"] == over_http["structuredContent"]
    assert secure.handshakes == 1 and [r.path for r in secure.seen] == [WAGERS]
    assert secure.seen[0].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"


def test_a_post_with_a_body_goes_over_https_whole(secure: SandboxGateway, sandbox: SandboxGateway) -> None:
    intent = {"intent": "create_wager", "chainId": 137, "params": {"stake": "1.00", "memo": "é" * 40_000}}
    over_tls = client_for(secure.url).call_tool("build_intent", intent, bearer=TOKEN_MEMBER_A)
    over_http = client_for(sandbox.url).call_tool("build_intent", intent, bearer=TOKEN_MEMBER_A)
    assert over_tls["isError"] is False, over_tls
    assert over_tls == over_http
    (seen,) = secure.seen
    assert seen.method == "POST" and seen.body == sandbox.seen[0].body and len(seen.body) > 80_000


def test_a_gateway_named_by_host_name_is_verified_against_that_name(trusted: None) -> None:
    with tls_sandbox() as gateway:
        result = wagers(client_for(f"https://localhost:{gateway.port}"))
    assert result["isError"] is False, result


def test_one_connection_and_one_handshake_serve_many_calls(secure: SandboxGateway) -> None:
    client = client_for(secure.url)
    for _ in range(5):
        assert wagers(client)["isError"] is False
    assert client.call_tool("get_gateway_status")["isError"] is False
    assert len(secure.seen) == 6
    # The public read shares no connection with the member's calls (exchange.pool_key): one handshake each.
    assert secure.handshakes == 2, "every call after the first of its credential must reuse the TLS connection"


def test_a_4_mib_answer_arrives_whole_over_tls(secure: SandboxGateway) -> None:
    secure.fault(WAGERS, "large", size=4 * MIB)
    outcome = Gateway(secure.url, timeout=WAIT).call(GatewayRequest("GET", WAGERS, bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    assert outcome.body == b'{"pad":"' + b"a" * (4 * MIB - 10) + b'"}'


def test_an_answer_one_byte_over_the_cap_is_refused_by_size_over_tls(secure: SandboxGateway) -> None:
    secure.fault(WAGERS, "large", size=4 * MIB + 1)
    outcome = Gateway(secure.url, timeout=WAIT).call(GatewayRequest("GET", WAGERS, bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "too_large"


def test_a_chunked_answer_arrives_whole_over_tls(secure: SandboxGateway) -> None:
    body = b'{"items":[' + b",".join(b'"%06d"' % i for i in range(60_000)) + b"]}"
    sizes = [1, 17, 4096, 65_536, 300_000]
    chunks, offset, i = [], 0, 0
    while offset < len(body):
        piece = body[offset : offset + sizes[i % len(sizes)]]
        chunks.append(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
        offset, i = offset + len(piece), i + 1
    framed = b"".join(chunks) + b"0\r\nX-Trailer: yes\r\n\r\n"
    secure.fault(
        WAGERS,
        "status",
        status=200,
        body=framed,
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    outcome = Gateway(secure.url, timeout=WAIT).call(GatewayRequest("GET", WAGERS, bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayResponse) and outcome.status == 200
    assert outcome.body == body and len(chunks) >= 8


def test_a_reset_in_the_middle_of_the_body_is_an_honest_error_over_tls(secure: SandboxGateway) -> None:
    secure.fault(WAGERS, "reset_mid_body")
    result = wagers(client_for(secure.url, timeout=WAIT))
    # A reset or a short read, whichever the kernel shows first: both are true.
    honest_error(result, "closed in the middle of the answer|the connection was reset")


def test_a_trickle_past_the_deadline_ends_as_an_honest_timeout_over_tls(secure: SandboxGateway) -> None:
    secure.fault(WAGERS, "trickle", interval=0.05)
    started = time.monotonic()
    result = wagers(client_for(secure.url, timeout=DEADLINE))
    elapsed = time.monotonic() - started
    honest_error(result, f"did not answer within {int(DEADLINE)} s")
    assert elapsed < DEADLINE + SLACK


def paid_call(client: McpClient, payment: dict[str, Any]) -> dict[str, Any]:
    params = {"name": "get_wagers", "arguments": {}, "_meta": {x402.PAYMENT_META_KEY: payment}}
    message = client.request("tools/call", params)
    assert "result" in message, message
    result: dict[str, Any] = message["result"]
    return result


def test_a_paid_call_over_tls_goes_once_on_a_fresh_connection_and_brings_its_receipt(
    secure: SandboxGateway,
) -> None:
    client = client_for(secure.url)
    assert client.call_tool("get_gateway_status")["isError"] is False  # a kept-alive connection now exists
    payment = canary_payment(1)
    result = paid_call(client, payment)
    assert result["isError"] is False, result
    assert result["_meta"][payments.RESPONSE_META_KEY]["success"] is True
    paid = [r for r in secure.seen if r.path == WAGERS]
    assert len(paid) == 1 and paid[0].header("X-PAYMENT") == header_value(payment)
    assert paid[0].header("Authorization") is None
    # A paid request never rides a kept-alive connection: "did it arrive?" must be answerable.
    assert secure.handshakes == 2


def test_a_paid_call_whose_handshake_fails_says_the_payment_was_sent_nowhere(trusted: None) -> None:
    with tls_sandbox(UNTRUSTED) as gateway:
        result = paid_call(client_for(gateway.url), canary_payment(1))
        assert gateway.seen == []
    text = words(result)
    assert result["isError"] is True and "not trusted" in text
    assert payments.NOT_SENT in text


def test_a_redirect_from_https_to_http_is_not_followed(secure: SandboxGateway, sandbox: SandboxGateway) -> None:
    secure.fault(WAGERS, "redirect", status=302, location=f"{sandbox.url}{WAGERS}")
    result = wagers(client_for(secure.url))
    honest_error(result, "redirect (HTTP 302), which is not followed")
    assert failure_facts(result, "redirected")["status"] == 302
    assert sandbox.seen == [], "the token went to the http:// address"


# ---- through a proxy ------------------------------------------------------------------------------


class ConnectProxy:
    """An HTTP proxy that serves CONNECT only, as corporate proxies do for https://, and keeps what it relayed.

    `routes` maps the host names it will tunnel to loopback ports; `refuse` answers every CONNECT
    with that status instead.
    """

    def __init__(self, routes: dict[str, int], refuse: int | None = None) -> None:
        self.routes = routes
        self.refuse = refuse
        self.connects: list[str] = []
        self.upstream_bytes = bytearray()  # everything the client sent through the tunnel
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            with self._lock:
                self._sockets.append(client)
                self._threads.append(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            client.settimeout(WAIT)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            with self._lock:
                self.connects.append(request_line)
            method, authority, _ = request_line.split(" ", 2)
            host = authority.rpartition(":")[0]
            if self.refuse is not None or method != "CONNECT" or host not in self.routes:
                client.sendall(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % (self.refuse or 403))
                return
            with socket.create_connection(("127.0.0.1", self.routes[host]), timeout=WAIT) as upstream:
                with self._lock:
                    self._sockets.append(upstream)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                back = threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True)
                back.start()
                self._pipe(client, upstream, True)
                back.join(WAIT)

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while data := source.recv(65536):
                if record:
                    with self._lock:
                        self.upstream_bytes += data
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        close_listener(self._listener)
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(WAIT)
        self._accepting.join(WAIT)


@pytest.fixture
def proxied(secure: SandboxGateway, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectProxy]:
    proxy = ConnectProxy({GATEWAY_NAME: secure.port})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    try:
        yield proxy
    finally:
        proxy.close()


def test_an_https_gateway_is_reached_through_https_proxy_by_a_connect_tunnel_the_proxy_cannot_read(
    secure: SandboxGateway, proxied: ConnectProxy
) -> None:
    # The name does not resolve here: only the proxy knows where it is, as behind a real proxy.
    client = client_for(f"https://{GATEWAY_NAME}:{secure.port}")
    for _ in range(3):
        assert wagers(client)["isError"] is False
    assert proxied.connects == [f"CONNECT {GATEWAY_NAME}:{secure.port} HTTP/1.1"]
    assert secure.handshakes == 1 and len(secure.seen) == 3
    relayed = bytes(proxied.upstream_bytes)
    assert relayed[:1] == b"\x16"  # a TLS handshake record: the proxy carried TLS, nothing else
    assert TOKEN_MEMBER_A.encode() not in relayed and b"/v1/member" not in relayed


def test_a_loopback_https_gateway_never_goes_through_the_proxy(secure: SandboxGateway, proxied: ConnectProxy) -> None:
    assert wagers(client_for(secure.url))["isError"] is False
    assert proxied.connects == []


@pytest.mark.parametrize(
    ("status", "phrase"),
    [
        (407, "the proxy named by HTTPS_PROXY asks for credentials (407), which this server does not send"),
        (403, "the proxy named by HTTPS_PROXY refused to open a tunnel to it (403)"),
    ],
)
def test_a_proxy_that_refuses_the_tunnel_is_named_and_nothing_is_sent(
    secure: SandboxGateway, monkeypatch: pytest.MonkeyPatch, status: int, phrase: str
) -> None:
    proxy = ConnectProxy({GATEWAY_NAME: secure.port}, refuse=status)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    try:
        result = paid_call(client_for(f"https://{GATEWAY_NAME}:{secure.port}"), canary_payment(1))
    finally:
        proxy.close()
    text = honest_error(result, phrase)
    assert payments.NOT_SENT in text and secure.seen == []


@pytest.mark.parametrize("proxy", ["https://proxy.example:3128", "socks5://127.0.0.1:1080"])
def test_a_proxy_url_this_server_cannot_tunnel_through_is_named_not_bypassed(
    monkeypatch: pytest.MonkeyPatch, proxy: str
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    outcome = Gateway(f"https://{GATEWAY_NAME}", timeout=WAIT).call(GatewayRequest("GET", "/status"))
    assert isinstance(outcome, GatewayFailure) and outcome.sent is False
    assert "HTTPS_PROXY is not an http://host:port proxy URL" in outcome.detail
    assert "3128" not in outcome.detail and "1080" not in outcome.detail  # the setting is not echoed


# ---- 2. each TLS failure, named ----------------------------------------------------------------


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection in turn to `serve(conn, stop)`; `stop` is set at close."""

    def __init__(self, serve: Callable[[socket.socket, threading.Event], None]) -> None:
        self.serve = serve
        self.stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.settimeout(WAIT)
                self.serve(conn, self.stop)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        close_listener(self._listener)
        self._thread.join(WAIT)


def close_listener(listener: socket.socket) -> None:
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() waiting on it; close() alone would not
    listener.close()


def answering(answer: bytes) -> Callable[[socket.socket, threading.Event], None]:
    """Answer whatever the client sends first (its ClientHello) with `answer`, then close."""

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(answer)

    return serve


NOT_TRUSTED = "its TLS certificate is not trusted here"
CERT_CASES = [
    pytest.param(UNTRUSTED, f"{NOT_TRUSTED} (self-signed certificate in certificate chain)", id="unknown-ca"),
    pytest.param(SELF_SIGNED, f"{NOT_TRUSTED} (self-signed certificate)", id="self-signed"),
    pytest.param(
        WRONG_HOST,
        "its TLS certificate is not valid for the name 127.0.0.1 (a host name mismatch): check the host",
        id="host-name-mismatch",
    ),
    pytest.param(EXPIRED, "its TLS certificate has expired (or this machine's clock is wrong)", id="expired"),
    pytest.param(
        NOT_YET_VALID, "its TLS certificate is not valid yet (or this machine's clock is wrong)", id="not-yet-valid"
    ),
]


@pytest.mark.parametrize(("leaf", "phrase"), CERT_CASES)
def test_a_certificate_failure_is_named_in_the_members_sentence_and_in_check(
    trusted: None, leaf: str, phrase: str
) -> None:
    with tls_sandbox(leaf) as gateway:
        text = honest_error(wagers(client_for(gateway.url)), f"the gateway could not be reached: {phrase}")
        code, report = check_report(gateway.url)
        # The client refused the certificate: the server saw the handshake end, and never a request.
        assert gateway.wait_for_handshake_failures(2)
        assert gateway.seen == [] and gateway.handshakes == 0
    assert "TLS connection failed" not in text
    assert code == 1
    assert gateway_line(report).startswith("FAIL") and phrase in gateway_line(report)


def test_an_untrusted_certificate_says_how_a_private_ca_or_a_corporate_proxy_is_trusted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the system's CA certificates only
    with tls_sandbox() as gateway:
        text = honest_error(wagers(client_for(gateway.url)), NOT_TRUSTED)
    assert tls.CA_HINT in text and "SSL_CERT_FILE" in text


@pytest.mark.parametrize(
    ("setting", "phrase"),
    [
        ("missing.pem", "SSL_CERT_FILE is set, but to a file that does not exist"),
        ("other-ca.pem", "SSL_CERT_FILE is set, but no certificate in it issued this one"),
    ],
)
def test_an_untrusted_certificate_with_ssl_cert_file_set_says_what_the_file_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, setting: str, phrase: str
) -> None:
    if setting == "other-ca.pem":
        # The other CA's certificate is the second one in untrusted.pem (the chain it serves).
        chain = (CA_FILE.parent / f"{UNTRUSTED}.pem").read_text()
        (tmp_path / setting).write_text("-----BEGIN CERTIFICATE-----" + chain.split("-----BEGIN CERTIFICATE-----")[2])
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / setting))
    with tls_sandbox() as gateway:
        honest_error(
            wagers(client_for(gateway.url)), f"{NOT_TRUSTED} (unable to get local issuer certificate); {phrase}"
        )


HANDSHAKE_CASES = [
    pytest.param(
        old_versions_only,
        "the TLS handshake failed (tlsv1 alert protocol version): it offers no TLS version this client accepts",
        id="tls-1.0-and-1.1-only",
    ),
    pytest.param(
        no_shared_cipher,
        "the TLS handshake failed (sslv3 alert handshake failure): it refused the handshake, usually for want",
        id="no-shared-cipher",
    ),
]


@pytest.mark.parametrize(("configure", "phrase"), HANDSHAKE_CASES)
def test_a_handshake_with_nothing_in_common_is_named_in_the_members_sentence_and_in_check(
    trusted: None, configure: Callable[[ssl.SSLContext], None], phrase: str
) -> None:
    with tls_sandbox(configure=configure) as gateway:
        honest_error(wagers(client_for(gateway.url)), phrase)
        code, report = check_report(gateway.url)
        assert gateway.seen == []
    assert code == 1 and phrase in gateway_line(report)


PLAIN_HTTP = "it answered in plain HTTP, not TLS (that port serves http://, not https://)"
NOT_TLS = "the TLS handshake failed (wrong version number): what it answered is not TLS; check the port"


def test_plain_http_on_an_https_url_is_named_as_such(trusted: None, sandbox: SandboxGateway) -> None:
    url = f"https://127.0.0.1:{sandbox.port}"
    honest_error(wagers(client_for(url)), PLAIN_HTTP)
    code, report = check_report(url)
    assert code == 1 and PLAIN_HTTP in gateway_line(report)
    assert sandbox.seen == [], "no request (and no token) went out in clear"


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        pytest.param(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", PLAIN_HTTP, id="http-status-line"),
        pytest.param(b"SSH-2.0-OpenSSH_9.2p1\r\n", NOT_TLS, id="ssh"),
        pytest.param(b"\x00\x01\x02\x03 garbage \xff" * 8, NOT_TLS, id="garbage"),
        pytest.param(b"", "it closed the connection without answering", id="closed"),
    ],
)
def test_a_server_that_does_not_speak_tls_is_named_by_what_it_said(trusted: None, answer: bytes, phrase: str) -> None:
    with RawServer(answering(answer)) as server:
        text = honest_error(wagers(client_for(server.url)), phrase)
        code, report = check_report(server.url)
    assert code == 1 and phrase in gateway_line(report)
    assert "\x00" not in text and "garbage" not in text  # what it said is named, never quoted


def test_check_as_a_process_names_an_untrusted_certificate_then_passes_once_ssl_cert_file_trusts_it() -> None:
    with tls_sandbox() as gateway:

        def check(**env: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [sys.executable, "-m", "mcp_server", "check"],
                env=server_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **env),
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            record_output("fairwins-mcp check", done.stdout + done.stderr)
            return done

        # PYTHONHTTPSVERIFY=0 turns verification off for urllib's https; it must not reach us.
        untrusted = check(SSL_CERT_FILE="", PYTHONHTTPSVERIFY="0")
        trusted = check(SSL_CERT_FILE=str(CA_FILE))
    assert untrusted.returncode == 1, untrusted.stdout + untrusted.stderr
    assert NOT_TRUSTED in untrusted.stdout and tls.CA_HINT in untrusted.stdout
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert f"ok    gateway  {gateway.url} answers /status" in trusted.stdout
    assert "Everything a member needs works." in trusted.stdout


# ---- 3. nothing weakens verification -------------------------------------------------------------


def test_the_context_requires_a_verified_certificate_for_the_host_name_over_tls_1_2_or_later() -> None:
    context = aio.HttpTransport(MIB)._tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is True
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


# What would relax verification: not one of them may appear in the server's code.
WEAKENING = (
    "CERT_NONE",
    "CERT_OPTIONAL",
    "check_hostname",
    "verify_mode",
    "_create_unverified_context",
    "_create_default_https_context",
    "load_verify_locations",
    "PYTHONHTTPSVERIFY",
    "set_ciphers",
    "maximum_version",
    "TLSv1_1",
    "TLSv1 ",
)


def test_no_code_in_the_server_can_turn_verification_off() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {word}"
        for path in sorted((ROOT / "mcp_server").rglob("*.py"))
        for word in WEAKENING
        if word in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_no_flag_or_setting_is_about_tls_verification() -> None:
    options = [o for action in argument_parser()._actions for o in action.option_strings]
    settings = re.findall(r'"(FAIRWINS_[A-Z_]+)"', (ROOT / "mcp_server" / "setup" / "config.py").read_text())
    assert settings and options
    for name in [*options, *settings]:
        assert not re.search(r"verif|insecure|ssl|tls|cert", name, re.IGNORECASE), name


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8787",
        "http://127.0.0.2:8787",
        "http://localhost:8787",
        "http://[::1]:8787",
        "https://relay.fairwins.app",
        "https://10.0.0.5",
    ],
)
def test_these_gateway_urls_are_accepted(url: str) -> None:
    parse_base_url(url)


@pytest.mark.parametrize(
    "url",
    ["http://relay.fairwins.app", "http://10.0.0.5:8787", "http://192.168.1.2", "http://[2001:db8::1]"],
)
def test_an_http_gateway_that_is_not_this_machine_is_refused_unless_the_operator_says_tokens_may_go_in_clear(
    url: str,
) -> None:
    with pytest.raises(ValueError, match=r"would cross the network in clear text.*--send-token-in-clear"):
        parse_base_url(url)
    assert parse_base_url(url, send_token_in_clear=True).scheme == "http"


def test_a_refused_http_gateway_is_named_in_the_members_sentence_and_in_check_and_never_asked() -> None:
    url = "http://relay.fairwins.app"
    gateway = Gateway(url, timeout=WAIT)
    outcome = gateway.call(GatewayRequest("GET", "/status", bearer=TOKEN_MEMBER_A))
    assert isinstance(outcome, GatewayFailure) and outcome.cause == "not_configured" and outcome.sent is False
    sentence = "FAIRWINS_API_URL is http:// to relay.fairwins.app, which is not this machine"
    honest_error(wagers(client_for(url)), sentence)
    code, report = check_report(url)
    assert code == 1 and sentence in gateway_line(report)


def test_send_token_in_clear_is_a_flag_that_reaches_the_gateway() -> None:
    assert from_env({}, parse_args([])).send_token_in_clear is False
    config = from_env({"FAIRWINS_API_URL": "http://10.0.0.5"}, parse_args(["--send-token-in-clear"]))
    assert config.send_token_in_clear is True
    from mcp_server.setup.server import build_gateway

    gateway = build_gateway(config)
    assert gateway.config_problem is None and gateway.target is not None and gateway.target.host == "10.0.0.5"


def test_the_server_says_at_start_that_it_sends_tokens_in_clear() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_server", "--send-token-in-clear"],
        env=server_env(FAIRWINS_API_URL="http://10.0.0.5:8787"),
        input=b"",
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    stderr = done.stderr.decode()
    record_output("fairwins-mcp --send-token-in-clear", stderr)
    assert done.returncode == 0, stderr
    assert "--send-token-in-clear: member tokens and payments go to http://10.0.0.5:8787 unencrypted" in stderr


@pytest.mark.posix("waits on a child's stdout pipe with a selector: Windows' select() takes sockets only")
def test_the_sandbox_gateway_serves_https_from_the_command_line_for_trying_it_by_hand() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.sandbox_gateway", "--port", "0", "--tls"],
        cwd=ROOT,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        output = b""
        deadline = time.monotonic() + WAIT
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while output.count(b"\n") < 2:  # the URL, then how to trust it
                assert selector.select(deadline - time.monotonic()), f"no banner: {output!r}"
                chunk = os.read(process.stdout.fileno(), 4096)
                assert chunk, f"exited early: {output!r}"
                output += chunk
        banner = output.decode().splitlines()
        url = re.fullmatch(r"sandbox gateway on (https://127\.0\.0\.1:\d+)", banner[0])
        assert url, banner
        assert banner[1].strip() == f"trust its certificate with SSL_CERT_FILE={CA_FILE}"
        code, report = check_report_with_ca(url.group(1))
        assert code == 0, report
    finally:
        process.terminate()
        process.wait(WAIT)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def check_report_with_ca(url: str) -> tuple[int, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SSL_CERT_FILE", str(CA_FILE))
        return check_report(url)


def hanging_up(close_notify: bool, handshakes: list[int]) -> Callable[[socket.socket, threading.Event], None]:
    """Answer one request 200 with keep-alive claimed, then close the TLS connection anyway (idle timeouts do)."""
    context = server_context()

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        with context.wrap_socket(conn, server_side=True) as secured:
            handshakes.append(1)
            data = b""
            while b"\r\n\r\n" not in data and (chunk := secured.recv(65536)):
                data += chunk
            secured.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
            if close_notify:  # as servers that close idle connections cleanly send; others just close
                secured.setblocking(False)  # send it, without waiting for the client's in return
                with contextlib.suppress(ssl.SSLWantReadError):
                    secured.unwrap()

    return serve


@pytest.mark.parametrize("close_notify", [True, False], ids=["close-notify", "bare-close"])
def test_a_kept_tls_connection_the_gateway_closed_is_replaced_at_once_not_retried_after_a_backoff(
    trusted: None, close_notify: bool
) -> None:
    handshakes: list[int] = []
    with RawServer(hanging_up(close_notify, handshakes)) as server:
        gateway = Gateway(server.url, timeout=WAIT)
        first = gateway.call(GatewayRequest("GET", "/a"))
        second = gateway.call(GatewayRequest("GET", "/b"))
    assert isinstance(first, GatewayResponse) and isinstance(second, GatewayResponse), second
    assert second.status == 200 and second.attempts == 1  # a new connection, no backoff, no retry counted
    assert len(handshakes) == 2


def trickling_a_handshake(conn: socket.socket, stop: threading.Event) -> None:
    """Answer a ClientHello with a TLS record header, then one byte of its body every 50 ms: a slowloris handshake."""
    conn.recv(65536)
    conn.sendall(b"\x16\x03\x03\x40\x00")  # a 16 KiB handshake record is coming
    until = time.monotonic() + WAIT  # then it gives up, so a client that waits on fails, not hangs
    while not stop.wait(0.05) and time.monotonic() < until:
        conn.sendall(b"\x00")


@pytest.mark.parametrize("paid", [False, True], ids=["unpaid", "paid"])
def test_a_handshake_trickled_past_the_deadline_ends_at_the_deadline_and_sends_nothing(
    trusted: None, paid: bool
) -> None:
    with RawServer(trickling_a_handshake) as server:
        client = client_for(server.url, timeout=DEADLINE)
        started = time.monotonic()
        result = paid_call(client, canary_payment(1)) if paid else wagers(client)
        elapsed = time.monotonic() - started
    text = honest_error(result, f"did not answer within {int(DEADLINE)} s|did not answer in time")
    assert elapsed < DEADLINE + SLACK
    if paid:
        assert payments.NOT_SENT in text  # the handshake never finished: the request never left


def closes_soon(closed: Callable[[], bool]) -> bool:
    """Whether `closed()` holds within SLACK seconds (asked every 10 ms, never slept on)."""
    pause = threading.Event()
    for _ in range(int(SLACK / 0.01)):
        if closed():
            return True
        pause.wait(0.01)
    return closed()


@PROCFS
def test_no_thread_socket_or_gateway_connection_outlives_a_tls_failure_or_a_fault_over_tls(trusted: None) -> None:
    aio.wait(asyncio.sleep(0))  # this thread's event loop, made once on first use: made before counting
    gc.collect()
    threads_before, fds_before = set(threading.enumerate()), open_fds()
    for leaf in (UNTRUSTED, WRONG_HOST, EXPIRED):
        with tls_sandbox(leaf) as gateway:
            honest_error(wagers(client_for(gateway.url, timeout=DEADLINE)), "its TLS certificate")
            # On an event loop the failed connection is closed on the loop's next turn, which may
            # come just after the answer reached this thread.
            assert closes_soon(lambda: connections_to(gateway.port) == 0), leaf
    for serve in (answering(b"HTTP/1.1 400 Bad Request\r\n\r\n"), answering(b"SSH-2.0-x\r\n"), trickling_a_handshake):
        with RawServer(serve) as server:
            honest_error(wagers(client_for(server.url, timeout=DEADLINE)))
            assert closes_soon(lambda: connections_to(server.port) == 0), serve
    with tls_sandbox() as gateway:
        client = client_for(gateway.url, timeout=DEADLINE)
        for kind, params in (("reset_mid_body", {}), ("trickle", {"interval": 0.05}), ("large", {})):
            gateway.fault(WAGERS, kind, **params)
            honest_error(wagers(client))
            gateway.clear_faults()
            assert closes_soon(lambda: connections_to(gateway.port) <= 1), kind  # at most the one kept for reuse
            assert wagers(client)["isError"] is False, kind  # and never a broken one
        del client
        gc.collect()
        # On an event loop the pool is the loop's: the collected gateway's connection closes on its next turn.
        assert closes_soon(lambda: connections_to(gateway.port) == 0)
    gc.collect()
    assert not [t.name for t in set(threading.enumerate()) - threads_before]
    assert open_fds() - fds_before == set()
