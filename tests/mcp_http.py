"""A small scripted MCP client for tests: one POST per message over a real socket, JSON or SSE answers read whole.

It speaks both eras the way real clients do: the 2026-07-28 wire (per-request `_meta`,
`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) and the handshake wire (`initialize`, then
`MCP-Protocol-Version` on every later POST). Also `serving()`: the real HTTP transport on
127.0.0.1:0 around any dispatcher, shut down when the block ends; and `Raw`, a client on a bare
socket that can send what no HTTP library would and reads the answers one by one.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_server.core.protocol import Dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from mcp_server.wire.versions import META_CAPABILITIES, META_CLIENT_INFO, META_VERSION

MODERN: Final = "2026-07-28"
LEGACY: Final = "2025-11-25"
TIMEOUT: Final = 10.0  # seconds; every socket operation in these tests is bounded by it
ACCEPT_BOTH: Final = "application/json, text/event-stream"
CLIENT_INFO: Final = {"name": "fairwins-tests", "version": "1.0.0"}
NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

Json = dict[str, Any]


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


class Raw:
    """A client on a bare socket, so it can send what no HTTP library would, and read answers one by one.

    `source` binds the client's end to another loopback address (127.0.0.2, …): a different peer.
    """

    def __init__(self, port: int, *, source: str | None = None, timeout: float = TIMEOUT) -> None:
        self.sock = socket.create_connection(
            ("127.0.0.1", port), timeout=timeout, source_address=(source, 0) if source else None
        )
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        self.buffer += chunk
        return bool(chunk)

    def response(self, *, head: bool = False) -> Response | None:
        """The next whole response on the connection (`head`: to a HEAD, so no body); None if it closed first."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                assert not self.buffer, f"the connection closed inside a response: {self.buffer[:200]!r}"
                return None
        raw_head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = raw_head.decode("latin-1").split("\r\n")
        version, status, *_ = status_line.split(" ", 2)
        assert version == "HTTP/1.1", status_line
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            assert name.lower() not in headers, f"header {name} sent twice"
            headers[name.lower()] = value.strip()
        length = 0 if head else int(headers.get("content-length", "0"))
        assert "transfer-encoding" not in headers or int(status) == 200
        while len(self.buffer) < length:
            assert self._fill(), "the connection closed inside a body"
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Response(int(status), headers, body)

    def closed(self) -> bool:
        """True once the server closes the connection (reading and dropping anything else it sends)."""
        while self._fill():
            pass
        return True

    def close(self) -> None:
        self.sock.close()


@dataclass
class Answer:
    """One HTTP answer: status, lower-cased headers, and the JSON-RPC messages it carried, in order."""

    status: int
    headers: dict[str, str]
    body: bytes
    messages: list[Json] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    @property
    def response(self) -> Json:
        """The JSON-RPC response (the message with `result` or `error`); fails the test if none came."""
        found = [m for m in self.messages if "result" in m or "error" in m]
        assert len(found) == 1, f"expected one response, got {self.status} {self.body[:500]!r}"
        return found[0]

    @property
    def result(self) -> Json:
        response = self.response
        assert "result" in response, f"expected a result, got {response}"
        result: Json = response["result"]
        return result

    @property
    def error(self) -> Json:
        response = self.response
        assert "error" in response, f"expected an error, got {response}"
        error: Json = response["error"]
        return error

    @property
    def notifications(self) -> list[Json]:
        return [m for m in self.messages if "method" in m and "id" not in m]


# The JSON-RPC codes a refusal may carry (transports/http/response.py, docs/security.md).
REFUSAL_RPC_CODES: Final = frozenset({-32600, -32000, -32001, -32010, -32011})


def refusal(body: bytes, request_id: Any = None) -> tuple[str, str]:
    """(the refusal's code, its sentence) from an HTTP refusal's body, held to its JSON-RPC error shape."""
    message = json.loads(body)
    assert set(message) == {"jsonrpc", "id", "error"} and message["jsonrpc"] == "2.0", message
    assert message["id"] == request_id, message
    error = message["error"]
    assert error["code"] in REFUSAL_RPC_CODES and isinstance(error["message"], str), message
    return error["data"]["error"], error["message"]


