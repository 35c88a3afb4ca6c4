"""Answers of every size: what a tools/call costs as the gateway's answer grows, ours beside the SDKs.

    python3 -m bench.sizes                                  ours only
    python3 -m bench.sizes --compare .venv-bench/bin/python --compare-ts .tools/node22/.../node
                                                            beside both official SDK servers
    python3 -m bench.sizes --profile [--token shared]       ours in this process, pass by pass
    python3 -m bench.sizes --quick                          a smoke run in seconds

The stub gateway (bench.stub_gateway, its own process) answers `get_wagers` with N wagers in
the per-chain envelope of docs/gateway.md (`chainId=N`): about 2 KB, 20 KB, 200 KB and 2 MB (under the
server's 4 MiB response cap), and the stub's two-wager answer as the base, the smallest answer.
Every server returns the body as structuredContent and as text, over stdio and over HTTP at 8
keep-alive clients, each with two member tokens: a random one, and one sharing a piece with
ordinary text in the answer (`fw1.benchtoken0000` and the wager ids w-100000...).

Noise: the servers take turns within each round, in a new order every round, and the rounds
repeat; every figure is the median over rounds (all of them are in the JSON). CPU per call is the
server process's own (utime + stime of all its threads, from /proc), over a window of calls;
p50 is the client's round trip. The floor, timed in this process in each round: one `json.loads`
of the answer and one escape of its text as a JSON string, what any server that checks an answer
and returns it as text and as structured content must pay for its size. A call has a cost of its
own whatever the answer (about 0.25 ms of ours; the floor of a 2 KB answer is some 30 µs), so
"ours within 1.5× the floor" is judged on what the answer adds: ours at a size minus ours with
the base answer, against the floor at that size.

Memory: ours (a fresh stdio process) answers one 2 MB call; its peak resident memory (VmHWM,
reset first) above its resident memory when idle, over the answer's size. Standard library only;
the SDKs run as separate processes.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runner import (  # one harness for every table
    REPO,
    START_TIMEOUT_S,
    BenchError,
    BenchTimeout,
    Deadline,
    HttpConn,
    StderrDrain,
    StdioSession,
    StubProcess,
    child_env,
    compile_ours,
    cpu_ms,
    initialize_params,
    latency_summary,
    loadavg,
    mcp_post,
    rounded,
    run_load,
    sdk_command,
    spawn,
    stop,
    stop_all,
    ts_command,
)
from bench.stub_gateway import WAGERS_BODY, _body, wagers

DEFAULT_JSON = REPO / "bench" / "results" / "sizes.json"
COUNTS = (12, 120, 1200, 12000)  # wagers: about 2 KB, 20 KB, 200 KB and 2 MB
BASE = 0  # the stub's own two-wager answer (no chainId): the smallest answer, what a call costs anyway
# A random member token, and one sharing a piece ("0000") with the wager ids (w-100000,
# w-100001, ...): the case that sent every answer down the slow path (issue 24).
RANDOM_TOKEN = "fw1.Zq8vKt3RmXp7LwYd2NcBh5Gj"
SHARED_TOKEN = "fw1.benchtoken0000"
TOKENS = {"random": RANDOM_TOKEN, "shared": SHARED_TOKEN}
HTTP_CLIENTS = 8
SERVERS = ("ours", "sdk", "ts")
LABELS = {"ours": "ours", "sdk": "Python SDK", "ts": "TS SDK"}


def answer_bytes(count: int) -> bytes:
    """The stub's body for `count` wagers (BASE: its two-wager answer), exactly as it serves it."""
    return WAGERS_BODY if count == BASE else _body(wagers(count, count))


def arguments(count: int) -> dict[str, Any]:
    return {} if count == BASE else {"chainId": count}


def size_label(count: int) -> str:
    size = len(answer_bytes(count))
    return f"{size / 1024:,.1f} KB" if size < 10240 else f"{size / 1024:,.0f} KB"


# ---------------------------------------------------------------------------------------------
# the floor: one parse and one escape, in this process


def _cpu_ms(work: Callable[[], object], repeat: int) -> float:
    """Median CPU milliseconds of `work` in this thread over `repeat` runs (collected before, not during)."""
    samples = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.thread_time_ns()
        work()
        samples.append((time.thread_time_ns() - t0) / 1e6)
    return statistics.median(samples)


def floor_ms(body: bytes, repeat: int) -> dict[str, float]:
    """What checking an answer and returning it as text costs at the least: one parse, one escape."""
    text = body.decode("utf-8")
    loads = _cpu_ms(lambda: json.loads(body), repeat)
    escape = _cpu_ms(lambda: json.dumps(text), repeat)
    return {"loads_ms": loads, "escape_ms": escape, "floor_ms": loads + escape}


# ---------------------------------------------------------------------------------------------
# stdio: one process per server and token, the same process through every size


def _call_line(count: int) -> bytes:
    message = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "get_wagers"}}
    message["params"]["arguments"] = arguments(count)
    return json.dumps(message, separators=(",", ":")).replace('"id":0', '"id":%d', 1).encode() + b"\n"


