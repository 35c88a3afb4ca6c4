"""Seeded fuzzing of the pure core, the stdio transport and the HTTP transport with hostile messages.

The property, for every input: a request gets exactly one well-formed JSON-RPC answer carrying
its id (the null id when its id could not be read), a notification or a client response gets
none, nothing raises out of the core, nothing is an internal error, only valid messages reach
stdout, and `ping` is answered afterwards. The expectation for each input is computed by an
oracle written from JSON-RPC 2.0 §4–§6, not from the server's code.

Deterministic: every generator is `random.Random(seed)`; a failure names the seed and the input.
"""

from __future__ import annotations

import http.client
import io
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.setup.server import build_catalog
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.transports.stdio import MAX_LINE, StdioServer
from mcp_server.upstream.gateway import Gateway, GatewayRequest, GatewayResponse, Send, Target
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import Batch, Encoded, Request, Verbatim, dumps, parse
from mcp_server.wire.versions import META_CAPABILITIES, META_VERSION, SUPPORTED_VERSIONS
from tests import catalog
from tests.conftest import ROOT, SIGNAL_STOP, server_env
from tests.samples import VALID_ARGUMENTS

WAIT = 20.0
INTERNAL_ERROR = -32603
MIB = 1024 * 1024

# ---- the oracle ---------------------------------------------------------------------------------


def id_key(value: object) -> tuple[str, object]:
    """Ids compare by type too: 1, "1" and True are three different things."""
    return (type(value).__name__, value)


@dataclass(frozen=True)
class One:
    """Exactly one answer, under this id (None: the null id); `request` when a result is possible."""

    id: object
    request: bool = False


@dataclass(frozen=True)
class Nothing:
    """No answer at all (a notification, or a response the client sent)."""


@dataclass(frozen=True)
class Many:
    """A batch: one answer per item that earns one, or the batch refused with one null-id error."""

    items: tuple[One | Nothing, ...]


Expectation = One | Nothing | Many


def _readable_id(value: object) -> bool:
    # JSON-RPC 2.0 §4 with MCP's narrowing: a string or an integer, never null, a float or a bool.
    return isinstance(value, str) or type(value) is int


def _expect_object(obj: object) -> One | Nothing:
    if not isinstance(obj, dict):
        return One(None)  # §5: "Invalid Request", and no id can be read from a non-object
    the_id = obj.get("id") if _readable_id(obj.get("id")) else None
    if obj.get("jsonrpc") != "2.0":
        return One(the_id)
    method = obj.get("method")
    if method is None and ("result" in obj or "error" in obj):
        return Nothing()  # a response the client sent; the server never asked anything
    if not isinstance(method, str):
        return One(the_id)
    if "id" not in obj:
        return Nothing()  # §4.1: "The Server MUST NOT reply to a Notification", whatever its params
    if not _readable_id(obj["id"]):
        return One(None)
    return One(obj["id"], request=True)


def _no_constants(name: str) -> object:
    raise ValueError(name)


def expect(data: bytes) -> Expectation:
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return One(None)  # §5.1 parse error: "id: Null"
    if isinstance(value, list):
        if not value:
            return One(None)
        return Many(tuple(_expect_object(item) for item in value))
    return _expect_object(value)


def check_message(message: object, where: str) -> None:
    """Any message the server sends: a response or a notification, JSON-RPC 2.0 shaped."""
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", where
    if "method" in message:
        assert isinstance(message["method"], str) and "id" not in message, where
        assert set(message) <= {"jsonrpc", "method", "params"}, where
        return
    assert set(message) <= {"jsonrpc", "id", "result", "error"} and "id" in message, where
    assert ("result" in message) != ("error" in message), where
    if "error" in message:
        error = message["error"]
        assert type(error.get("code")) is int and isinstance(error.get("message"), str), where
        # -32603 with a sentence is a deliberate answer (a resource the gateway could not serve);
        # the generic "Internal error" is an exception that escaped a handler: a bug.
        assert (error["code"], error["message"]) != (INTERNAL_ERROR, "Internal error"), f"an exception escaped: {where}"
    else:
        assert isinstance(message["result"], dict), where


def check_answer(answer: object, expected: One, where: str) -> None:
    check_message(answer, where)
    assert isinstance(answer, dict) and "method" not in answer, where
    assert id_key(answer["id"]) == id_key(expected.id), f"answered under id {answer['id']!r}: {where}"
    if not expected.request:
        assert "error" in answer, where


