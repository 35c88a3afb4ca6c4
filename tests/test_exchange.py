"""One exchange with the gateway, sans-I/O (exchange.Exchange): each event's meaning, without a socket."""

from __future__ import annotations

import time

import pytest

from mcp_server.upstream import http1
from mcp_server.upstream.exchange import Exchange, TransportError
from mcp_server.upstream.gateway import GatewayRequest, GatewayResponse, parse_base_url
from mcp_server.wire.x402 import Payment

TARGET = parse_base_url("https://relay.fairwins.test/api")
TOKEN = "fw1.exchange-a-7f3k"
LATER = time.monotonic() + 3600  # a deadline no test reaches
OK = http1.Response(200, (("Content-Length", "2"),), b"{}", keep_alive=True)


def exchange(request: GatewayRequest | None = None, *, fresh: bool = False) -> Exchange:
    request = request or GatewayRequest("GET", "/v1/member/me", bearer=TOKEN)
    return Exchange(TARGET, request, LATER, fresh, (("traceparent", "00-a-b-01"),), 1024)


def test_the_request_is_written_once_asked_for_and_only_then_counts_as_sent() -> None:
    ex = exchange()
    assert ex.sent is False
    data = ex.writing()
    assert ex.sent is True
    assert data.startswith(b"GET /api/v1/member/me HTTP/1.1\r\nHost: relay.fairwins.test\r\n")
    assert f"Authorization: Bearer {TOKEN}\r\n".encode() in data and b"traceparent: 00-a-b-01\r\n" in data


def test_a_request_that_cannot_be_written_as_http_is_unsendable_and_was_not_sent() -> None:
    with pytest.raises(TransportError) as caught:
        exchange(GatewayRequest("GET", "/v1/member/me", bearer="fw1.\ud800"))
    assert (caught.value.cause, caught.value.sent) == ("unsendable", False)


@pytest.mark.parametrize(("reason", "cause"), [("timeout", "timeout"), ("cancelled", "cancelled")])
def test_once_aborted_nothing_is_written_and_the_first_reason_names_the_failure(reason: str, cause: str) -> None:
    ex = exchange()
    ex.abort(reason)
    ex.abort("timeout" if reason == "cancelled" else "cancelled")  # later reasons do not replace it
    with pytest.raises(TransportError) as caught:
        ex.writing()
    assert (caught.value.cause, caught.value.sent) == (cause, False)


def test_an_answer_read_after_an_abort_is_never_passed_on() -> None:
    ex = exchange()
    ex.writing()
    ex.abort("timeout")  # the deadline closed the connection: the body read may be cut short
    with pytest.raises(TransportError) as caught:
        ex.answered(OK)
    assert (caught.value.cause, caught.value.sent) == ("timeout", True)


def test_an_answer_goes_back_to_the_pool_only_if_it_allows_it_and_the_call_pools_by_a_credential() -> None:
    ex = exchange()
    ex.writing()
    assert ex.answered(OK) == (GatewayResponse(200, OK.headers, b"{}"), True)
    closing = http1.Response(200, (), b"{}", keep_alive=False)
    assert ex.answered(closing)[1] is False
    paid = GatewayRequest("GET", "/v1/x", payment=Payment("PAYMENT-SIGNATURE", "abc"))
    for unpooled in (exchange(fresh=True), exchange(paid)):
        assert unpooled.key is None
        assert unpooled.answered(OK)[1] is False


@pytest.mark.parametrize(
    ("exc", "reused", "aborted", "again"),
    [
        (http1.Closed(partial=False), True, False, True),  # kept alive, closed while idle: answered nothing
        (BrokenPipeError(), True, False, True),
        (http1.Closed(partial=True), True, False, False),  # part of an answer came: the request was read
        (http1.Closed(partial=False), False, False, False),  # a new connection: no second one
        (http1.Closed(partial=False), True, True, False),  # the call was stopped
        (http1.ProtocolError("garbage"), True, False, False),
    ],
    ids=["idle-close", "broken-pipe", "partial", "new-connection", "aborted", "garbage"],
)
def test_only_a_kept_connection_closed_while_idle_is_replaced(
    exc: Exception, reused: bool, aborted: bool, again: bool
) -> None:
    ex = exchange()
    ex.writing()
    if aborted:
        ex.abort("cancelled")
    assert ex.again(exc, reused) is again


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (http1.BodyTooLarge("2048 bytes announced"), "too_large"),
        (http1.Closed(partial=True), "reset"),
        (http1.HeadTooLarge("over"), "unreadable"),
        (http1.ProtocolError("garbage"), "unreadable"),
        (ConnectionRefusedError(), "refused"),
    ],
)
def test_a_failure_is_named_and_says_whether_the_request_may_have_arrived(exc: Exception, cause: str) -> None:
    ex = exchange()
    ex.writing()
    failure = ex.failed(exc)
    assert failure.cause == cause and failure.sent is (cause != "refused")  # refused: nothing got through
    if cause == "too_large":
        assert "1 KiB" in failure.detail