def check_answer(label: str, count: int, message: dict[str, Any]) -> None:
    """A successful get_wagers whose structuredContent and text are both the stub's answer."""
    result = message.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise BenchError(f"{label}: get_wagers ({count}) did not succeed: {json.dumps(message)[:300]}")
    expected = json.loads(answer_bytes(count))
    if result.get("structuredContent") != expected:
        raise BenchError(f"{label}: get_wagers ({count}): structuredContent is not the gateway's answer")
    texts = [block.get("text") for block in result.get("content", []) if isinstance(block, dict)]
    if not texts or json.loads(texts[0]) != expected:
        raise BenchError(f"{label}: get_wagers ({count}): the text block is not the gateway's answer")


class Stdio:
    """A server over stdio, asked one call at a time; big answers are matched by id without parsing."""

    def __init__(self, label: str, cmd: Sequence[str], env: dict[str, str]) -> None:
        self.label = label
        self.session = StdioSession(label, cmd, env)
        message, _ = self.session.request("initialize", initialize_params())
        if "result" not in message:
            raise BenchError(f"{label}: initialize failed: {message}")
        self.session.notify("notifications/initialized")

    @property
    def pid(self) -> int:
        return self.session.pid

    def call(self, line: bytes) -> tuple[bytes, int]:
        """(the answer's line, round trip in ns) for a call made from `line` (a `%d` where the id goes)."""
        session = self.session
        rid = session.next_id
        session.next_id += 1
        t0 = time.perf_counter_ns()
        session.write(line % rid)
        marker = b'"id":%d' % rid
        while True:
            answer = session.reader.readline(t0 + int(30e9))
            t1 = time.perf_counter_ns()
            if len(answer) > 65536:  # no notification is this long: ours, if its id is at an end
                if marker in answer[:200] or marker in answer[-200:]:
                    return answer, t1 - t0
                continue
            message = json.loads(answer)
            if isinstance(message, dict) and message.get("id") == rid:
                return answer, t1 - t0

    def close(self) -> None:
        self.session.close()


@dataclass
class Window:
    """One measurement: calls for at least `seconds`, the server's CPU over them, and their round trips."""

    cpu_per_call_ms: float
    p50_ms: float
    calls: int


def measure_window(server: Stdio, line: bytes, seconds: float, min_calls: int) -> Window:
    latencies: list[int] = []
    cpu0 = cpu_ms(server.pid)
    start = time.perf_counter()
    while len(latencies) < min_calls or time.perf_counter() - start < seconds:
        _, ns = server.call(line)
        latencies.append(ns)
    cpu = cpu_ms(server.pid) - cpu0
    return Window(cpu / len(latencies), latency_summary(latencies)["p50_ms"], len(latencies))


# ---------------------------------------------------------------------------------------------
# HTTP: one process per server, 8 clients, the token in each request's Authorization header


def _ok_http(status: int, body: bytes) -> bool:
    # A cheap check for answers of megabytes (the load client must not be the bottleneck);
    # each server's answers were compared with the stub's whole before the load.
    return status == 200 and b'"structuredContent"' in body and b'"isError":true' not in body


@dataclass
class HttpServer:
    label: str
    proc: subprocess.Popen[bytes]
    drain: StderrDrain
    port: int


def start_http(label: str, cmd: Sequence[str], env: dict[str, str], deadline: Deadline) -> HttpServer:
    proc = spawn([*cmd, "--http", "0", "--host", "127.0.0.1"], env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    drain = StderrDrain(proc.stderr)
    drain.found.wait(deadline.bound(START_TIMEOUT_S))
    if drain.port is None:
        stop(proc)
        raise BenchError(f"{label} (HTTP): no URL on stderr (exit {proc.poll()}); stderr: {drain.tail()!r}")
    server = HttpServer(label, proc, drain, drain.port)
    until = time.monotonic() + deadline.bound(START_TIMEOUT_S)
    while True:
        conn = HttpConn(server.port)
        try:
            _, body = conn.roundtrip(http_request(server.port, COUNTS[0], RANDOM_TOKEN))
            message = json.loads(body)
            check_answer(f"{label} (HTTP)", COUNTS[0], message)
            return server
        except (OSError, ValueError) as exc:
            if time.monotonic() > until or proc.poll() is not None:
                stop(proc)
                raise BenchError(f"{label} (HTTP): never answered: {exc}; stderr: {drain.tail()!r}") from None
            time.sleep(0.05)
        finally:
            conn.close()


def http_request(port: int, count: int, token: str) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers"}}
    message["params"]["arguments"] = arguments(count)
    return mcp_post(port, message, token)


# ---------------------------------------------------------------------------------------------
# memory: ours, one 2 MB answer


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def measure_memory(label: str, cmd: Sequence[str], env: dict[str, str], count: int) -> dict[str, Any]:
    """Peak resident memory above idle while a fresh process answers one `count`-wager call, and again."""
    server = Stdio(label, cmd, env)
    try:
        small = _call_line(COUNTS[0])
        for _ in range(50):
            server.call(small)
        gc_line = _call_line(count)
        size = len(answer_bytes(count))
        out: dict[str, Any] = {"answer_bytes": size}
        peaks = []
        for i in range(4):
            idle = _status_kib(server.pid, "VmRSS:")
            with open(f"/proc/{server.pid}/clear_refs", "w") as fh:
                fh.write("5")  # VmHWM back to the current RSS
            answer, _ = server.call(gc_line)
            if i == 0:
                check_answer(label, count, json.loads(answer))
                out["idle_rss_kib"] = idle
            del answer
            peak = _status_kib(server.pid, "VmHWM:")
            peaks.append((peak - idle) * 1024 / size)
        out["first_peak_over_size"] = peaks[0]
        out["later_peaks_over_size"] = peaks[1:]
        return out
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------
# the profile: ours in this process, each pass timed


@dataclass
class PassTimer:
    """CPU time (this thread's) spent inside wrapped functions, by pass."""

    spent: dict[str, int] = field(default_factory=dict)

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0) + time.thread_time_ns() - t0

        return timed