def check_batch_answer(answer: object, expected: Many, where: str) -> None:
    """An array with one answer per answerable item (any order, §6), or one refusal of the whole batch."""
    if isinstance(answer, dict):
        check_answer(answer, One(None), where)
        return
    assert isinstance(answer, list) and answer, where
    wanted = Counter(id_key(item.id) for item in expected.items if isinstance(item, One))
    got = Counter(id_key(item["id"]) if isinstance(item, dict) else None for item in answer)
    assert got == wanted, where
    for item in answer:
        check_message(item, where)


# ---- the generator -------------------------------------------------------------------------------

METHODS = (
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read",
    "resources/templates/list", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
    "server/discover", "resources/subscribe", "sampling/createMessage", "notifications/initialized",
    "notifications/progress", "notifications/roots/list_changed", "rpc.discover", "", "tools/list/",
    "TOOLS/LIST", "\u2028", "x" * 300,
)  # fmt: skip
# Every tool served, the contract's tool this server does not serve, and names of none.
TOOLS = (*catalog.SERVED, "find_in_app", "no_such_tool", "")
URIS = ("fairwins://openapi", "fairwins://status", "fairwins://guide", "fairwins://", "file:///etc/passwd", "")
ODD_STRINGS = (
    "", " ", "\u2028", "\u2029", "a\u2028b\u2029c", "\x00", "\n", "\r\n", '"', "\\", "é", "💸", "\ud800",
    "\udfff", "\ufeff", "null", "0", "../../", "%2e%2e/", "=?base64?dG9vbHMvbGlzdA==?=", "<script>",
)  # fmt: skip
ODD_NUMBERS = (
    0,
    -1,
    1,
    2**31,
    -(2**31),
    2**53 + 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    -(10**30),
    0.5,
    -0.0,
    1e308,
    1.0,
)