def parse_sse(body: bytes) -> list[Json]:
    """The JSON messages of an SSE body: one per event, from its `data:` lines."""
    messages: list[Json] = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if data:
            messages.append(json.loads(b"\n".join(data)))
    return messages


def post(url: str, body: Json | list[Json] | bytes, headers: Mapping[str, str], *, timeout: float = TIMEOUT) -> Answer:
    """POST one body to `url` on a fresh connection and read the whole answer."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    sent = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH, **headers}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("POST", parts.path, body=data, headers=sent)
        resp = conn.getresponse()
        raw = resp.read()
        answer = Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, raw)
    finally:
        conn.close()
    if answer.content_type == "text/event-stream":
        answer.messages = parse_sse(raw)
    elif answer.content_type == "application/json" and raw:
        value = json.loads(raw)
        answer.messages = value if isinstance(value, list) else [value]
    return answer


def modern_meta(capabilities: Json | None = None, **extra: Any) -> Json:
    """The `_meta` every 2026-07-28 request carries, plus `extra` keys (progressToken, logLevel, …)."""
    meta: Json = {
        META_VERSION: MODERN,
        META_CAPABILITIES: {} if capabilities is None else capabilities,
        META_CLIENT_INFO: CLIENT_INFO,
    }
    meta.update(extra)
    return meta


def modern_headers(method: str, params: Json) -> dict[str, str]:
    """The 2026-07-28 routing headers for a request: version, Mcp-Method and, where required, Mcp-Name."""
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    param = NAME_PARAM.get(method)
    if param is not None and isinstance(params.get(param), str):
        headers["Mcp-Name"] = params[param]
    return headers


class ModernClient:
    """A 2026-07-28 client: no handshake; every request carries `_meta` and the routing headers."""

    def __init__(self, url: str, *, bearer: str | None = None, capabilities: Json | None = None) -> None:
        self.url = url
        self.bearer = bearer
        self.capabilities = capabilities
        self._next_id = 0

    def request(
        self,
        method: str,
        params: Json | None = None,
        *,
        meta: Json | None = None,
        headers: Mapping[str, str] | None = None,
        drop_headers: tuple[str, ...] = (),
    ) -> Answer:
        self._next_id += 1
        params = dict(params or {})
        params["_meta"] = modern_meta(self.capabilities) if meta is None else meta
        sent = modern_headers(method, params)
        if self.bearer is not None:
            sent["Authorization"] = f"Bearer {self.bearer}"
        sent.update(headers or {})
        for name in drop_headers:
            sent.pop(name, None)
        return post(self.url, {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}, sent)


class LegacyClient:
    """A handshake client: `initialize` (no version header), then MCP-Protocol-Version on every POST."""

    def __init__(self, url: str, *, bearer: str | None = None) -> None:
        self.url = url
        self.bearer = bearer
        self.version: str | None = None
        self._next_id = 0

    def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        if self.bearer is not None:
            headers["Authorization"] = f"Bearer {self.bearer}"
        return headers

    def initialize(self, version: str = LEGACY) -> Answer:
        answer = self.request("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO})
        self.version = answer.result["protocolVersion"]
        initialized = self.notify("notifications/initialized")
        assert initialized.status == 202, initialized
        return answer

    def request(self, method: str, params: Json | None = None) -> Answer:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}}
        return post(self.url, message, self._headers())

    def notify(self, method: str, params: Json | None = None) -> Answer:
        return post(self.url, {"jsonrpc": "2.0", "method": method, "params": params or {}}, self._headers())


@contextmanager
def serving(dispatcher: Dispatcher, policy: gate.Policy | None = None, **options: Any) -> Iterator[McpHTTPServer]:
    """The real Streamable HTTP transport around `dispatcher` on 127.0.0.1:0, stopped on exit.

    Every test that needs a real HTTP server starts it here, so start and stop are written once.
    """
    policy = policy or gate.Policy(loopback_bind=True, max_body=1024 * 1024)
    with running(McpHTTPServer(("127.0.0.1", 0), dispatcher, policy, **options)) as server:
        yield server


@contextmanager
def running(server: McpHTTPServer) -> Iterator[McpHTTPServer]:
    """`server` accepting on a thread of its own until the block ends; then stopped and closed."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(TIMEOUT)