# Where each pass lives: (pass, module, attribute). Only those present in the code measured are
# wrapped, so the same profile runs on the code before issue 24 and after it.
PASSES: tuple[tuple[str, str, str], ...] = (
    ("gateway read", "mcp_server.fairwins.tools", "Gateway.call"),
    ("parse (read_json)", "mcp_server.fairwins.tools", "read_json"),
    ("depth (jsonrpc.too_deep)", "mcp_server.fairwins.tools", "too_deep"),
    ("lone surrogates (jsonrpc.well_formed)", "mcp_server.fairwins.tools", "well_formed"),
    ("parse + check (answers.Reader)", "mcp_server.core.answers", "Reader.read"),
    ("redaction (scrub the result)", "mcp_server.fairwins.tools", "_without_credentials"),
    ("redaction prefilter (tools._exposed)", "mcp_server.fairwins.tools", "_exposed"),
    ("result (success_result: text dump)", "mcp_server.fairwins.tools", "success_result"),
    ("result (verbatim_result: text escape)", "mcp_server.fairwins.tools", "verbatim_result"),
)


def profile(counts: Sequence[int], calls: int, token: str, deadline: Deadline) -> list[dict[str, Any]]:
    """Ours in-process against the stub: per size, CPU per call in each pass and in total."""
    import importlib

    from mcp_server.core.context import RequestContext
    from mcp_server.core.protocol import Dispatcher, Session
    from mcp_server.setup.server import build_catalog
    from mcp_server.upstream.gateway import Gateway
    from mcp_server.wire import jsonrpc
    from mcp_server.wire.jsonrpc import Request

    stub = StubProcess(0.0, deadline)
    rows: list[dict[str, Any]] = []
    try:
        timer = PassTimer()
        package = Path(importlib.import_module("mcp_server").__file__ or "").parent
        for name, module_name, attribute in PASSES:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            if package not in Path(module.__file__ or "").parents:
                continue  # not in the code measured (an installed copy elsewhere has it)
            owner_name, _, leaf = attribute.rpartition(".")
            owner: Any = getattr(module, owner_name) if owner_name else module
            if hasattr(owner, leaf):
                setattr(owner, leaf, timer.wrap(name, getattr(owner, leaf)))
        dispatcher = Dispatcher(build_catalog(Gateway(stub.url, timeout=30.0)))
        tool: Any = dispatcher._tools["get_wagers"]
        if hasattr(tool, "_check_answer") and not hasattr(tool, "_reader"):
            tool._check_answer = timer.wrap("schema check", tool._check_answer)
        session = Session(http=False)
        init = Request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        dispatcher.handle(init, session, RequestContext())
        # As the transports write it: in pieces (jsonrpc.encode, where it exists), not joined.
        encode: Callable[[Any], object] = getattr(jsonrpc, "encode", jsonrpc.dumps)
        for count in counts:
            params = {"name": "get_wagers", "arguments": arguments(count)}
            size = len(answer_bytes(count))

            def one(call_id: int, params: dict[str, Any] = params, count: int = count) -> int:
                ctx = RequestContext(bearer=token, bearer_source="header")
                t0 = time.thread_time_ns()
                reply = dispatcher.handle(Request(call_id, "tools/call", params), session, ctx)
                t1 = time.thread_time_ns()
                encode(reply.message)
                t2 = time.thread_time_ns()
                timer.spent["wire encode"] = timer.spent.get("wire encode", 0) + t2 - t1
                result = reply.message.get("result") if isinstance(reply.message, dict) else None
                if not isinstance(result, dict) or result.get("isError"):
                    raise BenchError(f"get_wagers ({count}) failed: {str(reply.message)[:300]}")
                return t2 - t0

            n = max(9, min(calls, int(calls * 20_000 / size) + 9))
            for i in range(max(3, n // 5)):
                one(i + 1)
                deadline.check()
            gc.collect()
            # Each pass's median over the calls, and the median call: a call slowed by the
            # machine's other work moves a median little.
            per_call: list[dict[str, int]] = []
            totals = []
            for i in range(n):
                timer.spent.clear()
                totals.append(one(1000 + i))
                per_call.append(dict(timer.spent))
            names = sorted({name for spent in per_call for name in spent})
            row: dict[str, Any] = {
                "count": count,
                "bytes": size,
                "calls": n,
                "total_ms": statistics.median(totals) / 1e6,
                "passes_ms": {k: statistics.median(c.get(k, 0) for c in per_call) / 1e6 for k in names},
            }
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            one(5000)
            row["peak_alloc_bytes"] = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            row["floor"] = floor_ms(answer_bytes(count), 9)
            rows.append(row)
    finally:
        stub.close()
    return rows


def per_kb(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], float]) -> float:
    """Least-squares slope of `key` over the answer's size, in the same unit per KB."""
    xs = [r["bytes"] / 1024 for r in rows]
    ys = [key(r) for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else math.nan


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def render_profile(rows: list[dict[str, Any]]) -> str:
    names = sorted({k for r in rows for k in r["passes_ms"]})
    header = ["pass (CPU ms per call)", *(f"{r['bytes'] / 1024:,.1f} KB" for r in rows), "µs per KB"]
    lines = []
    for name in [*names, "other", "total"]:

        def value(r: dict[str, Any], name: str = name) -> float:
            if name == "total":
                return float(r["total_ms"])
            if name == "other":
                return float(r["total_ms"] - sum(r["passes_ms"].values()))
            return float(r["passes_ms"].get(name, 0.0))

        lines.append([name, *(f"{value(r):.3f}" for r in rows), f"{per_kb(rows, value) * 1000:.2f}"])
    lines.append(
        [
            "floor: json.loads + one escape",
            *(f"{r['floor']['floor_ms']:.3f}" for r in rows),
            f"{per_kb(rows, lambda r: r['floor']['floor_ms']) * 1000:.2f}",
        ]
    )
    lines.append(["peak allocated / answer size", *(f"{r['peak_alloc_bytes'] / r['bytes']:.1f}×" for r in rows), ""])
    return _table(header, lines)


# ---------------------------------------------------------------------------------------------
# instructions: the same work counted by valgrind (callgrind), whatever else the machine runs


def _pass_work(name: str, count: int, token: str, deadline: Deadline) -> Callable[[], object]:
    """One pass of ours (or the floor, or the whole call in this process) as a function to repeat."""
    body = answer_bytes(count)
    text = body.decode("utf-8")
    if name == "floor":
        return lambda: (json.loads(body), json.dumps(text))
    from mcp_server.wire import jsonrpc

    if name == "call":
        from mcp_server.core.context import RequestContext
        from mcp_server.core.protocol import Dispatcher, Session
        from mcp_server.setup.server import build_catalog
        from mcp_server.upstream.gateway import Gateway
        from mcp_server.wire.jsonrpc import Request

        stub = StubProcess(0.0, deadline)  # its own process: valgrind counts ours alone
        dispatcher = Dispatcher(build_catalog(Gateway(stub.url, timeout=120.0)))
        session = Session(http=False)
        init = Request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        dispatcher.handle(init, session, RequestContext())
        params = {"name": "get_wagers", "arguments": arguments(count)}
        encode: Callable[[Any], Any] = getattr(jsonrpc, "encode", jsonrpc.dumps)
        pieces: Callable[[Any], Any] = getattr(jsonrpc, "pieces", lambda parts: parts)

        def call() -> None:
            ctx = RequestContext(bearer=token, bearer_source="header")
            reply = dispatcher.handle(Request(1, "tools/call", params), session, ctx)
            for _ in pieces(encode(reply.message)):
                pass

        call()  # the connection opened, the patterns compiled: what every later call finds done
        return call
    from mcp_server.core import answers, redaction, schema
    from mcp_server.fairwins import outcomes
    from mcp_server.fairwins.snapshot import load

    output_schema = load().output_schemas["member.wagers"]
    if name.startswith("exact: "):  # the value by value path, as before issue 24 (and for doubted answers since)
        value = jsonrpc.loads(text)
        check = schema.compile_schema(output_schema)
        result = outcomes.success_result(value, [])
        message = jsonrpc.response(1, result)
        search = redaction.Redactor(token, None)

        def redact() -> object:
            return search.scrub_value(result) if search.might_be_in(body) else result

        exact: dict[str, Callable[[], object]] = {
            "exact: parse (jsonrpc.loads)": lambda: jsonrpc.loads(text),
            "exact: schema check (compile_schema)": lambda: check(value, ""),
            "exact: redaction (might_be_in, then scrub_value)": redact,
            "exact: text block (success_result)": lambda: outcomes.success_result(value, []),
            "exact: wire (dumps)": lambda: jsonrpc.dumps(message),
        }
        return exact[name]

    reader = answers.Reader(output_schema, kept=("chains",))
    redactor = redaction.Redactor(token, None)
    redactor.might_be_in(body)
    passes: dict[str, Callable[[], object]] = {
        "decode": lambda: body.decode("utf-8"),
        "parse + check (answers.Reader)": lambda: reader.read(text),
        "redaction prefilter (might_be_in)": lambda: redactor.might_be_in(body),
        "text block (verbatim_text)": lambda: jsonrpc.verbatim_text(text, body),
        "structuredContent (verbatim)": lambda: jsonrpc.verbatim(text, body),
    }
    return passes[name]


EXACT_PASSES = (
    "exact: parse (jsonrpc.loads)",
    "exact: schema check (compile_schema)",
    "exact: redaction (might_be_in, then scrub_value)",
    "exact: text block (success_result)",
    "exact: wire (dumps)",
)
INSTRUCTION_PASSES = (
    "decode",
    "parse + check (answers.Reader)",
    "redaction prefilter (might_be_in)",
    "text block (verbatim_text)",
    "structuredContent (verbatim)",
    "call",
    "floor",
)


def instructions(
    counts: Sequence[int], token: str, repeat: int, deadline: Deadline, passes: Sequence[str] = INSTRUCTION_PASSES
) -> dict[str, dict[int, float]]:
    """Instructions per run of each pass (valgrind --tool=callgrind), the same on a busy machine or a quiet one."""
    found: dict[str, dict[int, float]] = {}
    for name in passes:
        for count in counts:
            deadline.check()
            totals = []
            for times in (0, repeat):
                cmd = [
                    "valgrind",
                    "--tool=callgrind",
                    "--callgrind-out-file=/dev/null",
                    sys.executable,
                    "-m",
                    "bench.sizes",
                    "--run-pass",
                    name,
                    "--counts",
                    str(count),
                    "--token-value",
                    token,
                    "--calls",
                    str(times),
                ]
                done = subprocess.run(
                    cmd,
                    cwd=os.getcwd(),
                    capture_output=True,
                    text=True,
                    timeout=1800,
                    env={**os.environ, "PYTHONHASHSEED": "0"},
                    check=False,
                )
                refs = [line for line in done.stderr.splitlines() if "I   refs:" in line]
                if done.returncode != 0 or not refs:
                    raise BenchError(f"valgrind {name} ({count}): {done.stderr[-500:]}")
                totals.append(int(refs[-1].split(":")[1].replace(",", "")))
            found.setdefault(name, {})[count] = (totals[1] - totals[0]) / repeat
            sys.stderr.write(f"bench.sizes: {name}, {size_label(count)}: {found[name][count] / 1e6:.2f} M\n")
    return found


def render_instructions(found: dict[str, dict[int, float]], counts: Sequence[int]) -> str:
    header = ["pass (million instructions per run)", *(size_label(c) for c in counts), "per KB"]
    rows = []
    for name, by_count in found.items():
        points = [{"bytes": len(answer_bytes(c)), "v": by_count[c] / 1e6} for c in counts]
        label = {"call": "the whole call, in this process", "floor": "floor: json.loads + one escape"}.get(name, name)
        rows.append(
            [label, *(f"{by_count[c] / 1e6:.3f}" for c in counts), f"{per_kb(points, lambda r: r['v']) * 1e6:,.0f}"]
        )
    if "call" in found and "floor" in found:
        base = found["call"].get(BASE)
        ratios = []
        for c in counts:
            added = found["call"][c] - base if base is not None else math.nan
            ratios.append("—" if c == BASE else f"{added / found['floor'][c]:.2f}")
        rows.append(["what the answer adds to the call, over the floor", *ratios, ""])
    return _table(header, rows)


# ---------------------------------------------------------------------------------------------
# the run


@dataclass
class Cell:
    """One (size, server, transport, token): a sample per round."""

    cpu: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    rps: list[float] = field(default_factory=list)

    def median(self, name: str) -> float:
        values: list[float] = getattr(self, name)
        return statistics.median(values) if values else math.nan


Key = tuple[int, str, str, str]  # (count, server, transport, token)


def run(args: argparse.Namespace, deadline: Deadline, errors: list[str]) -> dict[str, Any]:
    cmds: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    python = args.compare if args.compare and os.access(args.compare, os.X_OK) else sys.executable
    compile_ours(python)
    cmds["ours"] = [python, "-m", "mcp_server"]
    if args.compare:
        try:
            cmds["sdk"], versions["sdk"] = sdk_command(args.compare)
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"Python SDK: {exc}")
    if args.compare_ts:
        try:
            cmds["ts"], versions["ts"] = ts_command(args.compare_ts)
        except (BenchError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"TypeScript SDK: {exc}")
    servers = [s for s in SERVERS if s in cmds]
    counts = [BASE, *args.counts]
    cells: dict[Key, Cell] = {}
    floors: dict[int, list[dict[str, float]]] = {c: [] for c in counts}
    memory: dict[str, Any] = {}
    rng = random.Random(24)
    stub = StubProcess(0.0, deadline)
    try:
        if args.stdio:
            stdio: dict[tuple[str, str], Stdio] = {}
            for server, token in itertools.product(servers, TOKENS):
                env = child_env(stub.url, TOKENS[token])
                try:
                    stdio[server, token] = Stdio(LABELS[server], cmds[server], env)
                except BenchError as exc:
                    errors.append(f"{LABELS[server]} (stdio, {token} token): {exc}")
            for count in counts:  # every answer compared with the stub's, once, before timing
                for (server, token), session in list(stdio.items()):
                    try:
                        answer, _ = session.call(_call_line(count))
                        check_answer(f"{LABELS[server]} (stdio)", count, json.loads(answer))
                        for _ in range(3 if count >= 12000 else 20):
                            session.call(_call_line(count))
                    except BenchError as exc:
                        errors.append(str(exc))
                        session.close()
                        del stdio[server, token]
            for r in range(args.rounds):
                sys.stderr.write(f"bench.sizes: stdio round {r + 1} of {args.rounds}\n")
                for count in counts:
                    floors[count].append(floor_ms(answer_bytes(count), 5))
                    order = list(stdio.items())
                    rng.shuffle(order)
                    for (server, token), session in order:
                        deadline.check()
                        window = measure_window(session, _call_line(count), args.window, 3)
                        cell = cells.setdefault((count, server, "stdio", token), Cell())
                        cell.cpu.append(window.cpu_per_call_ms)
                        cell.p50.append(window.p50_ms)
            for session in stdio.values():
                session.close()
        if args.http:
            env = child_env(stub.url, None)
            http: dict[str, HttpServer] = {}
            for server in servers:
                try:
                    http[server] = start_http(LABELS[server], cmds[server], env, deadline)
                except BenchError as exc:
                    errors.append(str(exc))
            for count in counts:
                for server, proc in http.items():
                    conn = HttpConn(proc.port)
                    try:
                        _, body = conn.roundtrip(http_request(proc.port, count, RANDOM_TOKEN))
                        check_answer(f"{LABELS[server]} (HTTP)", count, json.loads(body))
                    except (BenchError, OSError, ValueError) as exc:
                        errors.append(f"{LABELS[server]} (HTTP): {exc}")
                    finally:
                        conn.close()
            for r in range(args.http_rounds):
                sys.stderr.write(f"bench.sizes: HTTP round {r + 1} of {args.http_rounds}\n")
                for count in counts:
                    order = [(s, t) for s in http for t in TOKENS]
                    rng.shuffle(order)
                    # A 2 MB answer takes the slowest server a tenth of a second: longer windows for it.
                    scale = max(1.0, len(answer_bytes(count)) / 400_000)
                    for server, token in order:
                        proc = http[server]
                        load = run_load(
                            proc.port,
                            http_request(proc.port, count, TOKENS[token]),
                            _ok_http,
                            HTTP_CLIENTS,
                            args.http_warmup * scale,
                            args.http_duration * scale,
                            deadline,
                            sample_cpu=lambda pid=proc.proc.pid: cpu_ms(pid),
                        )
                        summary = load.summary()
                        if load.errors:
                            errors.append(f"{LABELS[server]} (HTTP, {count}): {load.errors} errors: {load.first_error}")
                        cell = cells.setdefault((count, server, "http", token), Cell())
                        cell.cpu.append(summary["cpu_per_call_ms"])
                        cell.p50.append(summary["p50_ms"])
                        cell.rps.append(summary["rps"])
            for proc in http.values():
                stop(proc.proc)
        if args.memory:
            sys.stderr.write("bench.sizes: memory\n")
            env = child_env(stub.url, RANDOM_TOKEN)
            for server in servers:
                try:
                    memory[server] = measure_memory(LABELS[server], cmds[server], env, max(args.counts))
                except (BenchError, OSError) as exc:
                    errors.append(f"{LABELS[server]} (memory): {exc}")
    except BenchTimeout as exc:
        errors.append(str(exc))
    finally:
        stub.close()
        stop_all()
    return {
        "servers": servers,
        "versions": versions,
        "counts": counts,
        "cells": cells,
        "floors": floors,
        "memory": memory,
    }