class Gen:
    """Random JSON-RPC traffic, good and bad, from one seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seq = 0

    def string(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.4:
            return rng.choice(ODD_STRINGS)
        if roll < 0.7:
            return "".join(rng.choice("ab/_-.:{}%\u2028é💸 ") for _ in range(rng.randint(0, 12)))
        return "".join(
            chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
            for _ in range(rng.randint(1, 8))
        )

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        kinds = ["null", "bool", "int", "num", "str", "str"] + (["list", "dict"] if depth < 4 else [])
        kind = rng.choice(kinds)
        if kind == "null":
            return None
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "int":
            return rng.choice([rng.randint(-1000, 1000), rng.choice(ODD_NUMBERS)])
        if kind == "num":
            return rng.choice([rng.uniform(-1e6, 1e6), *ODD_NUMBERS])
        if kind == "str":
            return self.string()
        if kind == "list":
            return [self.value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {self.string(): self.value(depth + 1) for _ in range(rng.randint(0, 4))}

    def fresh_id(self) -> str | int:
        """An id no other message in a run uses, drawn from the awkward corners of the id space."""
        self.seq += 1
        n = self.seq
        choices: list[str | int] = [
            7 * 10**15 + n,
            -(7 * 10**15) - n,
            10**100 + n,
            -(10**50) - n,
            2**63 + n,
            f"id-{n}",
            f"id-{n}-\u2028-\u2029",
            f'id-{n}-"quoted"\\',
            f"id-{n}-\ud800",
            f"id-{n}-" + "z" * 2000,
            f"id-{n}-💸é\x00",
        ]
        return self.rng.choice(choices)

    def meta(self) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            return {"progressToken": rng.choice([self.fresh_id(), self.value()])}
        if roll < 0.6:
            meta = {
                META_VERSION: rng.choice([*SUPPORTED_VERSIONS, "2026-07-28", "1999-01-01", self.value()]),
                META_CAPABILITIES: rng.choice([{}, {"sampling": {}}, self.value()]),
            }
            if rng.random() < 0.5:
                del meta[rng.choice(list(meta))]
            if rng.random() < 0.3:
                meta["io.modelcontextprotocol/logLevel"] = rng.choice(["debug", "info", "loud", self.value()])
            return meta
        return self.value()

    def params(self, method: str) -> Any:
        rng = self.rng
        if rng.random() < 0.15:
            return self.value()  # params of any type, often not an object
        params: dict[str, Any] = {}
        if method == "tools/call":
            tool = rng.choice(TOOLS[:9]) if rng.random() < 0.8 else rng.choice([*TOOLS, self.value(), None])
            params["name"] = tool
            arguments = dict(VALID_ARGUMENTS.get(tool, {})) if isinstance(tool, str) else {}
            if rng.random() < 0.5:
                # One field wrong, missing or extra: a tool error naming it, never a crash.
                field = rng.choice([*arguments, self.string()]) if arguments else self.string()
                if rng.random() < 0.2:
                    arguments.pop(field, None)
                else:
                    arguments[field] = self.value()
            params["arguments"] = arguments if rng.random() < 0.9 else self.value()
        elif method in ("resources/read", "resources/subscribe"):
            params["uri"] = rng.choice([*URIS, self.value()])
        elif method == "prompts/get":
            params["name"] = rng.choice(["wager-review", "portfolio-briefing", "nope", self.value()])
            params["arguments"] = rng.choice([{}, {"chainId": "137"}, {"chainId": 137}, self.value()])
        elif method == "completion/complete":
            params["ref"] = rng.choice([{"type": "ref/prompt", "name": "wager-review"}, self.value()])
            params["argument"] = rng.choice([{"name": "chainId", "value": self.string()}, self.value()])
        elif method == "initialize":
            params["protocolVersion"] = rng.choice([*SUPPORTED_VERSIONS, self.value()])
            params["capabilities"] = rng.choice([{}, self.value()])
        elif method == "logging/setLevel":
            params["level"] = rng.choice(["debug", "error", self.value()])
        elif method.endswith("list"):
            if rng.random() < 0.5:
                params["cursor"] = self.value()
        for _ in range(rng.randint(0, 2)):
            params[self.string()] = self.value()  # unknown params
        if rng.random() < 0.4:
            params["_meta"] = self.meta()
        return params

    def obj(self, *, unique_ids: bool) -> dict[str, Any] | Any:
        """One JSON value meant as a message: usually an object, sometimes not."""
        rng = self.rng
        method = rng.choice(METHODS) if rng.random() < 0.3 else rng.choice(METHODS[:12])
        kind = rng.choices(
            ["request", "notification", "cancel", "response", "bad_id", "bad_jsonrpc", "bad_method", "not_object"],
            [62, 12, 3, 5, 5, 5, 5, 3],
        )[0]
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        if kind == "not_object":
            return rng.choice([self.value(), [], "ping", 1, None])
        if kind == "response":
            message["id"] = self.fresh_id() if unique_ids else self.value()
            message[rng.choice(["result", "error"])] = self.value()
            return message
        if kind == "cancel":
            # Only ids no request carries: cancelling a real request would rightly drop its answer.
            message["method"] = "notifications/cancelled"
            message["params"] = {"requestId": f"never-{self.seq}", "reason": self.string()}
            return message
        message["method"] = method
        if rng.random() < 0.85:
            message["params"] = self.params(method)
        if kind in ("request", "bad_jsonrpc", "bad_method"):
            message["id"] = self.fresh_id() if unique_ids or rng.random() < 0.5 else rng.choice([0, -1, "", 2**70])
        if kind == "bad_id":
            message["id"] = rng.choice([None, 1.5, True, False, [], {}, [1], {"id": 1}, 1.0, -0.0, 1e300])
        if kind == "bad_jsonrpc":
            message["jsonrpc"] = rng.choice(["1.0", 2.0, 2, None, "2.0 ", ""])
            if rng.random() < 0.3:
                del message["jsonrpc"]
        if kind == "bad_method":
            message["method"] = rng.choice([None, 1, [], {}, True]) if rng.random() < 0.8 else self.value()
            if message["method"] is None and rng.random() < 0.5:
                del message["method"]
        return message

    def encode(self, value: Any) -> bytes:
        text = json.dumps(value, ensure_ascii=self.rng.random() < 0.5)
        return text.encode("utf-8", "surrogatepass")  # a lone surrogate is as invalid raw as it is allowed escaped

    def garbage(self) -> bytes:
        rng = self.rng
        choices: list[Callable[[], bytes]] = [
            lambda: bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 60))),
            lambda: self.encode(self.obj(unique_ids=False))[: rng.randint(1, 30)],  # truncated
            lambda: b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff\xfe"}}',
            lambda: b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xed\xa0\x80"}}',  # raw surrogate
            lambda: b"[" * 100_000 + b"]" * 100_000,
            lambda: b'{"a":' * 5000 + b"1" + b"}" * 5000,
            lambda: b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}',
            lambda: b'{"jsonrpc":"2.0","id":Infinity,"method":"ping"}',
            lambda: b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
            lambda: b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}',  # a BOM
            lambda: b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',  # past int digit limits
            lambda: b"{}",
            lambda: b"[]",
            lambda: b"null",
            lambda: b'"just a string"',
            lambda: b"'single quotes'",
            lambda: b"\x00",
        ]
        return rng.choice(choices)()

    def message(self, *, unique_ids: bool, allow_batches: bool = True) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.08:
            return self.garbage()
        if roll < 0.2 and allow_batches:
            return self.encode([self.obj(unique_ids=unique_ids) for _ in range(rng.randint(1, 5))])
        return self.encode(self.obj(unique_ids=unique_ids))


def wrong_type_messages() -> Iterator[bytes]:
    """Every field of every method and tool argument, given a value of every wrong type."""
    wrong: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "x", [], [1], {}, {"a": 1}]
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    n = 0
    for name in envelope:
        for value in wrong:
            n += 1
            yield json.dumps({**envelope, name: value}).encode()
    fields: dict[str, dict[str, Any]] = {
        "tools/call": {"name": "get_wagers", "arguments": {}, "_meta": {}},
        "resources/read": {"uri": "fairwins://guide"},
        "prompts/get": {"name": "wager-review", "arguments": {}},
        "completion/complete": {
            "ref": {"type": "ref/prompt", "name": "wager-review"},
            "argument": {"name": "chainId", "value": ""},
        },
        "initialize": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}},
        "logging/setLevel": {"level": "info"},
        "tools/list": {"cursor": None},
        "server/discover": {"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}}},
    }  # fmt: skip
    for method, params in fields.items():
        for name in params:
            for value in wrong:
                n += 1
                yield json.dumps(
                    {"jsonrpc": "2.0", "id": n, "method": method, "params": {**params, name: value}}
                ).encode()
    for tool, args in VALID_ARGUMENTS.items():
        for name in args:
            for value in wrong:
                n += 1
                params = {"name": tool, "arguments": {**args, name: value}}
                yield json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode()
    meta_fields = {
        META_VERSION: "2026-07-28",
        META_CAPABILITIES: {},
        "io.modelcontextprotocol/logLevel": "info",
        "progressToken": 1,
    }
    for name in meta_fields:
        for value in wrong:
            n += 1
            meta = {**meta_fields, name: value}
            yield json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {"_meta": meta}}).encode()


# ---- the gateway the core talks to: canned answers, no network --------------------------------------


class CannedTransport:
    """A gateway that answers everything at once with one of a few plausible bodies (a fake, not a mock)."""

    BODIES = (
        b'{"asOf":"2026-11-29T20:00:00Z","chains":[{"chainId":137,"state":"read","wagers":[]},'
        b'{"chainId":8453,"state":"unreadable","reason":"r"},{"chainId":1,"state":"not-configured"}]}',
        b'{"status":"ok","note":"\xe2\x80\xa8 line separator"}',
        b"[]",
        b"<html>not json</html>",
    )

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    async def send(
        self, target: Target, request: GatewayRequest, attempt: Send, cancellation: Cancellation
    ) -> GatewayResponse:
        with self.lock:
            self.n += 1
            body = self.BODIES[self.n % len(self.BODIES)]
        return GatewayResponse(200, (("Content-Type", "application/json"),), body)


def canned_dispatcher() -> Dispatcher:
    gateway = Gateway("https://gateway.invalid", timeout=2.0, transport=CannedTransport())
    return Dispatcher(build_catalog(gateway))


# ---- the pure core ---------------------------------------------------------------------------------


def run_core(dispatcher: Dispatcher, data: bytes, session: Session, http_headers: dict[str, str] | None) -> None:
    where = f"input {data[:300]!r}"
    expected = expect(data)
    message = parse(data)
    ctx_sent: list[dict[str, Any]] = []

    def make_ctx() -> RequestContext:
        return RequestContext(send=ctx_sent.append, http_headers=http_headers)

    if isinstance(message, Batch):
        assert isinstance(expected, Many), where
        reply = dispatcher.handle_batch(message, session, make_ctx)
        if reply.message is None:
            assert all(isinstance(item, Nothing) for item in expected.items), where
        else:
            check_batch_answer(json.loads(dumps(reply.message)), expected, where)
    else:
        reply = dispatcher.handle(message, session, make_ctx())
        if isinstance(expected, Nothing):
            assert reply.message is None, f"answered {reply.message!r}: {where}"
        else:
            assert isinstance(expected, One), where
            check_answer(reply.message, expected, where)
    for sent in ctx_sent:
        check_message(sent, where)
    if reply.message is not None:
        line = dumps(reply.message)  # must encode, as one line, and read back as what it was
        # An answer passed on verbatim is read back as the value its bytes hold.
        original = line if isinstance(reply.message, Encoded) else json.dumps(reply.message, default=Verbatim.value)
        assert b"\n" not in line and json.loads(line) == mended(json.loads(original))


def mended(value: Any, top: bool = True) -> Any:
    """A message (or a batch's) as the server writes it: a lone surrogate in any string but an id as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [mended(item, top) for item in value]  # a batch's messages are each a message
    if isinstance(value, dict):
        return {mended(k, False): (v if top and k == "id" else mended(v, False)) for k, v in value.items()}
    return value


@pytest.mark.parametrize("seed", range(10))
def test_the_core_answers_every_request_once_and_never_a_notification(seed: int) -> None:
    dispatcher = canned_dispatcher()
    gen = Gen(seed)
    stdio_session = Session(http=False)
    for _ in range(1000):
        data = gen.message(unique_ids=False)
        roll = gen.rng.random()
        if roll < 0.4:
            session, headers = stdio_session, None  # one long-lived stdio session, as a process has
        elif roll < 0.6:
            session, headers = Session(http=True, version="2025-03-26"), {"mcp-protocol-version": "2025-03-26"}
        else:
            session, headers = Session(http=True), {}
        run_core(dispatcher, data, session, headers)
    assert dispatcher.handle(Request("after", "ping", {}), stdio_session, RequestContext()).message == {
        "jsonrpc": "2.0", "id": "after", "result": {}
    }  # fmt: skip


def test_the_core_handles_a_wrong_type_in_every_field_without_an_internal_error() -> None:
    dispatcher = canned_dispatcher()
    count = 0
    for data in wrong_type_messages():
        run_core(dispatcher, data, Session(http=False), None)
        run_core(dispatcher, data, Session(http=True), {})
        count += 1
    assert count > 300


def test_the_core_reads_a_one_mib_string_anywhere() -> None:
    dispatcher = canned_dispatcher()
    big = "\u2028" + "é" * MIB + "\u2029"
    messages = [
        {"jsonrpc": "2.0", "id": big, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": big},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": big}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "get_prediction_markets", "arguments": {"q": big}}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": big}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {"progressToken": big}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": big}},
    ]  # fmt: skip
    for message in messages:
        run_core(dispatcher, json.dumps(message, ensure_ascii=False).encode(), Session(http=False), None)


