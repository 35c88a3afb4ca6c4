"""Shared fixtures: a started sandbox gateway, the real dispatcher over it, and a stdio subprocess driver."""

from __future__ import annotations

import json
import os
import pathlib
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from _pytest.mark import ParameterSet

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.core.steps import Steps
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import JSONObject, Notification, Request, dumps

# The whole run is watched for secrets (tests/secret_canaries.py): these hooks record every
# fairwins_mcp log record and fail the session if a token or a payment shows up anywhere.
from tests import outputs, progress
from tests.progress import pytest_addoption  # noqa: F401
from tests.sandbox_gateway import SandboxGateway
from tests.secret_canaries import pytest_configure as _watch_secrets
from tests.secret_canaries import (  # noqa: F401
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
    pytest_unconfigure,
    record_output,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
GATEWAY_TIMEOUT = 2.0  # seconds; short, so the timeout tests stay fast
WAIT = 10.0  # the longest any test waits for something that should happen at once


# Why a test is kept out of a tier (pyproject.toml's markers): each reason said once, here.
NGINX = pytest.mark.linux_tier("drives nginx, installed from Debian's packages by make test-tools")
PROMETHEUS = pytest.mark.linux_tier("drives promtool or a Prometheus server, installed from Debian's packages")
NODE_TOOLS = pytest.mark.linux_tier(
    "drives a Node CLI (mcpb, Claude Code, the Inspector) that tests/tools/ installs for linux-x64 only"
)
BROWSER = pytest.mark.linux_tier(
    "drives headless Chromium (Debian's package) and the MCP Apps host page on Node 22, installed on Linux only"
)
PROCFS = pytest.mark.linux_tier("reads Linux's /proc (a process's children, descriptors or sockets)")
# `make test` runs the first FIRST_ROUNDS rounds of a repeated check; `make test-soak` (.ci/run calls
# it after `make test`) the rest. A round beyond them repeats what the first ones check, under the
# same load: together they are the count, and no round is skipped in CI.
FIRST_ROUNDS: Final = 1


def rounds(count: int) -> list[ParameterSet]:
    """`count` rounds of a repeated check as parameters; those after the first FIRST_ROUNDS are marked soak."""
    return [pytest.param(n, marks=[pytest.mark.soak] if n >= FIRST_ROUNDS else []) for n in range(count)]


SIGNAL_STOP = pytest.mark.posix(
    "stops a child with SIGTERM or SIGINT and checks how it drains: Windows can send a child neither "
    "(Popen.send_signal(SIGTERM) there is TerminateProcess, which nothing can catch)"
)


def venv_python(venv: pathlib.Path) -> pathlib.Path:
    """The interpreter of the virtual environment `venv`, where venv puts it on this platform."""
    if sys.platform == "win32":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def venv_script(venv: pathlib.Path, name: str) -> pathlib.Path:
    """The console script `name` of the virtual environment `venv`."""
    return venv_python(venv).with_name(f"{name}.exe" if sys.platform == "win32" else name)


def console_script(name: str) -> pathlib.Path:
    """The console script `name` installed beside the running interpreter (fairwins-mcp, ...)."""
    if sys.platform == "win32":
        return pathlib.Path(sys.executable).parent / f"{name}.exe"
    return pathlib.Path(sys.executable).parent / name


def pytest_configure(config: pytest.Config) -> None:
    _watch_secrets(config)
    progress.configure(config)


# The tests that need the whole machine, by what they do: `make test` runs them one at a time after
# the rest (pytest -m serial), the rest two at a time (pytest-xdist). Each holds something to a
# time or a count that another test's load on the same two cores could break.
SERIAL: dict[str, str] = {
    "tests/test_stop_signals.py": "a stop signal acted on within a second, under load it makes itself",
    "tests/test_sigint.py": "SIGINT to a real server, what was read answered before it exits",
    "tests/test_drain.py": "drains with deadlines, admission sized for waiting calls",
    "tests/test_disconnects.py": "a cancellation that must not come, watched for a fixed quiet time",
    "tests/test_workers.py": "worker processes replaced, signalled and drained",
    "tests/test_http_workers.py": "a real process tree: replaced workers, drains, pre-stop",
    "tests/test_door.py": "a rolling restart behind nginx and a crowd at the defaults",
    "tests/test_operator_drill.py": "three replicas, nginx and a crowd at once, nothing lost",
    "tests/test_pids_limit.py": "a real pids limit, counted",
    "tests/test_gateway.py": "a deadline held to within a second of slack",
    "tests/test_gateway_faults.py": "a deadline held to within a second of slack",
}


# The files that take 20 s or more on one worker (make test's line per file), handed out first in
# the parallel pass (`--no-loadscope-reorder`: the files go out in collection order). xdist's own
# order, the most tests first, handed out a 75 s file of two tests last: the pass then waited on it
# alone. A file missing here only starts later.
SLOW_FIRST: Final = (
    "tests/test_apps_host.py",
    "tests/test_abandoned_work.py",
    "tests/test_credential_properties.py",
    "tests/test_add_tool.py",
    "tests/test_platforms.py",
    "tests/test_answers.py",
    "tests/test_credential_spellings.py",
    "tests/test_install.py",
    "tests/test_hostile_values.py",
    "tests/test_prometheus.py",
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A tier marker without its reason is refused: a test that cannot run somewhere says why. The SERIAL files'
    tests are marked serial. The SLOW_FIRST files come first, in that order, each file's tests together."""
    first = {path: rank for rank, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::", 1)[0], len(first)))  # stable: the rest as collected
    for item in items:
        if item.nodeid.split("::", 1)[0] in SERIAL:
            item.add_marker(pytest.mark.serial)
        for name in ("linux_tier", "posix"):
            for mark in item.iter_markers(name):
                if len(mark.args) != 1 or not isinstance(mark.args[0], str) or not mark.args[0].strip():
                    raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} needs its reason as one string")


PROXY_VARIABLES = (
    "https_proxy",
    "HTTPS_PROXY",
    "http_proxy",
    "HTTP_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)


@pytest.fixture(autouse=True)
def _no_machine_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's proxy settings never reach a test: one that tests a proxy sets its own."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# Every tools/call result the suite sees must fit its tool's outputSchema (checked with the
# server's own schema code). In-process servers are watched at the dispatcher, subprocess servers
# at StdioProcess; a misfit is recorded there and fails the test that caused it (the dispatcher
# would turn an exception raised inside it into a -32603 answer the test might even expect).
_MISFITS: list[str] = []


@pytest.fixture(autouse=True, scope="session")
def _watch_every_tool_result() -> Iterator[None]:
    original = Dispatcher._tools_call

    def watched(self: Dispatcher, params: dict[str, Any], ctx: RequestContext, session: Session) -> Steps[JSONObject]:
        result = yield from original(self, params, ctx, session)  # tools/call is steps (core/steps.py)
        tool = self._tools.get(params.get("name"))  # type: ignore[arg-type]
        schema = tool.definition().get("outputSchema") if tool is not None else None
        problem = outputs.problem(schema, result)
        if problem is not None:
            _MISFITS.append(f"{params.get('name')}: {problem} in {result}")
        return result

    Dispatcher._tools_call = watched  # type: ignore[method-assign]
    yield
    Dispatcher._tools_call = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _every_tool_result_fits_its_output_schema() -> Iterator[None]:
    yield
    misfits, _MISFITS[:] = list(_MISFITS), []
    assert not misfits, "structuredContent that breaks its tool's outputSchema:\n" + "\n".join(misfits)


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    """A sandbox gateway on 127.0.0.1, a free port, stopped after the test."""
    with SandboxGateway() as gateway:
        yield gateway


class McpClient:
    """The real dispatcher driven in-process, one legacy session (as one stdio process would have)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.session = Session(http=False)
        self._next_id = 0

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        bearer: str | None = None,
        ctx: RequestContext | None = None,
    ) -> dict[str, Any]:
        """The whole JSON-RPC response message."""
        self._next_id += 1
        ctx = ctx or RequestContext(bearer=bearer, bearer_source="env" if bearer else "none")
        reply = self.dispatcher.handle(Request(self._next_id, method, params or {}), self.session, ctx)
        assert isinstance(reply.message, dict)
        # As a client reads it: encoded as the transports encode it (an answer passed on verbatim
        # is the gateway's bytes until then), and decoded.
        message: dict[str, Any] = json.loads(dumps(reply.message))
        return message

    def notify(self, method: str, params: dict[str, Any] | None = None) -> object:
        return self.dispatcher.handle(Notification(method, params or {}), self.session, RequestContext()).message

    def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, bearer: str | None = None
    ) -> dict[str, Any]:
        """A CallToolResult; fails the test if the call was answered with a JSON-RPC error instead."""
        message = self.request("tools/call", {"name": name, "arguments": arguments or {}}, bearer=bearer)
        assert "result" in message, f"{name} answered a JSON-RPC error: {message}"
        result: dict[str, Any] = message["result"]
        return result


def client_for(url: str | None, *, timeout: float = GATEWAY_TIMEOUT, max_body: int = 4 * 1024 * 1024) -> McpClient:
    """The shipped catalog over a fresh Gateway (and so a fresh connection pool) at `url`."""
    return McpClient(Dispatcher(build_catalog(Gateway(url, timeout=timeout, max_body=max_body))))


@pytest.fixture
def mcp(sandbox: SandboxGateway) -> McpClient:
    """The shipped server's dispatcher over the sandbox gateway."""
    return client_for(sandbox.url)


class StdioProcess:
    """A server subprocess spoken to over its stdin/stdout; every stdout line is kept and parsed."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: pathlib.Path = ROOT) -> None:
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.lines: list[bytes] = []  # every raw stdout line, in order
        self._calls: dict[object, str] = {}  # request id → tool name, for the outputSchema check
        self.skipped: list[dict[str, Any]] = []  # what response_to read past
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            try:
                message = json.loads(line)
                self._check_output(message)
                self._messages.put(message)
            except ValueError:
                self._messages.put({"unparseable": line.decode("utf-8", "replace")})
        self._messages.put(None)  # EOF

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def _check_output(self, message: object) -> None:
        if not isinstance(message, dict) or "result" not in message or message.get("id") not in self._calls:
            return
        name = self._calls[message.get("id")]
        problem = outputs.problem(outputs.SHIPPED.get(name), message["result"])
        if problem is not None:
            _MISFITS.append(f"{name} (stdio process): {problem} in {message['result']}")

    def send(self, message: dict[str, Any]) -> None:
        if message.get("method") == "tools/call" and isinstance(message.get("params"), dict):
            self._calls[message.get("id")] = str(message["params"].get("name"))
        self.send_raw(json.dumps(message).encode("utf-8") + b"\n")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def next_message(self, timeout: float = WAIT) -> dict[str, Any] | None:
        """The next stdout message (None at EOF); fails the test after `timeout` seconds."""
        try:
            return self._messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message on stdout within {timeout} s; stderr:\n{self.stderr}") from None

    def response_to(self, request_id: object, timeout: float = WAIT) -> dict[str, Any]:
        """Read messages until the response to `request_id`; what came before is in `skipped`."""
        self.skipped = []
        while True:
            message = self.next_message(timeout)
            assert message is not None, f"stdout ended before the response to {request_id!r}; stderr:\n{self.stderr}"
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
            self.skipped.append(message)

    def rest(self, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Every remaining message until stdout closes."""
        found = []
        while (message := self.next_message(timeout)) is not None:
            found.append(message)
        return found

    def wait(self, timeout: float = WAIT) -> int:
        code = self.proc.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)
        for thread in self._threads:
            thread.join(WAIT)
        record_output(f"stdio process {self.proc.args!r}", b"".join(self.lines) + b"".join(self._stderr))
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a server subprocess: ours minus FairWins settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAIRWINS_")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_stdio(
    lines: list[dict[str, Any]] | list[bytes], timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """`python -m mcp_server` fed `lines` (messages, or raw lines) until EOF; its output is scanned for secrets."""
    data = b"".join(line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n" for line in lines)
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_server"],
        input=data,
        cwd=ROOT,
        env=server_env(**env),
        capture_output=True,
        timeout=timeout,
    )
    record_output("stdio process stdout", proc.stdout)
    record_output("stdio process stderr", proc.stderr)
    return proc


@pytest.fixture
def stdio_process() -> Iterator[Callable[..., StdioProcess]]:
    """Start server subprocesses (`python3 -m mcp_server` by default); each is killed after the test."""
    started: list[StdioProcess] = []

    def start(argv: list[str] | None = None, **env: str) -> StdioProcess:
        process = StdioProcess(argv or [sys.executable, "-m", "mcp_server"], server_env(**env))
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