def summarize(found: dict[str, Any]) -> dict[str, Any]:
    """Medians per cell, the floor per size, and the targets of issue 24 (PASS / MISS / n/a)."""
    counts: list[int] = found["counts"]
    cells: dict[Key, Cell] = found["cells"]
    floor = {
        c: statistics.median(f["floor_ms"] for f in found["floors"][c]) if found["floors"][c] else math.nan
        for c in counts
    }

    def cpu(count: int, server: str, transport: str, token: str) -> float:
        cell = cells.get((count, server, transport, token))
        return cell.median("cpu") if cell else math.nan

    targets: list[dict[str, Any]] = []

    def target(text: str, value: float, bound: float, le: bool = True) -> None:
        if math.isnan(value):
            verdict = "n/a"
        else:
            verdict = "PASS" if (value <= bound if le else value >= bound) else "MISS"
        targets.append({"target": text, "value": None if math.isnan(value) else round(value, 3), "result": verdict})

    sizes = [c for c in counts if c != BASE]
    small, mid = sizes[0], (sizes[2] if len(sizes) > 2 else sizes[-1])
    for token in TOKENS:
        target(
            f"{size_label(small)}, stdio, {token} token: ours ≤ 0.25× Python SDK CPU per call",
            cpu(small, "ours", "stdio", token) / cpu(small, "sdk", "stdio", token),
            0.25,
        )
    for token in TOKENS:
        target(
            f"{size_label(mid)}, stdio, {token} token: ours ≤ 1.0× Python SDK CPU per call",
            cpu(mid, "ours", "stdio", token) / cpu(mid, "sdk", "stdio", token),
            1.0,
        )
    for count in sizes:
        for token in TOKENS:
            added = cpu(count, "ours", "stdio", token) - cpu(BASE, "ours", "stdio", token)
            target(
                f"{size_label(count)}, stdio, {token} token: what the answer adds to ours ≤ 1.5× the floor",
                added / floor[count],
                1.5,
            )
    for count in sizes:
        for transport in ("stdio", "http"):
            target(
                f"{size_label(count)}, {transport}: ours with the shared-piece token ≤ 1.1× the random one",
                cpu(count, "ours", transport, "shared") / cpu(count, "ours", transport, "random"),
                1.1,
            )
    for token in TOKENS:
        mine = cells.get((small, "ours", "http", token))
        theirs = cells.get((small, "ts", "http", token))
        ratio = mine.median("rps") / theirs.median("rps") if mine and theirs else math.nan
        target(
            f"{size_label(small)}, HTTP {HTTP_CLIENTS} clients, {token} token: ours ≥ 1.5× TS SDK req/s",
            ratio,
            1.5,
            le=False,
        )
    mem = found["memory"].get("ours")
    target(
        f"{size_label(max(sizes))}: ours' peak resident memory above idle < 5× the answer",
        mem["first_peak_over_size"] if mem else math.nan,
        5.0,
    )
    for t in targets:
        if t["result"] == "PASS" and "< 5×" in t["target"] and t["value"] >= 5.0:
            t["result"] = "MISS"
    return {"floor_ms": floor, "targets": targets}