# ---- the stdio transport -----------------------------------------------------------------------------


class Wire(io.RawIOBase):
    """The claimed stdout, in memory (StdioServer serialises its writes)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


def stdio_input(seed: int, count: int, *, initialize: str | None) -> tuple[list[bytes], list[Expectation]]:
    gen = Gen(seed)
    lines: list[bytes] = []
    if initialize:
        init = {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"protocolVersion": initialize, "capabilities": {}},
        }
        lines.append(json.dumps(init).encode())
    for _ in range(count):
        data = gen.message(unique_ids=True)
        data = data.replace(b"\n", b" ").replace(b"\r", b" ")  # one line each: the framing is what is tested
        if not data.strip(b" \t"):
            continue
        if b"initialize" in data:
            continue  # a later initialize would change, mid-run, how batches are answered
        lines.append(data)
    lines.append(b'{"jsonrpc":"2.0","id":"last-ping","method":"ping"}')
    return lines, [expect(line) for line in lines]


def check_stdio_output(out: bytes, expected: list[Expectation], seed: int, *, batches: bool) -> None:
    """Every stdout line a valid message; one answer per request id; null-id errors only where earned.

    `batches`: whether the session accepts batches (2025-03-26), so each is answered item by item
    in one array; otherwise each batch is refused with one null-id error.
    """
    assert out.endswith(b"\n") or not out
    answers: Counter[tuple[str, object]] = Counter()
    in_arrays: Counter[tuple[str, object]] = Counter()
    for raw in out.split(b"\n")[:-1]:
        message = json.loads(raw)  # stdout carries JSON-RPC messages and nothing else
        # A batch's answers are encoded one by one (batches.py), each keeping its id as sent.
        again = b"[" + b",".join(map(dumps, message)) + b"]" if isinstance(message, list) else dumps(message)
        assert raw == again, "one compact ASCII line per message"
        where = f"seed {seed}: {raw[:200]!r}"
        if isinstance(message, list):
            assert batches and message, where
            for item in message:
                check_message(item, where)
                in_arrays[id_key(item["id"])] += 1
            continue
        check_message(message, where)
        if "method" not in message:
            answers[id_key(message["id"])] += 1
    wanted: Counter[tuple[str, object]] = Counter()
    wanted_in_arrays: Counter[tuple[str, object]] = Counter()
    for exp in expected:
        if isinstance(exp, One):
            wanted[id_key(exp.id)] += 1
        elif isinstance(exp, Many) and not batches:
            wanted[id_key(None)] += 1
        elif isinstance(exp, Many):
            wanted_in_arrays.update(id_key(item.id) for item in exp.items if isinstance(item, One))
    assert answers == wanted, f"seed {seed}: answers and requests differ: {(answers - wanted) or (wanted - answers)}"
    assert in_arrays == wanted_in_arrays, f"seed {seed}: batch answers differ"
    assert answers[id_key("last-ping")] == 1


def run_stdio(lines: list[bytes]) -> bytes:
    wire = Wire()
    server = StdioServer(canned_dispatcher(), wire)  # type: ignore[arg-type]
    # Off the main thread, so run() installs no SIGTERM handler in the test process.
    done = threading.Event()
    result: list[int] = []

    def run() -> None:
        result.append(server.run(io.BytesIO(b"\n".join(lines) + b"\n")))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(WAIT), "the stdio server did not finish its input"
    assert result == [0]
    return bytes(wire.data)


@pytest.mark.parametrize(("seed", "initialize"), [(100, None), (101, "2025-03-26"), (102, "2025-11-25")])
def test_stdio_answers_every_request_once_and_writes_only_messages(seed: int, initialize: str | None) -> None:
    lines, expected = stdio_input(seed, 600, initialize=initialize)
    out = run_stdio(lines)
    check_stdio_output(out, expected, seed, batches=initialize == "2025-03-26")


def test_stdio_survives_an_oversized_line_and_a_one_mib_string_then_answers_ping() -> None:
    big = json.dumps(
        {"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"pad": "\u2028" * MIB}}, ensure_ascii=False
    )
    lines = [
        b"x" * (MAX_LINE + 10),  # over the line limit: refused, and the rest of it skipped
        big.encode(),
        b'{"jsonrpc":"2.0","id":"last-ping","method":"ping"}',
    ]
    out = run_stdio(lines)
    messages = [json.loads(line) for line in out.split(b"\n")[:-1]]
    assert [m["id"] for m in messages if "id" in m].count(None) == 1
    assert {m["id"] for m in messages} == {None, "big", "last-ping"}


def test_a_real_stdio_process_writes_only_messages_to_stdout_under_fuzz() -> None:
    lines, expected = stdio_input(200, 150, initialize="2025-03-26")
    lines.insert(
        -1,
        json.dumps(
            {"jsonrpc": "2.0", "id": "u2028", "method": "ping", "params": {"s": "\u2028" * MIB}}, ensure_ascii=False
        ).encode(),
    )
    expected.insert(-1, One("u2028", request=True))
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server"],
        input=b"\n".join(lines) + b"\n",
        cwd=ROOT,
        env=server_env(FAIRWINS_MCP_LOG_LEVEL="debug"),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    check_stdio_output(proc.stdout, expected, 200, batches=True)
    assert b"Traceback" not in proc.stderr


# ---- the HTTP transport ------------------------------------------------------------------------------


@contextmanager
def http_server() -> Iterator[McpHTTPServer]:
    from tests.mcp_http import serving

    policy = gate.Policy(loopback_bind=True, max_body=4 * MIB)
    with serving(canned_dispatcher(), policy, read_timeout=10.0) as server:
        yield server


def read_answer(resp: http.client.HTTPResponse) -> tuple[int, list[Any]]:
    body = resp.read()
    kind = (resp.getheader("Content-Type") or "").split(";")[0]
    if resp.status == 202:
        assert body == b""
        return 202, []
    if kind == "text/event-stream":
        events = []
        for block in body.decode().split("\n\n"):
            if block.strip():
                head, data = block.split("\n", 1)
                assert head == "event: message" and data.startswith("data: ")
                events.append(json.loads(data.removeprefix("data: ")))
        return resp.status, events
    assert kind == "application/json", (resp.status, body[:200])
    return resp.status, [json.loads(body)]


@pytest.mark.parametrize("seed", [300, 301, 302])
def test_http_answers_every_request_once_and_every_notification_with_202(seed: int) -> None:
    gen = Gen(seed)
    with http_server() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
        for n in range(400):
            data = gen.message(unique_ids=True)
            version = gen.rng.choice([None, "2025-03-26", "2025-06-18", "2025-11-25"])
            headers = {
                "Content-Type": "application/json",
                "Accept": gen.rng.choice(["application/json", "application/json, text/event-stream"]),
            }
            if version:
                headers["MCP-Protocol-Version"] = version
            expected = expect(data)
            where = f"seed {seed} #{n} (MCP-Protocol-Version {version}): {data[:300]!r}"
            conn.request("POST", "/mcp", body=data, headers=headers)
            status, messages = read_answer(conn.getresponse())
            # No header means 2025-03-26 over HTTP, the one revision with batches; a batch is
            # answered item by item there (202 when no item earns an answer), else refused whole.
            batches = version in (None, "2025-03-26")
            quiet_batch = isinstance(expected, Many) and all(isinstance(i, Nothing) for i in expected.items)
            if isinstance(expected, Nothing) or (quiet_batch and status == 202):
                assert status == 202 and not messages, where
                continue
            assert status in (200, 400, 404), where
            assert messages, where
            *notes, answer = messages
            for note in notes:
                check_message(note, where)
                assert "method" in note, where
            if isinstance(expected, Many):
                check_batch_answer(answer, expected, where)
                assert batches or not isinstance(answer, list), where
            else:
                check_answer(answer, expected, where)
        conn.request(
            "POST",
            "/mcp",
            body=b'{"jsonrpc":"2.0","id":"last","method":"ping"}',
            headers={"Content-Type": "application/json"},
        )
        status, messages = read_answer(conn.getresponse())
        conn.close()
    assert status == 200 and messages == [{"jsonrpc": "2.0", "id": "last", "result": {}}]


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "X-Custom")
HTTP_PATHS = (
    "/mcp", "/healthz", "/", "/mcp/", "/MCP", "/healthz?probe=1", "/mcp?x=1", "/elsewhere", "/%2e%2e/etc",
    "*", "http://localhost/mcp", "http://localhost/healthz", "/" + "a" * 3000,
)  # fmt: skip
SMUGGLED_ID = 666


def _smuggled() -> bytes:
    body = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % SMUGGLED_ID
    return (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def any_request(gen: Gen) -> tuple[bytes, str]:
    """A request on any path with any method, with or without a body in any framing: (its bytes, its method)."""
    rng = gen.rng
    method = rng.choice(HTTP_METHODS)
    path = rng.choice(HTTP_PATHS)
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: " + rng.choice([b"localhost", b"127.0.0.1:1", b"[::1]"])]
    for name, values in (
        (b"Content-Type", [b"application/json", b"text/plain", b"application/json; charset=utf-8"]),
        (b"Accept", [b"application/json", b"*/*", b"text/html"]),
        (b"Origin", [b"http://localhost:6274", b"https://evil.example", b"http://[::1", b"null"]),
        (b"MCP-Protocol-Version", [b"2025-03-26", b"2025-11-25", b"1999-01-01"]),
        (b"Expect", [b"100-continue"]),
        (b"Connection", [b"close", b"keep-alive"]),
        (b"Authorization", [b"Bearer fw1.fuzz", b"Basic eA=="]),
    ):
        if rng.random() < 0.3:
            lines.append(name + b": " + rng.choice(values))
    body_kind = rng.choice(["none", "length", "length", "chunked", "smuggled", "smuggled-chunked", "empty-length"])
    body = gen.message(unique_ids=True, allow_batches=False) if rng.random() < 0.5 else _smuggled()
    if body_kind in ("smuggled", "smuggled-chunked"):
        body = _smuggled()
    if body_kind in ("length", "smuggled"):
        lines.append(b"Content-Length: %d" % len(body))
    elif body_kind == "empty-length":
        lines.append(b"Content-Length: 0")
        body = b""
    elif body_kind in ("chunked", "smuggled-chunked"):
        lines.append(b"Transfer-Encoding: chunked")
        cut = rng.randint(0, len(body))
        parts = [p for p in (body[:cut], body[cut:]) if p]
        body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    else:
        body = b""
    rng.shuffle(lines[1:])
    return b"\r\n".join(lines) + b"\r\n\r\n" + body, method


@pytest.mark.parametrize("seed", [400, 401, 402])
def test_http_every_path_and_method_with_and_without_a_body_keeps_the_connection_in_step(
    seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    # After any request, the same connection either closes (having said so) or answers the next
    # request, and nothing hidden in a body is ever answered as a request of its own.
    from tests.mcp_http import Raw

    gen = Gen(seed)
    marker = b'{"jsonrpc":"2.0","id":"marker","method":"ping"}'
    follow = (
        b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(marker), marker)
    )
    kept = closed = 0
    with http_server() as server:
        for n in range(150):
            data, method = any_request(gen)
            where = f"seed {seed} #{n}: {data[:300]!r}"
            client = Raw(server.server_address[1], timeout=WAIT)
            try:
                client.send(data + follow)
                first = client.response(head=method == "HEAD")
                assert first is not None, f"no answer: {where}"
                assert b'"id":%d' % SMUGGLED_ID not in first.body, where
                if first.status == 100:
                    first = client.response()  # the body was sent already: the final answer follows the 100
                    assert first is not None and first.status != 100, where
                    assert b'"id":%d' % SMUGGLED_ID not in first.body, where
                if first.headers.get("connection") == "close":
                    assert client.closed(), where
                    closed += 1
                    continue
                kept += 1
                second = client.response()
                assert second is not None and second.status == 200, f"{second}: {where}"
                assert json.loads(second.body) == {"jsonrpc": "2.0", "id": "marker", "result": {}}, where
            finally:
                client.close()
    assert kept > 20 and closed > 20, (kept, closed)  # both ways out were taken, many times
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "client input logged an error"


def test_http_reads_one_mib_strings_and_u2028_in_a_post() -> None:
    big = {
        "jsonrpc": "2.0",
        "id": "a\u2028b",
        "method": "tools/call",
        "params": {"name": "get_prediction_markets", "arguments": {"q": "\u2028" * MIB}},
    }
    with http_server() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=WAIT)
        started = time.monotonic()
        conn.request(
            "POST",
            "/mcp",
            body=json.dumps(big, ensure_ascii=False).encode(),
            headers={"Content-Type": "application/json"},
        )
        status, messages = read_answer(conn.getresponse())
        conn.close()
    assert status == 200 and messages[0]["id"] == "a\u2028b"
    assert messages[0]["result"]["isError"] is True  # q is over its maxLength: a tool error naming the field
    assert time.monotonic() - started < WAIT


@SIGNAL_STOP
@pytest.mark.parametrize("attempt", range(5))  # where the signal lands is a race: run it a few times
def test_a_real_stdio_process_answers_every_line_written_before_sigterm(attempt: int) -> None:
    # A burst the server cannot have read yet when the signal lands: lines in its read buffer
    # and in the pipe were sent, so they are answered before the process leaves with 0.
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server"],
        cwd=ROOT, env=server_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0  # up and reading
        burst = b"".join(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping" if n % 2 else "tools/list"}).encode() + b"\n"
            for n in range(1, 1001)
        )
        proc.stdin.write(burst)  # about 45 KB: fits the pipe, so it is all written before the signal
        proc.stdin.flush()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WAIT)
    assert proc.returncode == 0, err.decode(errors="replace")
    answered = [json.loads(line)["id"] for line in out.splitlines()]
    assert sorted(answered) == list(range(1, 1001))
