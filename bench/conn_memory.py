"""Memory per connection (issue 35, point 4): resident memory per idle keep-alive connection and per waiting call.

    python -m bench.conn_memory                      ours and the floor, 1,000 and 10,000 idle, 1,000 and 8,000 waiting
    python -m bench.conn_memory --ours-tree DIR      ours from another checkout (read-only)

For each server, kind and N, a fresh server on CPU 0 against bench/gateway_double.mjs (delay 0):
a warm-up of tools/calls, then its VmRSS (the baseline); then N connections from this process's
asyncio client, and VmRSS again once all N are in place. The figure is (after - baseline) / N.

    idle     each connection makes one stateless tools/call, reads its answer and stays open
             (keep-alive); measured once all N answered and the server holds N sockets
    waiting  the double's delay is raised to a minute first; each connection sends one tools/call
             and the figure is taken once the double holds N GETs waiting

Ours runs with its in-flight bound (FAIRWINS_MCP_MAX_CONCURRENCY) raised for the run so that its
connection bound (4 x that + 16) admits N, and without its per-peer bounds (every connection comes
from this one address). The target: at most 30 KiB per connection of either kind. Standard
library only; results in bench/results/conn_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.crowd import (
    DOCS,
    NODE,
    OURS_FLAGS,
    SERVER_CPUS,
    TOKEN,
    Double,
    Server,
    answered_well,
    full_loadavg,
    raise_nofile,
    replace_block,
    sandbox_wagers_body,
    wait_ready,
)
from bench.runner import (
    REPO,
    BenchError,
    Deadline,
    child_env,
    compile_ours,
    progress,
    rounded,
    start_http,
    stop,
    stop_all,
)

DEFAULT_JSON = REPO / "bench" / "results" / "conn_memory.json"
TARGET_KIB = 30.0
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_wagers","arguments":{}}}'
REQUEST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(CALL) + CALL
)
OPENING = 200  # connections being opened at once: a burst of 10,000 SYNs would overflow the backlog
WAIT_S = 120.0  # every wait here has this bound


def vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError(f"no VmRSS for {pid}")


def sockets_held(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def set_delay(double_url: str, delay_ms: float) -> dict[str, Any]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"{double_url}/__double?delay={delay_ms:g}", data=b"", method="POST")
    with opener.open(request, timeout=10) as response:
        found: dict[str, Any] = json.loads(response.read())
    return found


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding":
            raise BenchError("a chunked answer: this client reads Content-Length only")
    return status, await reader.readexactly(length)


async def open_crowd(port: int, n: int, read: bool) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """`n` connections, each with one tools/call sent (and its answer read, when `read`)."""
    gate = asyncio.Semaphore(OPENING)
    crowd: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def one() -> None:
        async with gate:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
            crowd.append((reader, writer))
            writer.write(REQUEST)
            await writer.drain()
            if read:
                status, body = await read_answer(reader)
                if not answered_well(status, body):
                    raise BenchError(f"a call was not answered: HTTP {status} {body[:200]!r}")

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), WAIT_S)
    return crowd


async def settle(probe: Any, at_least: int) -> int:
    """Poll `probe()` every 100 ms until it reaches `at_least` (bounded by WAIT_S); its last value."""
    until = time.monotonic() + WAIT_S
    value = probe()
    while value < at_least and time.monotonic() < until:
        await asyncio.sleep(0.1)
        value = probe()
    return int(value)


async def measure_one(server: Server, double: Double, kind: str, n: int, deadline: Deadline) -> dict[str, Any]:
    env = child_env(double.url, None)
    env.update(server.env)
    if server.key == "ours":
        env["FAIRWINS_MCP_MAX_CONCURRENCY"] = str(min(8192, max(1024, n)))
    set_delay(double.url, 0)
    proc, drain = start_http(["taskset", "-c", SERVER_CPUS, *server.cmd], env, deadline)
    crowd: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        if drain.port is None:
            raise BenchError(f"{server.label}: no URL on stderr; stderr: {drain.tail()!r}")
        wait_ready(server, drain.port, proc, deadline)
        for _reader, writer in await open_crowd(drain.port, 64, read=True):  # the warm-up: pools, caches
            writer.close()
        await asyncio.sleep(1.0)
        base_sockets = sockets_held(proc.pid)
        base = vm_rss_kib(proc.pid)
        if kind == "waiting":
            set_delay(double.url, 60_000)
        t0 = time.monotonic()
        crowd = await open_crowd(drain.port, n, read=kind == "idle")
        if kind == "waiting":
            held = await settle(lambda: set_delay(double.url, 60_000)["waiting"], n)
            if held < n:
                raise BenchError(f"{server.label}: only {held} of {n} calls reached the double")
        else:
            held = await settle(lambda: sockets_held(proc.pid) - base_sockets, n)
            if held < n:
                raise BenchError(f"{server.label}: holds {held} of {n} connections")
        await asyncio.sleep(0.5)
        after = vm_rss_kib(proc.pid)
        sockets = sockets_held(proc.pid) - base_sockets
        seconds = time.monotonic() - t0
        if proc.poll() is not None:
            raise BenchError(f"{server.label}: exited; stderr: {drain.tail()!r}")
    finally:
        for _, writer in crowd:
            writer.close()
        stop(proc)
        set_delay(double.url, 0)
    return {
        "n": n,
        "kind": kind,
        "rss_before_kib": base,
        "rss_after_kib": after,
        "kib_per_connection": (after - base) / n,
        "sockets_added": sockets,
        "seconds_to_open": seconds,
        "loadavg": full_loadavg(),
    }


def render(results: dict[str, Any]) -> str:
    rows = [["server", "kind", "N", "RSS before MiB", "RSS after MiB", "KiB per connection", f"≤ {TARGET_KIB:g} KiB"]]
    for label, cells in results.items():
        for c in cells:
            if "error" in c:
                rows.append([label, c["kind"], f"{c['n']:,}", "—", "—", c["error"][:60], "n/a"])
                continue
            per = c["kib_per_connection"]
            rows.append(
                [
                    label,
                    c["kind"],
                    f"{c['n']:,}",
                    f"{c['rss_before_kib'] / 1024:.1f}",
                    f"{c['rss_after_kib'] / 1024:.1f}",
                    f"{per:.1f}",
                    "PASS" if per <= TARGET_KIB else "FAIL",
                ]
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_docs(report: dict[str, Any]) -> None:
    loads = sorted({c["loadavg"].split()[0] for cells in report["results"].values() for c in cells if "loadavg" in c})
    conditions = f"Measured {report['started']}, 1-minute load average {', '.join(loads) or '—'} at the measurements."
    replace_block(DOCS, "bench.conn_memory", conditions + "\n\n" + render_markdown(report["results"]))


def render_markdown(results: dict[str, Any]) -> str:
    lines = [
        f"| server | kind | N | RSS before MiB | RSS after MiB | KiB per connection | ≤ {TARGET_KIB:g} KiB |",
        "|:---|:---|---:|---:|---:|---:|:---:|",
    ]
    for label, cells in results.items():
        for c in cells:
            if "error" not in c:
                lines.append(
                    f"| {label} | {c['kind']} | {c['n']:,} | {c['rss_before_kib'] / 1024:.1f} | "
                    f"{c['rss_after_kib'] / 1024:.1f} | {c['kib_per_connection']:.1f} | "
                    f"{'PASS' if c['kib_per_connection'] <= TARGET_KIB else 'FAIL'} |"
                )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    deadline = Deadline(args.time_limit)
    python = args.python
    ours_cmd = [python, "-m", "mcp_server"]
    ours_env: dict[str, str] = {}
    if args.ours_tree:
        ours_cmd = [python, "-P", "-m", "mcp_server"]
        ours_env = {
            "PYTHONPATH": str(Path(args.ours_tree).resolve()),
            "PYTHONPYCACHEPREFIX": str(REPO / "bench" / "results" / "pycache"),
        }
    else:
        compile_ours(python)
    servers = {
        "ours": Server("ours", "ours", [*ours_cmd, *OURS_FLAGS], env=ours_env),
        "floor": Server("floor", "floor (bare asyncio)", [python, "-m", "bench.floor_proxy"]),
    }
    with tempfile.NamedTemporaryFile(prefix="crowd-wagers-", suffix=".json", delete=False) as fh:
        fh.write(sandbox_wagers_body())
        body_file = fh.name
    results: dict[str, Any] = {}
    double = Double(args.node, body_file, 0)
    try:
        for key in args.servers:
            server = servers[key]
            cells: list[dict[str, Any]] = []
            results[server.label] = cells
            for kind, sizes in (("idle", args.idle), ("waiting", args.waiting)):
                for n in sizes:
                    progress(f"{server.label}: {n:,} {kind} connections")
                    try:
                        found = await measure_one(server, double, kind, n, deadline)
                        progress(f"  {found['kib_per_connection']:.1f} KiB per connection")
                    except (TimeoutError, BenchError, OSError) as exc:
                        found = {"n": n, "kind": kind, "error": f"{type(exc).__name__}: {exc}"}
                        progress(f"  {found['error']}")
                    cells.append(found)
    finally:
        double.close()
        stop_all()
        os.unlink(body_file)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.conn_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", nargs="+", default=["ours", "floor"], choices=["ours", "floor"])
    parser.add_argument(
        "--idle", type=int, nargs="*", default=[1000, 10000], help="idle connections (default 1000 10000)"
    )
    parser.add_argument(
        "--waiting", type=int, nargs="*", default=[1000, 8000], help="waiting calls (default 1000 8000)"
    )
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the servers")
    parser.add_argument("--node", default=str(NODE))
    parser.add_argument("--ours-tree", metavar="DIR")
    parser.add_argument("--time-limit", type=float, default=1800.0)
    parser.add_argument("--json", default=str(DEFAULT_JSON))
    parser.add_argument(
        "--write-docs", action="store_true", help="the table into BENCHMARKS.md and docs/performance.md"
    )
    parser.add_argument("--from-json", metavar="FILE", help="no run: print (and --write-docs) the table of FILE")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        print(render(saved["results"]))
        if args.write_docs:
            write_docs(saved)
        return 0
    raise_nofile()
    started = time.time()
    results = asyncio.run(run(args))
    print(f"memory per connection: load average {full_loadavg()}; {time.time() - started:.0f} s")
    print(render(results))
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "target_kib": TARGET_KIB,
        "results": results,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rounded(report), indent=2) + "\n", encoding="utf-8")
    print(f"\nresults: {path}")
    if args.write_docs:
        write_docs(report)
    failed = any("error" in c or c["kib_per_connection"] > TARGET_KIB for cells in results.values() for c in cells)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