def render(found: dict[str, Any], summary: dict[str, Any]) -> str:
    counts: list[int] = found["counts"]
    cells: dict[Key, Cell] = found["cells"]
    servers: list[str] = found["servers"]
    blocks = []
    for transport in ("stdio", "http"):
        if not any(k[2] == transport for k in cells):
            continue
        metrics = [("cpu", "CPU/call ms", "{:.3f}"), ("p50", "p50 ms", "{:.3f}")]
        if transport == "http":
            metrics.append(("rps", "req/s", "{:,.0f}"))
        header = ["answer", "token"]
        for server in servers:
            header += [f"{LABELS[server]} {name}" for _, name, _ in metrics]
        if "sdk" in servers:
            header.append("ours/SDK CPU")
        if "ts" in servers:
            header.append("ours/TS CPU")
        if transport == "stdio":
            header.append("floor ms")
        rows = []
        for count in counts:
            for token in TOKENS:
                row = [size_label(count) + (" (base)" if count == BASE else ""), token]
                for server in servers:
                    cell = cells.get((count, server, transport, token))
                    for name, _, fmt in metrics:
                        value = cell.median(name) if cell else math.nan
                        row.append("—" if math.isnan(value) else fmt.format(value))
                mine = cells.get((count, "ours", transport, token))
                for other in ("sdk", "ts"):
                    if other in servers:
                        theirs = cells.get((count, other, transport, token))
                        ratio = mine.median("cpu") / theirs.median("cpu") if mine and theirs else math.nan
                        row.append("—" if math.isnan(ratio) else f"{ratio:.2f}")
                if transport == "stdio":
                    row.append(f"{summary['floor_ms'][count]:.3f}")
                rows.append(row)
        title = "stdio, one call at a time" if transport == "stdio" else f"HTTP, {HTTP_CLIENTS} keep-alive clients"
        blocks.append(f"{title}:\n" + _table(header, rows, left=2))
    growth = []
    for transport in ("stdio", "http"):
        for server in servers:
            for token in TOKENS:
                points = [
                    (len(answer_bytes(c)) / 1024, cells[c, server, transport, token].median("cpu"))
                    for c in counts
                    if (c, server, transport, token) in cells
                ]
                if len(points) >= 2:
                    rows_ = [{"bytes": x * 1024, "v": y} for x, y in points]
                    growth.append([transport, LABELS[server], token, f"{per_kb(rows_, lambda r: r['v']) * 1000:.2f}"])
    floor_rows = [{"bytes": len(answer_bytes(c)), "v": summary["floor_ms"][c]} for c in counts]
    growth.append(["(floor)", "json.loads + escape", "", f"{per_kb(floor_rows, lambda r: r['v']) * 1000:.2f}"])
    blocks.append(
        "CPU per call, growth per added KB (least squares over the sizes):\n"
        + _table(["transport", "server", "token", "µs per KB"], growth, left=3)
    )
    mem = found["memory"]
    if mem:
        lines = [
            [
                LABELS[s],
                f"{m['answer_bytes'] / 1024:,.0f} KB",
                f"{m['idle_rss_kib'] / 1024:.1f}",
                f"{m['first_peak_over_size']:.2f}×",
                ", ".join(f"{p:.2f}×" for p in m["later_peaks_over_size"]),
            ]
            for s, m in mem.items()
        ]
        blocks.append(
            "Memory, one large answer over stdio (peak RSS above idle, over the answer's size):\n"
            + _table(["server", "answer", "idle RSS MiB", "first call", "next calls"], lines)
        )
    blocks.append("\n".join(f"{t['result']:<4}  {t['target']} ({t['value']})" for t in summary["targets"]))
    return "\n\n".join(blocks)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m bench.sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", metavar="PYTHON", help="interpreter with `mcp` installed: the Python SDK too")
    parser.add_argument("--compare-ts", metavar="NODE", help="Node 22 binary: the TypeScript SDK server too")
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS), help="wagers per answer")
    parser.add_argument("--rounds", type=int, default=None, help="stdio rounds (default 5; quick 1)")
    parser.add_argument("--window", type=float, default=None, help="seconds of calls per stdio measurement (0.6)")
    parser.add_argument("--http-rounds", type=int, default=None, help="HTTP rounds (default 3; quick 1)")
    parser.add_argument("--http-duration", type=float, default=None, help="seconds per HTTP measurement (1.5)")
    parser.add_argument("--no-stdio", dest="stdio", action="store_false")
    parser.add_argument("--no-http", dest="http", action="store_false")
    parser.add_argument("--no-memory", dest="memory", action="store_false")
    parser.add_argument("--quick", action="store_true", help="one short round of everything: a smoke run")
    parser.add_argument("--profile", action="store_true", help="ours in this process, CPU per call pass by pass")
    parser.add_argument("--calls", type=int, default=200, help="--profile: calls per size (fewer for large)")
    parser.add_argument("--token", choices=sorted(TOKENS), default="random", help="--profile: the member token")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="ours pass by pass and the floor in instructions (valgrind callgrind): repeatable on a busy machine",
    )
    parser.add_argument(
        "--passes",
        nargs="+",
        choices=(*INSTRUCTION_PASSES, *EXACT_PASSES),
        help="--instructions: only these (call, floor and the exact: ones run on the code before issue 24 too)",
    )
    parser.add_argument("--run-pass", help=argparse.SUPPRESS)  # one pass, run --calls times (under valgrind)
    parser.add_argument("--token-value", help=argparse.SUPPRESS)
    parser.add_argument("--time-limit", type=float, default=3600.0)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument("--strict", action="store_true", help="exit 1 when any target is MISS")
    args = parser.parse_args(argv)
    quick = args.quick
    args.rounds = args.rounds or (1 if quick else 5)
    args.window = args.window or (0.15 if quick else 0.6)
    args.http_rounds = args.http_rounds or (1 if quick else 3)
    args.http_duration = args.http_duration or (0.3 if quick else 1.5)
    args.http_warmup = 0.1 if quick else 0.3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    deadline = Deadline(args.time_limit)
    load_before = loadavg()
    started = time.time()
    machine = f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average {load_before:.2f} at the start"
    if args.run_pass:
        work = _pass_work(args.run_pass, args.counts[0], args.token_value or RANDOM_TOKEN, deadline)
        for _ in range(args.calls):
            work()
        stop_all()
        return 0
    if args.instructions:
        counts = [BASE, *args.counts]
        found = instructions(counts, TOKENS[args.token], 3, deadline, args.passes or INSTRUCTION_PASSES)
        print(
            f"instructions: ours in this process, token {args.token}, valgrind {platform.python_version()}; {machine}"
        )
        print(render_instructions(found, counts))
        path = Path(args.json).with_name(f"sizes-instructions-{args.token}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        report = {"token": args.token, "instructions": {k: {str(c): v for c, v in d.items()} for k, d in found.items()}}
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nresults: {path}")
        return 0
    if args.profile:
        rows = profile([BASE, *args.counts], args.calls, TOKENS[args.token], deadline)
        print(f"profile: ours in this process, token {args.token}, CPU per call (this thread) in ms; {machine}")
        print(render_profile(rows))
        path = Path(args.json).with_name(f"sizes-profile-{args.token}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rounded({"token": args.token, "rows": rows}), indent=2) + "\n", encoding="utf-8")
        print(f"\nresults: {path}")
        return 0
    errors: list[str] = []
    found = run(args, deadline, errors)
    summary = summarize(found)
    print(
        f"answer sizes: get_wagers from a loopback stub, {args.rounds} stdio rounds of {args.window:g} s, "
        f"{args.http_rounds} HTTP rounds of {args.http_duration:g} s at {HTTP_CLIENTS} clients; {machine}"
        + "".join(f", {LABELS[k]} {v}" for k, v in found["versions"].items())
    )
    if load_before >= (os.cpu_count() or 1) / 2:
        print(
            f"note: the machine was busy (load average {load_before:.2f}): absolute figures are noisy, ratios less so"
        )
    print()
    print(render(found, summary))
    for e in errors:
        print(f"error: {e}")
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": time.time() - started,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": loadavg(),
        },
        "config": {k: v for k, v in vars(args).items() if k not in ("json",)},
        "versions": found["versions"],
        "sizes": {str(c): len(answer_bytes(c)) for c in found["counts"]},
        "floor_ms": {str(c): v for c, v in summary["floor_ms"].items()},
        "floor_rounds": {str(c): v for c, v in found["floors"].items()},
        "cells": {
            f"{count}/{server}/{transport}/{token}": {"cpu_ms": cell.cpu, "p50_ms": cell.p50, "rps": cell.rps}
            for (count, server, transport, token), cell in found["cells"].items()
        },
        "memory": found["memory"],
        "targets": summary["targets"],
        "errors": errors,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rounded(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    if errors:
        return 1
    if args.strict and any(t["result"] == "MISS" for t in summary["targets"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
