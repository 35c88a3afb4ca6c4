"""The benchmark: cold start, memory, stdio latency, HTTP throughput and CPU per call, against a stub.

    python3 -m bench.run                                 our server only
    python3 -m bench.run --compare .venv-bench/bin/python  side by side with the official Python SDK
    python3 -m bench.run --compare .venv-bench/bin/python --compare-ts .tools/node22/.../bin/node
                                                         ... and the official TypeScript SDK
    python3 -m bench.run --quick --no-compare            a smoke run in seconds

Everything runs on 127.0.0.1: a gateway stub (bench.stub_gateway, its own process), our server
(`python3 -m mcp_server`, or --server-cmd), with --compare bench.sdk_server under the given
interpreter, and with --compare-ts bench/ts_sdk_server.mjs under the given Node. The direct GET
to the stub is measured with the same client as the floor. One table on stdout (with PASS/MISS
per target), the full figures as JSON (--json).

This module is the command line: it runs the benchmarks in order (bench.cold_start, bench.stdio,
bench.https, bench.throughput, on the shared runner bench.runner) and prints bench.table.

Standard library only; the SDKs are only ever run as separate processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cold_start import interpreter_startup, measure_cold_starts
from bench.https import measure_https, tls_trust_file
from bench.runner import (
    PROTOCOL_VERSION,
    REPO,
    BenchError,
    BenchTimeout,
    Deadline,
    StubProcess,
    child_env,
    compile_ours,
    loadavg,
    our_command,
    our_python,
    progress,
    rounded,
    sdk_command,
    stop_all,
    ts_command,
)
from bench.stdio import measure_stdio, sequential_direct
from bench.stub_gateway import BENCH_TOKEN
from bench.table import TARGETS, evaluate, num, render_table, table_rows
from bench.throughput import HTTP_LEVELS, measure_direct_http, measure_http

DEFAULT_JSON = REPO / "bench" / "results" / "latest.json"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python3 -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, short runs: a smoke run in seconds")
    parser.add_argument(
        "--calls", type=int, default=None, metavar="N", help="timed stdio calls per kind (default 2000; quick 200)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, metavar="S", help="seconds per HTTP load level (default 3; quick 0.5)"
    )
    parser.add_argument(
        "--cold-starts", type=int, default=None, metavar="R", help="measured cold starts (default 10; quick 3)"
    )
    parser.add_argument(
        "--compare", metavar="PYTHON", default=None, help="interpreter with `mcp` installed: run the SDK server too"
    )
    parser.add_argument(
        "--compare-ts",
        metavar="NODE",
        default=None,
        help="Node 22 binary: run bench/ts_sdk_server.mjs (the official TypeScript SDK, from .tools/ts-sdk) too",
    )
    parser.add_argument(
        "--http-only", action="store_true", help="skip cold starts and stdio: only the HTTP load (for repeated runs)"
    )
    parser.add_argument(
        "--no-compare", action="store_true", help="our server only, even with --compare or --compare-ts"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        default=str(DEFAULT_JSON),
        help=f"where to write the results (default {DEFAULT_JSON.relative_to(REPO)})",
    )
    parser.add_argument(
        "--server-cmd",
        metavar="CMD",
        default=None,
        help="command for our server (default: PYTHON -m mcp_server); --http 0 --host 127.0.0.1 is appended for HTTP",
    )
    parser.add_argument(
        "--ours-python",
        metavar="PYTHON",
        default=None,
        help="interpreter for our server (default: the --compare one when comparing, so both "
        "servers start under the same interpreter and site setup; else this one)",
    )
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, metavar="MS", help="fixed delay the stub adds to every answer"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="global limit for the whole run (default 900; quick 60)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when any target is MISS")
    args = parser.parse_args(argv)
    quick = args.quick
    args.calls = args.calls if args.calls is not None else (200 if quick else 2000)
    args.duration = args.duration if args.duration is not None else (0.5 if quick else 3.0)
    args.cold_starts = args.cold_starts if args.cold_starts is not None else (3 if quick else 10)
    args.time_limit = args.time_limit if args.time_limit is not None else (60.0 if quick else 900.0)
    args.warmup_calls = 20 if quick else 200
    args.warmup_s = 0.2 if quick else 0.5
    if args.calls < 1 or args.duration <= 0 or args.cold_starts < 1 or args.time_limit <= 0:
        parser.error("--calls, --duration, --cold-starts and --time-limit must be positive")
    if args.no_compare:
        args.compare = args.compare_ts = None
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    deadline = Deadline(args.time_limit)
    started = time.time()
    load_before = loadavg()
    errors: list[str] = []
    ours: dict[str, Any] | None = None
    sdk: dict[str, Any] | None = None
    ts: dict[str, Any] | None = None
    floor: dict[str, Any] = {}
    sdk_version = ts_version = ""
    timed_out = False
    stub: StubProcess | None = None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        our_cmd: list[str] | None = None
        sdk_cmd: list[str] | None = None
        ts_cmd: list[str] | None = None
        ours_python = our_python(args.ours_python, args.compare)
        try:
            our_cmd = our_command(args.server_cmd, ours_python)
            if not args.server_cmd:
                compile_ours(our_cmd[0])
        except BenchError as exc:
            errors.append(f"ours: {exc}")
        if args.compare:
            try:
                sdk_cmd, sdk_version = sdk_command(args.compare)
            except (BenchError, OSError, subprocess.SubprocessError) as exc:
                errors.append(f"sdk: {exc}")
        if args.compare_ts:
            try:
                ts_cmd, ts_version = ts_command(args.compare_ts)
            except (BenchError, OSError, subprocess.SubprocessError) as exc:
                errors.append(f"ts: {exc}")
        progress(f"stub gateway (delay {args.delay_ms:g} ms)")
        stub = StubProcess(args.delay_ms, deadline)
        progress(f"direct GET floor: {args.calls} sequential, then {', '.join(map(str, HTTP_LEVELS))} clients")
        progress("interpreter start-up (the cold-start floor)")
        floor.update(interpreter_startup(ours_python, args.cold_starts, deadline))
        if sdk_cmd is not None and sdk_cmd[0] != ours_python:
            sdk_floor = interpreter_startup(sdk_cmd[0], args.cold_starts, deadline)
            floor["sdk_python_startup_ms"] = sdk_floor["python_startup_ms"]
            floor["sdk_python_rss_mib"] = sdk_floor["python_rss_mib"]
        floor.update(sequential_direct(stub.port, args.calls, args.warmup_calls, deadline))
        floor.update(measure_direct_http(stub.port, args.warmup_s, args.duration, deadline))
        servers: list[tuple[str, list[str], dict[str, Any]]] = []
        if our_cmd is not None:
            ours = {"cmd": our_cmd}
            servers.append(("ours", our_cmd, ours))
        if sdk_cmd is not None:
            sdk = {"cmd": sdk_cmd}
            servers.append(("sdk", sdk_cmd, sdk))
        if ts_cmd is not None:
            ts = {"cmd": ts_cmd}
            servers.append(("ts", ts_cmd, ts))
        stdio_env = child_env(stub.url, BENCH_TOKEN)
        http_env = child_env(stub.url, None)  # HTTP mode refuses to boot with an env token
        names = ", ".join(label for label, _, _ in servers) or "no server"
        if not args.http_only:
            progress(f"cold starts of {names}, taking turns ({args.cold_starts} + 1 warm-up each)")
            measure_cold_starts(servers, stdio_env, args.cold_starts, deadline, errors)
        # Each later phase on its own: what one measured survives another's failure.
        for label, cmd, out in servers if not args.http_only else []:
            progress(f"{label}: stdio, {args.calls} calls per kind")
            try:
                out.update(measure_stdio(label, cmd, stdio_env, args.calls, args.warmup_calls, deadline))
                out["stdio_call_overhead_p50_ms"] = out["stdio_call_p50_ms"] - floor["direct_p50_ms"]
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(str(exc))  # it names the server already
        if ours is not None and our_cmd is not None and not args.http_only:  # https is a stdio run
            progress(f"ours over https: {args.cold_starts} + 1 cold starts, {args.calls} calls per kind")
            tls_stub = StubProcess(args.delay_ms, deadline, tls=True)
            trust = tls_trust_file()
            try:
                https_env = {**child_env(tls_stub.url, BENCH_TOKEN), "SSL_CERT_FILE": trust}
                ours.update(
                    measure_https(our_cmd, https_env, args.calls, args.warmup_calls, args.cold_starts, deadline)
                )
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(f"ours (https): {exc}")
            finally:
                tls_stub.close()
                os.unlink(trust)
        for label, cmd, out in servers:
            progress(f"{label}: HTTP at {', '.join(map(str, HTTP_LEVELS))} clients, {args.duration:g} s each")
            try:
                out.update(measure_http(label, cmd, http_env, args.warmup_s, args.duration, deadline))
            except BenchTimeout:
                raise
            except BenchError as exc:
                errors.append(str(exc))  # it names the server already
    except BenchTimeout as exc:
        errors.append(str(exc))
        timed_out = True
    except BenchError as exc:
        errors.append(str(exc))
    except KeyboardInterrupt:
        errors.append("interrupted")
        timed_out = True
    finally:
        if stub is not None:
            stub.close()
        stop_all()
        signal.signal(signal.SIGTERM, previous)

    rows = table_rows(args.calls, args.cold_starts)
    verdicts = {t.id: evaluate(t, ours, sdk, ts) for t in TARGETS}
    for name, server in (("ours", ours), ("sdk", sdk), ("ts", ts)):
        if server:
            for c in HTTP_LEVELS:
                n = server.get(f"http_{c}_errors") or 0
                if n:
                    first = server.get(f"http_{c}", {}).get("first_error", "")
                    errors.append(f"{name} (HTTP): {n} failed requests at {c} client(s): {first}")

    report = {
        "schema": 1,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": time.time() - started,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": loadavg(),
        },
        "config": {
            "quick": args.quick,
            "calls": args.calls,
            "warmup_calls": args.warmup_calls,
            "cold_starts": args.cold_starts,
            "http_levels": list(HTTP_LEVELS),
            "http_duration_s": args.duration,
            "http_warmup_s": args.warmup_s,
            "stub_delay_ms": args.delay_ms,
            "protocol_version": PROTOCOL_VERSION,
            "compare": args.compare,
            "compare_ts": args.compare_ts,
            "http_only": args.http_only,
            "sdk_version": sdk_version or None,
            "ts_sdk_version": ts_version or None,
        },
        "direct": floor,
        "ours": ours,
        "sdk": sdk,
        "ts": ts,
        "ratios_ours_over_sdk": {
            row.metric: (num(ours, row.metric) or 0.0) / v
            for row in rows
            if (v := num(sdk, row.metric)) and num(ours, row.metric) is not None
        },
        "targets": list(verdicts.values()),
        "errors": errors,
    }

    title = (
        f"fairwins-mcp bench: N={args.calls}, cold starts={args.cold_starts}, HTTP {args.duration:g} s per level, "
        f"stub delay {args.delay_ms:g} ms, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        + (f", SDK mcp {sdk_version}" if sdk_version else "")
        + (f", TS SDK {ts_version}" if ts_version else "")
    )
    print(title)
    print(f"ours: {' '.join(ours['cmd']) if ours else '—'}")
    if sdk:
        print(f"SDK:  {' '.join(sdk['cmd'])}")
    if ts:
        print(f"TS:   {' '.join(ts['cmd'])}")
    print(
        "ours/SDK, ours/TS: ratios of ours to the official Python and TypeScript SDK servers; direct: the floor "
        "(the same GET made straight to the stub; for cold start and RSS, ours' interpreter running `-c pass`)"
    )
    if load_before >= (os.cpu_count() or 1) / 2:
        print(
            f"note: the machine was busy when the run began (1-min load average {load_before:.2f} on "
            f"{os.cpu_count()} CPUs): absolute figures are noisy; the ratios less so"
        )
    if "sdk_python_startup_ms" in floor:
        print(
            f"note: the interpreters differ: ours starts in {floor['python_startup_ms']:.1f} ms / "
            f"{floor['python_rss_mib']:.1f} MiB, the SDK's in {floor['sdk_python_startup_ms']:.1f} ms / "
            f"{floor['sdk_python_rss_mib']:.1f} MiB before any server code runs"
        )
    print()
    print(render_table(rows, ours, sdk, ts, floor, verdicts))
    if errors:
        print()
        for e in errors:
            print(f"error: {e}")

    path = Path(args.json)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rounded(report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nresults: {path}")
    except OSError as exc:
        print(f"\ncould not write {path}: {exc}", file=sys.stderr)
        return 1

    if timed_out:
        return 3
    if errors:
        return 1
    if args.strict and any(v["result"] == "MISS" for v in verdicts.values()):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
