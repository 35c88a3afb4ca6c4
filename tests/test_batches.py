"""Batches are bounded (issue 12): items, one deadline, the client leaving, answers in memory, one payment.

2025-03-26 is the one revision with JSON-RPC batches. One POST (or one stdio line) of them must
cost no more than the server says: a stated number of items (more is refused whole), one
deadline for the whole batch, nothing more sent to the gateway once the client has gone, a
stated size of answers held, and a payment forwarded at most once, whatever carries it.
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.core import batches
from mcp_server.core.batches import BatchLimits
from mcp_server.core.context import PaymentAllowance, RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import INVALID_REQUEST, Invalid, Message, Notification, Request, error_object, response
from tests.mcp_http import Raw, post, serving
from tests.sandbox_gateway import SandboxGateway
from tests.stdio_harness import StdioHarness
from tests.test_payments import b64, v1_payment

MAX_ITEMS = 64  # the stated maximum (docs/security.md: Limits and their defaults)
OLD = {"MCP-Protocol-Version": "2025-03-26"}


@contextmanager
def running(gateway_url: str | None, *, timeout: float = 5.0) -> Iterator[McpHTTPServer]:
    with serving(build_dispatcher(Config(api_url=gateway_url, timeout=timeout))) as server:
        yield server


def pings(n: int) -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(n)]


def paid_calls(*ids: int) -> list[dict[str, Any]]:
    """get_wagers calls, each carrying the same x402 payment in `_meta`."""
    params = {"name": "get_wagers", "arguments": {}, "_meta": {"x402/payment": v1_payment()}}
    return [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params} for n in ids]


def status_calls(n: int) -> list[dict[str, Any]]:
    params = {"name": "get_gateway_status", "arguments": {}}
    return [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params} for i in range(n)]


def compact(batch: list[Any]) -> bytes:
    return json.dumps(batch, separators=(",", ":")).encode()


# Malformed entries are answered (`-32600`, id null) and so cost as much as calls: every one counts.
OVER_THE_LIMIT_WITH_MALFORMED = {
    "63 calls, 1 and {}": [*status_calls(MAX_ITEMS - 1), 1, {}],
    "65 {}": [{}] * (MAX_ITEMS + 1),
    "200,000 times 1": [1] * 200_000,  # once answered with 27.6 MB, past the 16 MiB answer cap
}


def test_a_batch_at_the_limit_is_answered_item_by_item() -> None:
    with running(None) as server:
        answer = post(server.url, pings(MAX_ITEMS), OLD)
    assert answer.status == 200 and sorted(m["id"] for m in answer.messages) == list(range(MAX_ITEMS))


@pytest.mark.parametrize("items", [MAX_ITEMS + 1, 9600])
def test_a_batch_over_the_limit_is_refused_whole_and_runs_nothing(sandbox: SandboxGateway, items: int) -> None:
    body = json.dumps(status_calls(items), separators=(",", ":")).encode()  # the issue's: 9,600 in under 1 MiB
    with running(sandbox.url) as server:
        answer = post(server.url, body, OLD)
    assert answer.status == 400
    (error,) = answer.messages
    assert error["id"] is None and error["error"]["code"] == -32600
    assert f"{MAX_ITEMS}" in error["error"]["message"] and f"{items}" in error["error"]["message"]
    assert not [r for r in sandbox.seen if r.path == "/status"], "a refused batch sent something to the gateway"


@pytest.mark.parametrize("batch", OVER_THE_LIMIT_WITH_MALFORMED.values(), ids=OVER_THE_LIMIT_WITH_MALFORMED.keys())
def test_malformed_entries_count_toward_the_item_limit(sandbox: SandboxGateway, batch: list[Any]) -> None:
    with running(sandbox.url) as server:
        answer = post(server.url, compact(batch), OLD)
    assert answer.status == 400
    (error,) = answer.messages
    assert error["id"] is None and error["error"]["code"] == -32600
    assert f"a batch of {len(batch)} messages" in error["error"]["message"]
    assert not [r for r in sandbox.seen if r.path == "/status"], "a refused batch sent something to the gateway"


def test_malformed_entries_are_answered_within_the_answer_cap(sandbox: SandboxGateway) -> None:
    # One call whose answer fits the cap on its own, then 63 malformed entries, each owed an error:
    # room is kept for those errors, so the call's answer is the one dropped, and the cap holds.
    sandbox.fault("/status", "large", size=20_000)
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))
    with serving(dispatcher) as server:
        alone = post(server.url, status_calls(1), OLD)
        assert alone.status == 200 and "result" in alone.messages[0]
        cap = len(alone.body) + 1000  # the call's answer and a few errors, not 63 of them
        dispatcher.batch_limits = BatchLimits(max_answer_bytes=cap)
        sandbox.clear_seen()
        answer = post(server.url, compact(status_calls(1) + [1] * (MAX_ITEMS - 1)), OLD)
    assert answer.status == 200
    assert len(answer.body) <= cap, f"{len(answer.body)} bytes of answers against a cap of {cap}"
    call, *malformed = answer.messages
    assert len(malformed) == MAX_ITEMS - 1
    assert all(m["id"] is None and m["error"]["code"] == -32600 for m in malformed)
    assert call["id"] == 0 and call["error"]["code"] == -32000 and "was dropped" in call["error"]["message"]
    assert f"{cap} bytes" in call["error"]["message"]
    assert len([r for r in sandbox.seen if r.path == "/status"]) == 1


def test_a_batch_whose_shortest_answers_pass_the_answer_cap_is_refused_whole(sandbox: SandboxGateway) -> None:
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))
    dispatcher.batch_limits = BatchLimits(max_answer_bytes=4096)
    with serving(dispatcher) as server:
        answer = post(server.url, compact(status_calls(2) + [1, {}] * 20), OLD)
    assert answer.status == 400
    (error,) = answer.messages
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "4096 bytes" in error["error"]["message"] and "nothing in it was run" in error["error"]["message"]
    assert not [r for r in sandbox.seen if r.path == "/status"]


def test_whatever_a_batch_holds_its_answers_stay_within_the_cap() -> None:
    # The core alone, over many shapes: calls with answers of any size, malformed entries with
    # long ids or none, notifications. Whatever `over_limits` lets through is answered entry by
    # entry (a notification excepted) and never past the cap.
    rng = random.Random(23)
    for _ in range(300):
        cap = rng.choice([2_000, 8_000, 40_000])
        items: list[Message] = []
        for n in range(rng.randint(1, MAX_ITEMS)):
            kind = rng.choice(["call", "malformed", "notification"])
            if kind == "call":
                items.append(Request(n, "tools/call", {"size": rng.choice([10, 500, 5_000, 30_000])}))
            elif kind == "malformed":
                some_id = rng.choice([None, n, "é" * rng.randint(1, 300)])
                items.append(Invalid(some_id, error_object(INVALID_REQUEST, "Invalid Request: not an object")))
            else:
                items.append(Notification("notifications/initialized"))
        limits = BatchLimits(max_answer_bytes=cap)

        def answer(item: Message, ctx: RequestContext) -> dict[str, Any] | None:
            if isinstance(item, Request):
                return response(item.id, {"text": "x" * item.params["size"]})
            if isinstance(item, Invalid):
                return {"jsonrpc": "2.0", "id": item.id, "error": item.error}
            return None

        if batches.over_limits(items, limits) is not None:
            continue
        encoded = batches.run(items, limits, Cancellation(), RequestContext, answer)
        owed = [item.id for item in items if isinstance(item, (Request, Invalid))]
        if encoded is None:
            assert not owed
            continue
        assert len(encoded.data) <= cap
        assert [m["id"] for m in json.loads(encoded.data)] == owed


def test_a_payment_in_two_batch_items_reaches_the_gateway_at_most_once(sandbox: SandboxGateway) -> None:
    with running(sandbox.url) as server:
        answer = post(server.url, paid_calls(1, 2), OLD)
    assert answer.status == 200 and sorted(m["id"] for m in answer.messages) == [1, 2]
    paid = [r for r in sandbox.seen if r.header("X-PAYMENT") or r.header("PAYMENT-SIGNATURE")]
    assert len(paid) <= 1, f"one payment reached the gateway {len(paid)} times"
    # The rule that keeps it so: no payment rides on a batch; each paid item is told why, and nothing went out.
    assert not paid
    for message in answer.messages:
        text = message["result"]["content"][0]["text"]
        assert message["result"]["isError"] and "cannot be carried on a batch" in text


def test_one_message_spends_its_payment_at_most_once_whatever_path_spends_it(sandbox: SandboxGateway) -> None:
    # By design, not by the batch rule alone: every context made for one inbound message shares
    # one allowance, so a second paid call from the same message is refused before the gateway.
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))
    allowance = PaymentAllowance()
    results = [
        dispatcher.handle(
            Request(call["id"], call["method"], call["params"]),
            Session(http=True),
            RequestContext(payment_allowance=allowance),
        ).message
        for call in paid_calls(1, 2)
    ]
    assert len([r for r in sandbox.seen if r.header("X-PAYMENT")]) == 1
    second = results[1]
    assert isinstance(second, dict) and "at most once per request" in second["result"]["content"][0]["text"]


def test_a_payment_header_and_meta_payments_on_one_batch_reach_the_gateway_at_most_once(
    sandbox: SandboxGateway,
) -> None:
    with running(sandbox.url) as server:
        answer = post(server.url, paid_calls(1, 2, 3), {**OLD, "X-PAYMENT": b64(v1_payment())})
    assert sorted(m["id"] for m in answer.messages) == [1, 2, 3]
    paid = [r for r in sandbox.seen if r.header("X-PAYMENT") or r.header("PAYMENT-SIGNATURE")]
    assert len(paid) <= 1


def test_a_batch_has_one_deadline_and_every_item_still_gets_an_answer(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=0.4)
    with running(sandbox.url, timeout=1.0) as server:
        answer = post(server.url, status_calls(10), OLD, timeout=30)
    assert answer.status == 200
    by_id = {m["id"]: m for m in answer.messages}
    assert sorted(by_id) == list(range(10))
    timed_out = [m for m in by_id.values() if "error" in m]
    assert timed_out, "ten 0.4 s calls cannot all fit in one 1 s deadline"
    assert all(m["error"]["code"] == -32001 for m in timed_out)
    assert "deadline" in timed_out[-1]["error"]["message"]
    # The call in flight at the deadline is cut short there (the loop's timer fired mid-call), not
    # left to finish: the deadline falls inside one of the 0.4 s calls.
    assert [m for m in timed_out if "it was cancelled" in m["error"]["message"]]
    assert len([r for r in sandbox.seen if r.path == "/status"]) <= 4


def test_a_client_that_leaves_stops_its_batch_and_every_gateway_call(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=0.2)
    body = json.dumps(status_calls(60)).encode()
    with running(sandbox.url, timeout=30.0) as server:
        client = Raw(server.server_address[1])
        client.send(
            b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nMCP-Protocol-Version: 2025-03-26\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        sandbox.wait_for_requests(1, timeout=5)
        client.sock.shutdown(socket.SHUT_RDWR)
        client.close()
        assert server.wait_idle(5.0), "the batch kept running after its client left"
        sent = len([r for r in sandbox.seen if r.path == "/status"])
    assert sent < 10, f"{sent} gateway calls for a client that left after the first"


def test_answers_over_the_batch_budget_are_errors_not_memory(sandbox: SandboxGateway) -> None:
    # Each answer carries a 3 MiB gateway body twice (structuredContent and text): the budget
    # (16 MiB of answers per batch) holds two; the third is dropped, and the rest never run.
    sandbox.fault("/status", "large", size=3 * 1024 * 1024)
    with running(sandbox.url) as server:
        answer = post(server.url, status_calls(5), OLD, timeout=30)
    assert answer.status == 200
    by_id = {m["id"]: m for m in answer.messages}
    assert sorted(by_id) == list(range(5))
    assert "result" in by_id[0] and "result" in by_id[1]
    over = [by_id[i] for i in (2, 3, 4)]
    assert all(m["error"]["code"] == -32000 and "16 MiB" in m["error"]["message"] for m in over)
    assert "was dropped" in by_id[2]["error"]["message"] and "was not run" in by_id[4]["error"]["message"]
    assert len(answer.body) <= 16 * 1024 * 1024
    assert len([r for r in sandbox.seen if r.path == "/status"]) == 3


# ---- stdio shares the dispatcher, and so the bounds --------------------------------------------------


def stdio_batch(
    sandbox: SandboxGateway, batch: list[Any], *, timeout: float = 5.0, dispatcher: Dispatcher | None = None
) -> Any:
    harness = StdioHarness(dispatcher or build_dispatcher(Config(api_url=sandbox.url, timeout=timeout)))
    try:
        init, _ = harness.request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {}})
        assert init["result"]["protocolVersion"] == "2025-03-26"
        harness.send(batch)  # type: ignore[arg-type]
        return harness.next(timeout=30)
    finally:
        harness.close()


def test_a_stdio_batch_over_the_limit_is_refused_whole(sandbox: SandboxGateway) -> None:
    answer = stdio_batch(sandbox, status_calls(MAX_ITEMS + 1))
    assert isinstance(answer, dict) and answer["id"] is None and answer["error"]["code"] == -32600
    assert not [r for r in sandbox.seen if r.path == "/status"]


@pytest.mark.parametrize("batch", OVER_THE_LIMIT_WITH_MALFORMED.values(), ids=OVER_THE_LIMIT_WITH_MALFORMED.keys())
def test_malformed_entries_count_toward_the_stdio_item_limit(sandbox: SandboxGateway, batch: list[Any]) -> None:
    answer = stdio_batch(sandbox, batch)
    assert isinstance(answer, dict) and answer["id"] is None and answer["error"]["code"] == -32600
    assert f"a batch of {len(batch)} messages" in answer["error"]["message"]
    assert not [r for r in sandbox.seen if r.path == "/status"]


def test_malformed_entries_on_stdio_are_answered_within_the_answer_cap(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "large", size=20_000)
    dispatcher = build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))
    alone = stdio_batch(sandbox, status_calls(1), dispatcher=dispatcher)
    assert "result" in alone[0]
    cap = len(compact(alone)) + 1000  # the line is compact ASCII JSON: the same bytes, re-encoded
    dispatcher.batch_limits = BatchLimits(max_answer_bytes=cap)
    sandbox.clear_seen()
    answer = stdio_batch(sandbox, status_calls(1) + [1] * (MAX_ITEMS - 1), dispatcher=dispatcher)
    assert len(compact(answer)) <= cap
    call, *malformed = answer
    assert len(malformed) == MAX_ITEMS - 1 and all(m["error"]["code"] == -32600 for m in malformed)
    assert call["error"]["code"] == -32000 and "was dropped" in call["error"]["message"]
    assert len([r for r in sandbox.seen if r.path == "/status"]) == 1


def test_a_stdio_batch_has_one_deadline(sandbox: SandboxGateway) -> None:
    sandbox.fault("/status", "delay", seconds=0.4)
    answer = stdio_batch(sandbox, status_calls(10), timeout=1.0)
    assert isinstance(answer, list) and sorted(m["id"] for m in answer) == list(range(10))
    late = [m for m in answer if m.get("error", {}).get("code") == -32001]
    assert [m for m in late if "it was cancelled" in m["error"]["message"]]  # cut short mid-call


def test_a_payment_in_two_stdio_batch_items_reaches_the_gateway_at_most_once(sandbox: SandboxGateway) -> None:
    answer = stdio_batch(sandbox, paid_calls(1, 2))
    assert sorted(m["id"] for m in answer) == [1, 2]
    assert len([r for r in sandbox.seen if r.header("X-PAYMENT")]) <= 1
