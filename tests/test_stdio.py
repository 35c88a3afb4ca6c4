"""The stdio transport: in-process over pipes and BytesIO, then real `python3 -m mcp_server` processes."""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.fairwins.snapshot import load
from mcp_server.setup.server import build_catalog
from mcp_server.transports.stdio import MAX_LINE, StdioServer
from mcp_server.upstream.gateway import Gateway
from tests.conftest import GATEWAY_TIMEOUT, ROOT, SIGNAL_STOP, WAIT, StdioProcess, server_env, venv_python
from tests.sandbox_gateway import ACCOUNT_A, TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import record_output

INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
PROFILE_LABEL = next(t["progress"] for t in load().tools if t["name"] == "get_profile")  # "Reading your profile…"


def line(message: Any) -> bytes:
    return json.dumps(message).encode("utf-8") + b"\n"


def call(request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def ping(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def cancelled(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "test"},
    }


def dispatcher_for(sandbox: SandboxGateway, timeout: float = GATEWAY_TIMEOUT) -> Dispatcher:
    return Dispatcher(build_catalog(Gateway(sandbox.url, timeout=timeout)))


def run_bytes(dispatcher: Dispatcher, data: bytes, bearer: str | None = None) -> tuple[int, list[bytes]]:
    """Serve `data` (stdin) to EOF; the exit code and the raw stdout lines."""
    wire = io.BytesIO()
    code = StdioServer(dispatcher, wire, bearer=bearer).run(io.BytesIO(data))
    return code, wire.getvalue().splitlines(keepends=True)


class PipeSession:
    """A StdioServer on a thread, fed through a real pipe, its stdout read line by line."""

    def __init__(self, dispatcher: Dispatcher, bearer: str | None = None) -> None:
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self._stdin = open(in_write, "wb", buffering=0)
        self._server_stdin = open(in_read, "rb")
        self._wire = open(out_write, "wb")
        self._stdout = open(out_read, "rb")
        self.server = StdioServer(dispatcher, self._wire, bearer=bearer)
        self.exit_code: int | None = None
        self.finished = threading.Event()
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        threading.Thread(target=self._serve, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()

    def _serve(self) -> None:
        try:
            self.exit_code = self.server.run(self._server_stdin)
        finally:
            self._wire.close()  # EOF for the reader
            self._server_stdin.close()
            self.finished.set()

    def _read(self) -> None:
        for raw in self._stdout:
            self.messages.put(json.loads(raw))
        self.messages.put(None)

    def send(self, message: Any) -> None:
        self._stdin.write(line(message))

    def close_stdin(self) -> None:
        if not self._stdin.closed:
            self._stdin.close()

    def next(self, timeout: float = WAIT) -> dict[str, Any] | None:
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"nothing on stdout within {timeout} s") from None
        if message is not None:
            self.received.append(message)
        return message

    def response_to(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        while True:
            message = self.next(timeout)
            assert message is not None, f"stdout ended before the response to {request_id!r}"
            if message.get("id") == request_id and "method" not in message:
                return message

    def finish(self, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Close stdin, wait for the server to exit; the messages not read yet (`received` has them all)."""
        self.close_stdin()
        assert self.finished.wait(timeout), "the server did not exit after EOF"
        rest = []
        while (message := self.next(timeout)) is not None:
            rest.append(message)
        self._stdout.close()
        return rest


@pytest.fixture
def pipe_session(sandbox: SandboxGateway) -> Iterator[Callable[..., PipeSession]]:
    sessions: list[PipeSession] = []

    def start(bearer: str | None = TOKEN_MEMBER_A, timeout: float = GATEWAY_TIMEOUT) -> PipeSession:
        session = PipeSession(dispatcher_for(sandbox, timeout), bearer)
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        session.close_stdin()
        session.finished.wait(WAIT)


# ---- framing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_unicode_line_separator_inside_a_string_does_not_split_the_message(
    sandbox: SandboxGateway, separator: str
) -> None:
    request_id = f"a{separator}b"
    raw = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}, ensure_ascii=False).encode("utf-8")
    assert separator.encode("utf-8") in raw
    code, lines = run_bytes(dispatcher_for(sandbox), raw + b"\n" + line(ping(2)))
    assert code == 0
    assert [json.loads(raw_line) for raw_line in lines] == [
        {"jsonrpc": "2.0", "id": request_id, "result": {}},
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]


def test_every_output_line_is_one_compact_ascii_json_message(sandbox: SandboxGateway) -> None:
    _, lines = run_bytes(dispatcher_for(sandbox), line(ping("café\u2028")) + line(ping(2)))
    assert len(lines) == 2
    for raw in lines:
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1
        raw.decode("ascii")
        assert json.loads(raw)["jsonrpc"] == "2.0"


def test_blank_lines_and_crlf_endings_are_tolerated(sandbox: SandboxGateway) -> None:
    data = b"\n\r\n  \n" + json.dumps(ping(1)).encode() + b"\r\n" + json.dumps(ping(2)).encode()  # no final newline
    _, lines = run_bytes(dispatcher_for(sandbox), data)
    assert [json.loads(raw)["id"] for raw in lines] == [1, 2]


def test_an_unreadable_line_gets_a_parse_error_and_the_next_line_is_served(sandbox: SandboxGateway) -> None:
    _, lines = run_bytes(dispatcher_for(sandbox), b"{not json\n\xff\xfe\n" + line(ping(3)))
    answers = [json.loads(raw) for raw in lines]
    assert [a.get("error", {}).get("code") for a in answers[:2]] == [-32700, -32700]
    assert all(a["id"] is None for a in answers[:2])
    assert answers[2] == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_a_line_over_the_size_limit_is_refused_and_the_next_line_is_served(sandbox: SandboxGateway) -> None:
    huge = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"a" * MAX_LINE + b'"}}\n'
    _, lines = run_bytes(dispatcher_for(sandbox), huge + line(ping(2)))
    answers = [json.loads(raw) for raw in lines]
    assert answers[0]["error"]["code"] == -32600 and answers[0]["id"] is None
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_notifications_and_client_responses_get_no_line(sandbox: SandboxGateway) -> None:
    data = line(INITIALIZED) + line({"jsonrpc": "2.0", "id": 9, "result": {}}) + line(cancelled(77)) + line(ping(1))
    _, lines = run_bytes(dispatcher_for(sandbox), data)
    assert [json.loads(raw) for raw in lines] == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


def test_a_batch_under_2025_03_26_is_answered_with_one_array_line(sandbox: SandboxGateway) -> None:
    init = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-03-26"}}
    batch = [ping(1), INITIALIZED, call(2, "get_perps_pairs")]
    _, lines = run_bytes(dispatcher_for(sandbox), line(init) + line(batch))
    answer = json.loads(lines[1])
    assert isinstance(answer, list) and [m["id"] for m in answer] == [1, 2]
    assert answer[1]["result"]["isError"] is False


def test_a_batch_under_2025_11_25_is_refused_with_32600(sandbox: SandboxGateway) -> None:
    _, lines = run_bytes(dispatcher_for(sandbox), line(INIT) + line([ping(1)]))
    answer = json.loads(lines[1])
    assert answer["error"]["code"] == -32600 and answer["id"] is None


def test_the_env_token_is_the_bearer_of_member_tools(sandbox: SandboxGateway) -> None:
    _, lines = run_bytes(dispatcher_for(sandbox), line(call(1, "get_profile")), bearer=TOKEN_MEMBER_A)
    assert json.loads(lines[0])["result"]["isError"] is False
    assert sandbox.seen[0].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"


def test_a_client_that_hung_up_does_not_stop_the_server_from_draining_to_eof(sandbox: SandboxGateway) -> None:
    class GoneClient(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    server = StdioServer(dispatcher_for(sandbox), GoneClient())  # type: ignore[arg-type]
    assert server.run(io.BytesIO(line(ping(1)) + line(call(2, "get_perps_pairs")) + line(ping(3)))) == 0


class NotJsonTool:
    """A tool whose definition and result hold a value JSON cannot carry (a server bug to survive)."""

    name = "not_json"

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "inputSchema": {"type": "object"}, "x-weight": float("nan")}

    def call(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"content": [], "structuredContent": {"x": float("inf")}, "isError": False}


def test_a_response_json_cannot_carry_becomes_32603_for_its_id_and_serving_goes_on() -> None:
    dispatcher = Dispatcher(Catalog(tools=[NotJsonTool()]))
    data = line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) + line(call(2, "not_json")) + line(ping(3))
    code, lines = run_bytes(dispatcher, data)
    assert code == 0
    answers = {m["id"]: m for m in map(json.loads, lines)}
    assert answers[1]["error"] == {"code": -32603, "message": "Internal error"}  # on the reading thread
    assert answers[2]["error"] == {"code": -32603, "message": "Internal error"}  # on a worker thread
    assert answers[3]["result"] == {}


def test_a_gateway_number_too_large_for_json_still_gets_an_answer(sandbox: SandboxGateway) -> None:
    sandbox.fault("/v1/perps/pairs", "status", status=200, body=b'{"pairs":[{"maxLeverage":1e400}]}')
    _, lines = run_bytes(dispatcher_for(sandbox), line(call(1, "get_perps_pairs")))
    [answer] = [json.loads(raw) for raw in lines]
    assert answer["id"] == 1 and answer["result"]["isError"] is True
    assert "could not be read" in answer["result"]["content"][0]["text"]


# ---- concurrency, cancellation, progress, exit ---------------------------------------------------


def test_a_slow_tool_call_does_not_delay_a_ping_sent_after_it(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=3)
    session = pipe_session(timeout=5.0)
    session.send(call("slow", "get_profile"))
    sandbox.wait_for_requests(1, timeout=WAIT)  # the call is waiting on the gateway now
    sent = time.monotonic()
    session.send(ping("quick"))
    answer = session.response_to("quick", timeout=2.0)
    assert answer["result"] == {}
    assert time.monotonic() - sent < 2.0
    assert all(m.get("id") != "slow" for m in session.received), "the ping overtook the slow call"
    session.send(cancelled("slow"))


def test_cancelling_stops_the_gateway_wait_and_no_response_is_ever_sent_for_that_id(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=3)
    session = pipe_session(timeout=5.0)
    session.send(call("slow", "get_profile"))
    sandbox.wait_for_requests(1, timeout=WAIT)
    started = time.monotonic()
    session.send(cancelled("slow"))
    session.send(ping("after"))
    rest = session.finish()  # EOF: the server exits once every request read has ended
    assert time.monotonic() - started < 2.5, "the cancelled call kept waiting on the gateway (3 s)"
    assert session.exit_code == 0
    assert rest == session.received, "nothing was read before EOF"
    assert [m.get("id") for m in session.received] == ["after"]


def test_progress_notifications_carry_the_tools_label_and_all_come_before_the_response(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=0.3)
    session = pipe_session()
    session.send(call(1, "get_profile", progressToken="tok-1"))
    session.response_to(1)
    before = [m for m in session.received if m.get("method") == "notifications/progress"]
    after = session.finish()
    assert before, "no progress was reported"
    assert before[0]["params"]["progressToken"] == "tok-1"
    assert before[0]["params"]["message"] == PROFILE_LABEL
    values = [m["params"]["progress"] for m in before]
    assert values == sorted(values) and len(set(values)) == len(values), "progress increases"
    assert after == [], "nothing after the response"


def test_no_progress_is_sent_without_a_progress_token(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    session = pipe_session()
    session.send(call(1, "get_profile"))
    session.response_to(1)
    assert session.finish() == []
    assert [m.get("id") for m in session.received] == [1]


def test_closing_stdin_right_after_a_slow_call_still_delivers_its_answer_then_exits_0(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=0.5)
    session = pipe_session()
    session.send(call("slow", "get_profile"))
    rest = session.finish()
    assert session.exit_code == 0
    [answer] = [m for m in rest if m.get("id") == "slow"]
    assert answer["result"]["isError"] is False, answer


def test_two_tool_calls_in_a_row_in_one_session_both_succeed(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    session = pipe_session()
    session.send(call(1, "get_profile"))
    first = session.response_to(1)
    session.send(call(2, "get_profile"))
    second = session.response_to(2)
    assert first["result"]["isError"] is False, first
    assert second["result"]["isError"] is False, second


def test_many_concurrent_calls_are_each_answered_once(
    sandbox: SandboxGateway, pipe_session: Callable[..., PipeSession]
) -> None:
    session = pipe_session()
    for i in range(20):
        session.send(call(i, "get_perps_pairs") if i % 2 else ping(i))
    rest = session.finish()
    ids = sorted(m["id"] for m in rest)
    assert ids == list(range(20))


# ---- real processes -------------------------------------------------------------------------------


def assert_every_line_is_json_rpc(process: StdioProcess) -> None:
    assert process.lines, "nothing on stdout"
    for raw in process.lines:
        message = json.loads(raw)  # raises on anything that is not one JSON message
        assert (isinstance(message, dict) and message.get("jsonrpc") == "2.0") or isinstance(message, list), raw


def test_a_whole_session_of_python_m_mcp_server(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    process = stdio_process(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, FAIRWINS_MCP_TIMEOUT="2")
    process.send(INIT)
    init = process.response_to("init")["result"]
    assert init["protocolVersion"] == "2025-11-25" and init["serverInfo"]["name"] == "fairwins-mcp"
    process.send(INITIALIZED)
    process.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert "get_wagers" in {t["name"] for t in process.response_to(2)["result"]["tools"]}
    process.send(call(3, "get_wagers"))
    wagers = process.response_to(3)["result"]
    assert wagers["isError"] is False and wagers["structuredContent"]["chains"][0]["chainId"] == 137
    process.send({"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "fairwins://guide"}})
    assert process.response_to(4)["result"]["contents"][0]["mimeType"] == "text/markdown"
    process.close_stdin()
    assert process.wait() == 0
    assert_every_line_is_json_rpc(process)
    assert sandbox.seen[0].header("Authorization") == f"Bearer {TOKEN_MEMBER_A}"
    assert TOKEN_MEMBER_A not in process.stderr, "the token never reaches a log line"
    assert "fw1.…7f3k" in process.stderr


def test_the_server_starts_without_a_gateway_configured_and_says_so_on_stderr(
    stdio_process: Callable[..., StdioProcess],
) -> None:
    process = stdio_process()
    process.send(INIT)
    assert process.response_to("init")["result"]["serverInfo"]["name"] == "fairwins-mcp"
    process.send(call(2, "get_perps_pairs"))
    result = process.response_to(2)["result"]
    assert result["isError"] is True and "FAIRWINS_API_URL is not set" in result["content"][0]["text"]
    process.close_stdin()
    assert process.wait() == 0
    assert "FAIRWINS_API_URL is not set" in process.stderr


NOISY_SERVER = textwrap.dedent(
    """
    import os, sys
    from mcp_server.transports import stdio
    from mcp_server.core.catalog import Catalog
    from mcp_server.core.protocol import Dispatcher

    class Noisy:
        name = "noisy"

        def definition(self):
            return {"name": "noisy", "title": "Noisy", "description": "Prints.", "inputSchema": {"type": "object"}}

        def call(self, arguments, ctx):
            print("print() inside a tool")
            sys.stdout.write("sys.stdout.write inside a tool\\n")
            os.write(1, b"os.write(1) inside a tool\\n")
            return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    wire = stdio.claim_stdout()
    print("print() after the claim")
    os.write(1, b"os.write(1) after the claim\\n")
    sys.exit(stdio.StdioServer(Dispatcher(Catalog(tools=[Noisy()])), wire).run(sys.stdin.buffer))
    """
)


def test_stray_prints_in_the_server_process_never_reach_stdout(stdio_process: Callable[..., StdioProcess]) -> None:
    process = stdio_process([sys.executable, "-c", NOISY_SERVER])
    process.send(INIT)
    process.response_to("init")
    process.send(call(2, "noisy"))
    assert process.response_to(2)["result"]["content"][0]["text"] == "ok"
    process.send(ping(3))
    process.response_to(3)
    process.close_stdin()
    assert process.wait() == 0
    assert_every_line_is_json_rpc(process)
    assert len(process.lines) == 3
    for stray in ("print() after the claim", "os.write(1) after the claim", "print() inside a tool"):
        assert stray in process.stderr
    assert "sys.stdout.write inside a tool" in process.stderr and "os.write(1) inside a tool" in process.stderr


# The shipped entry point, `python -m mcp_server`, run with a library that writes to stdout, with
# print() and on fd 1, whenever a connection is made: each gateway call, after stdout was claimed.
NOISY_LIBRARY = textwrap.dedent(
    """
    import os, runpy, sys

    def noisy(event, args):
        if event == "socket.connect":
            print("a library prints: connecting", flush=True)
            os.write(1, b"a library writes to fd 1: connecting\\n")

    sys.addaudithook(noisy)
    runpy.run_module("mcp_server", run_name="__main__", alter_sys=True)
    """
)
STRAYS = ("a library prints: connecting", "a library writes to fd 1: connecting")
SDK_PYTHON = venv_python(ROOT / ".venv-sdk")


def test_a_library_printing_during_calls_of_the_shipped_entry_point_never_reaches_stdout(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    process = stdio_process(
        [sys.executable, "-c", NOISY_LIBRARY], FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A
    )
    process.send(INIT)
    process.response_to("init")
    process.send(call(2, "get_profile"))
    assert process.response_to(2)["result"]["structuredContent"]["account"] == ACCOUNT_A
    process.send(ping(3))
    process.response_to(3)
    process.close_stdin()
    assert process.wait() == 0
    assert_every_line_is_json_rpc(process)
    assert len(process.lines) == 3  # init, the call, the ping: nothing else
    for stray in STRAYS:
        assert stray in process.stderr, process.stderr


def test_the_sdk_client_reads_every_line_of_a_session_in_which_a_library_prints(sandbox: SandboxGateway) -> None:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    wanted = [["get_profile", {}], ["get_wagers", {}], ["get_profile", {}]]
    done = subprocess.run(
        [str(SDK_PYTHON), str(ROOT / "tests" / "sdk" / "stdio_calls.py"), "auto", sys.executable, "-c", NOISY_LIBRARY],
        cwd=ROOT,
        env=server_env(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A),
        input="".join(json.dumps(c) + "\n" for c in wanted),
        capture_output=True,
        text=True,
        timeout=120,
    )
    record_output("SDK stdio session with a noisy library", done.stdout + done.stderr)
    assert done.returncode == 0, f"the SDK session failed:\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout)
    assert report["unreadable"] == [], report["unreadable"]
    assert [c["isError"] for c in report["calls"]] == [False, False, False], report["calls"]
    assert report["calls"][0]["structuredContent"]["account"] == ACCOUNT_A
    for stray in STRAYS:
        assert stray in done.stderr  # the server's stderr, passed through by the SDK


@SIGNAL_STOP
def test_sigterm_answers_every_request_already_read_then_exits_0(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=1)
    process = stdio_process(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, FAIRWINS_MCP_TIMEOUT="3")
    process.send(INIT)
    process.response_to("init")
    process.send(call("slow", "get_profile"))
    sandbox.wait_for_requests(1, timeout=WAIT)  # read, and waiting on the gateway
    process.proc.send_signal(signal.SIGTERM)
    answer = process.response_to("slow")
    assert answer["result"]["isError"] is False, answer
    assert process.wait() == 0
    assert_every_line_is_json_rpc(process)


def test_eof_right_after_a_slow_call_still_delivers_its_answer_then_exits_0(
    sandbox: SandboxGateway, stdio_process: Callable[..., StdioProcess]
) -> None:
    sandbox.fault("/v1/member/me", "delay", seconds=0.5)
    process = stdio_process(FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, FAIRWINS_MCP_TIMEOUT="3")
    process.send(INIT)
    process.send(call("slow", "get_profile"))
    process.close_stdin()
    answer = process.response_to("slow")
    assert answer["result"]["isError"] is False, answer
    assert process.wait() == 0


@SIGNAL_STOP
def test_sigterm_while_idle_exits_0_at_once(stdio_process: Callable[..., StdioProcess]) -> None:
    process = stdio_process()
    process.send(INIT)
    process.response_to("init")
    process.proc.send_signal(signal.SIGTERM)
    assert process.wait(timeout=5) == 0


# ---- the stop signal's byte on the wake-up pipe ------------------------------------------------------


class _LineQueue:
    """The claimed stdout, each line it is written parsed onto a queue as it comes."""

    def __init__(self) -> None:
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._partial = b""

    def write(self, data: bytes) -> int:
        self._partial += data
        *done, self._partial = self._partial.split(b"\n")
        for raw in done:
            self.lines.put(json.loads(raw))
        return len(data)

    def flush(self) -> None:
        pass


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _stdio_log() -> Iterator[_Records]:
    """What the stdio logger says, whatever an earlier test made of logging (logs.configure stops propagation)."""
    logger = logging.getLogger("fairwins_mcp.stdio")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _serve_on_this_thread(client: Callable[[StdioServer, int, queue.Queue[dict[str, Any]]], None]) -> list[str]:
    """Run StdioServer.run on the test's main thread, over a pipe, while `client` drives it from another thread.

    The main thread is where run() takes the stop signals and registers its wake-up pipe (as in
    `python -m mcp_server`). `client` gets the server, the pipe's write end and the answers. Should
    the server not return within WAIT of the client's end, the client closes stdin (EOF), so a
    failure is an assertion, never a hang. Returns the stdio log; asserts the handlers were restored.
    """
    assert threading.current_thread() is threading.main_thread()
    in_read, in_write = os.pipe()
    wire = _LineQueue()
    server = StdioServer(Dispatcher(Catalog()), wire)  # type: ignore[arg-type]
    returned = threading.Event()
    failures: list[BaseException] = []

    def drive() -> None:
        try:
            client(server, in_write, wire.lines)
        except BaseException as exc:
            failures.append(exc)
        finally:
            if not returned.wait(WAIT):
                failures.append(AssertionError(f"run() still reading {WAIT:.0f} s after the client's end"))
            os.close(in_write)  # EOF, for a run() still reading

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    driver = threading.Thread(target=drive, daemon=True)
    with _stdio_log() as records, open(in_read, "rb") as reader:
        driver.start()
        try:
            assert server.run(reader) == 0
        finally:
            returned.set()
            driver.join(WAIT)
    assert not failures, failures
    assert {signum: signal.getsignal(signum) for signum in before} == before, "run() restores the handlers"
    return records.messages


def _answers(lines: queue.Queue[dict[str, Any]], count: int) -> list[Any]:
    return [lines.get(timeout=WAIT)["id"] for _ in range(count)]


def _signal_main_thread(signum: int) -> None:
    """Send `signum` to the main thread, where run() waits in the event loop's selector."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signum)


@pytest.mark.posix("pthread_kill sends the signal to the main thread; Windows has no SIGTERM to send")
def test_a_stop_signal_on_a_silent_client_answers_every_whole_line_written_and_drops_the_unended_one() -> None:
    """The lost wake-up of CI's failed round: a stop signal while the server waits on a client that has stopped writing.

    The old loop slept in `readline()`, where a signal landing just before the read(2) call woke
    nothing, and the stop was never heard. Served on the event loop, the signal's byte wakes the
    selector and its handler runs there: the server logs `stopping`, answers every whole line the
    client wrote before it, drops the line not yet ended, and returns 0.
    """

    def client(server: StdioServer, stdin: int, answers: queue.Queue[dict[str, Any]]) -> None:
        os.write(stdin, line(ping(1)) + line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        assert _answers(answers, 2) == [1, 2]  # read and answered: the loop now waits on a silent client
        os.write(stdin, line(ping(3)) + line(ping(4)) + b'{"jsonrpc":"2.0","id":5,')  # written before the stop
        _signal_main_thread(signal.SIGTERM)
        assert _answers(answers, 2) == [3, 4]
        assert answers.empty()

    log = _serve_on_this_thread(client)
    assert log == [
        "stopping on SIGTERM: every request already read is answered",
        "stopped: every request read before SIGTERM was answered",
    ]


@pytest.mark.posix("pthread_kill sends the signal to the main thread; Windows has no SIGUSR1")
def test_another_signal_only_wakes_the_loop_and_serving_goes_on() -> None:
    heard: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: heard.append(signum))

    def client(server: StdioServer, stdin: int, answers: queue.Queue[dict[str, Any]]) -> None:
        os.write(stdin, line(ping(1)))
        assert _answers(answers, 1) == [1]  # serving: the stop signals' handlers are in place
        _signal_main_thread(signal.SIGUSR1)  # another part of the process handles that one
        os.write(stdin, line(ping(2)))
        assert _answers(answers, 1) == [2]
        _signal_main_thread(signal.SIGINT)

    try:
        log = _serve_on_this_thread(client)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert heard == [signal.SIGUSR1]
    assert log[0] == "stopping on SIGINT: every request already read is answered"
