"""An event stream's answer is held to the answer's deadline, never to the notifications' bound (issue 59).

With a `progressToken` the answer is the last event of a stream. Notifications are queued as the
call goes, and a client that lets 4 MiB of them pile up unread is not reading; the answer is
written as a plain JSON answer is, a slice at a time as fast as the client takes it, within one
deadline. A real server and the sandbox gateway; the client reads through a small receive buffer
at a few MB/s, as over a real link. Its access record says whether the answer got out whole.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import logging
import socket
import sys
import termios
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import pytest

from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.admission import SLOT_WAIT
from mcp_server.transports.http.flow import STREAM_BACKLOG
from mcp_server.transports.http.server import McpHTTPServer
from tests.balancer import wait_for
from tests.mcp_http import parse_sse, serving
from tests.sandbox_gateway import SandboxGateway
from tests.test_pacing import MARKETS, many_markets
from tests.test_records import Collected

WAIT: Final = 30.0
# Markets whose gateway body is under the gateway's 4 MiB cap, and whose answer (structured content
# and its text: about 8 MB) is over STREAM_BACKLOG by more than loopback's send buffer may take at
# once (4 MiB): the 4.17 MB answer over a real link, where the kernel takes less.
COUNT: Final = 15_000
READ: Final = 32 * 1024  # bytes a read takes at most
PACE: Final = 0.005  # seconds between two reads: at most 6.5 MB/s, a real link's pace


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    with SandboxGateway() as gateway:
        yield gateway


@contextmanager
def server_and_records(sandbox: SandboxGateway, **options: Any) -> Iterator[tuple[McpHTTPServer, Collected]]:
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=WAIT))
    policy = gate.Policy(loopback_bind=True, max_body=64 * 1024)
    collected = Collected()
    logger = logging.getLogger("fairwins_mcp.access")
    logger.addHandler(collected)
    try:
        with serving(dispatcher, policy, **options) as server:
            yield server, collected
    finally:
        logger.removeHandler(collected)


def asking(server: McpHTTPServer, request_id: int, *, progress: bool = True) -> http.client.HTTPResponse:
    """The markets call, sent on a connection with a small receive buffer; its answer's head read."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # before connect: a small window
    sock.settimeout(WAIT)
    sock.connect(("127.0.0.1", int(server.server_address[1])))
    conn = http.client.HTTPConnection("127.0.0.1", int(server.server_address[1]), timeout=WAIT)
    conn.sock = sock
    meta = {"progressToken": f"p-{request_id}"} if progress else {}
    params = {"name": "get_prediction_markets", "arguments": {"chainId": 137}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    conn.request("POST", "/mcp", body=body.encode(), headers=headers)
    return conn.getresponse()


def unread(response: http.client.HTTPResponse) -> int:
    """Bytes the kernel holds for `response`'s connection that its reader has not taken."""
    sock = response.fp.raw._sock  # type: ignore[attr-defined]  # where http.client keeps the socket
    return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def read_at_link_speed(response: http.client.HTTPResponse) -> bytes:
    """The whole body, read READ bytes at a time with PACE between reads."""
    pace = threading.Event()  # never set: its wait is the interval between reads
    body = bytearray()
    while chunk := response.read(READ):
        body += chunk
        pace.wait(PACE)
    return bytes(body)


def record_of(collected: Collected, request_id: int) -> dict[str, Any]:
    """The access record of the call `request_id`, once it is written (each call writes one)."""
    seen = 1
    while True:
        lines = collected.wait(seen)  # fails the test past its bound
        found = [r for r in lines if r.get("rpcId") == request_id]
        if found:
            return found[0]
        seen = len(lines) + 1


def test_a_large_answer_on_an_event_stream_arrives_whole_at_link_speed_and_is_logged_so(
    sandbox: SandboxGateway,
) -> None:
    sandbox.fault(MARKETS, "status", status=200, body=many_markets(COUNT))
    with server_and_records(sandbox) as (server, collected):
        response = asking(server, 1)
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        body = read_at_link_speed(response)  # http.client raises IncompleteRead on a stream cut short
        response.close()
        record = record_of(collected, 1)
    assert len(body) > STREAM_BACKLOG, "an answer under the notifications' bound tests nothing"
    *notifications, answer = parse_sse(body)
    assert notifications and all(m["method"] == "notifications/progress" for m in notifications)
    assert answer["id"] == 1 and answer["result"]["isError"] is False
    assert len(answer["result"]["structuredContent"]["markets"]) == COUNT
    assert (record["httpRequest"]["status"], record["outcome"]) == (200, "result")


def test_a_stream_whose_client_stops_reading_is_cut_off_at_the_deadline_and_logged_undelivered(
    sandbox: SandboxGateway,
) -> None:
    # One slot, and a client that reads its stream's first event and then nothing: the answer's
    # deadline frees the slot (the next call, waiting SLOT_WAIT for it, is answered, not refused),
    # and the record says the answer did not reach its client (499), not that it was a success.
    sandbox.fault(MARKETS, "status", status=200, body=many_markets(COUNT))
    deadline = SLOT_WAIT / 4
    with server_and_records(sandbox, max_concurrency=1, write_timeout=deadline) as (server, collected):
        stalled = asking(server, 1)
        assert stalled.status == 200 and stalled.read(64)  # then nothing more
        # The result is 8 MB to work out before its first byte, which on a loaded machine can take
        # more than SLOT_WAIT: the next call is sent once the stalled client's kernel holds bytes
        # of the result, so that what it waits for is the deadline alone.
        wait_for(lambda: unread(stalled) > 0, "the stalled stream's result is being written", WAIT)
        plain = asking(server, 2, progress=False)  # waits for the slot the stalled stream holds
        whole = json.loads(plain.read())
        plain.close()
        record = record_of(collected, 1)
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            stalled.read()
        stalled.close()
    assert plain.status == 200 and len(whole["result"]["structuredContent"]["markets"]) == COUNT
    assert (record["httpRequest"]["status"], record["outcome"]) == (499, "result")
