"""The table: the targets, its rows, a PASS/MISS verdict per target, and the rendered text."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bench.throughput import HTTP_LEVELS


@dataclass(frozen=True)
class Target:
    id: str
    text: str
    metric: str
    kind: str  # "ratio_le" | "ratio_ge" | "abs_le" | "abs_ge"
    bound: float
    against: str = "sdk"  # the server a ratio is taken against: "sdk" (Python) or "ts"


TARGETS = (
    Target("cold_start", "≤ 1/8 SDK", "cold_init_ms", "ratio_le", 1 / 8),
    Target("memory", "≤ 1/3 SDK", "rss_after_mib", "ratio_le", 1 / 3),
    Target("stdio_overhead", "≤ 0.30 ms", "stdio_call_overhead_p50_ms", "abs_le", 0.30),
    Target("cpu_per_call", "≤ 1/3 SDK", "cpu_per_call_ms", "ratio_le", 1 / 3),
    Target("http8_vs_sdk", "≥ 3.5× SDK", "http_8_rps", "ratio_ge", 3.5),
    Target("http8_vs_ts", "≥ 1.5× TS SDK", "http_8_rps", "ratio_ge", 1.5, against="ts"),
)


@dataclass(frozen=True)
class Row:
    label: str
    metric: str
    fmt: str
    floor: str = ""  # the direct-to-stub metric shown beside it
    target: str = ""  # a Target.id
    ts: bool = True  # show the TypeScript SDK figure, when there is one
    ratio: bool = True  # show ours/SDK and ours/TS


def table_rows(calls: int, cold_runs: int) -> list[Row]:
    """The rows in order; `calls` and `cold_runs` go into their labels."""
    rows = [
        Row(
            f"cold start → initialize, ms (median of {cold_runs})",
            "cold_init_ms",
            "{:.1f}",
            floor="python_startup_ms",
            target="cold_start",
        ),
        Row("cold start → first tool result, ms", "cold_first_result_ms", "{:.1f}"),
        Row("RSS after start, MiB", "rss_start_mib", "{:.1f}", floor="python_rss_mib"),
        Row(f"RSS after {calls} calls, MiB", "rss_after_mib", "{:.1f}", target="memory"),
        Row("stdio tools/call p50, ms", "stdio_call_p50_ms", "{:.3f}", floor="direct_p50_ms"),
        Row("stdio tools/call p99, ms", "stdio_call_p99_ms", "{:.3f}", floor="direct_p99_ms"),
        Row(
            "stdio tools/call p50 over direct GET, ms", "stdio_call_overhead_p50_ms", "{:.3f}", target="stdio_overhead"
        ),
        Row("stdio tools/list p50, ms", "stdio_list_p50_ms", "{:.3f}"),
        Row("stdio tools/list p99, ms", "stdio_list_p99_ms", "{:.3f}"),
        Row("stdio ping p50, ms", "stdio_ping_p50_ms", "{:.3f}"),
        Row("stdio ping p99, ms", "stdio_ping_p99_ms", "{:.3f}"),
        Row("server CPU per tools/call (stdio), ms", "cpu_per_call_ms", "{:.3f}", target="cpu_per_call"),
        Row("first tools/call after initialize (new connection), ms", "cold_first_call_ms", "{:.1f}"),
        Row("  the same over https (ssl, system CAs, handshake), ms", "https_cold_first_call_ms", "{:.1f}", ts=False),
        Row("stdio tools/call p50 over https (kept-alive TLS), ms", "https_stdio_call_p50_ms", "{:.3f}", ts=False),
        Row("stdio tools/call p99 over https (kept-alive TLS), ms", "https_stdio_call_p99_ms", "{:.3f}", ts=False),
        Row("server CPU per tools/call over https (stdio), ms", "https_cpu_per_call_ms", "{:.3f}", ts=False),
    ]
    for c in HTTP_LEVELS:
        noun = "client" if c == 1 else "clients"
        rows.append(
            Row(
                f"HTTP {c} {noun}, req/s",
                f"http_{c}_rps",
                "{:,.0f}",
                floor=f"direct_{c}_rps",
                target="http8_vs_sdk" if c == 8 else "",
            )
        )
        if c == 8:
            # The same figure again: one row per target, so each has its own PASS/MISS.
            rows.append(Row("HTTP 8 clients, req/s (vs TS SDK)", "http_8_rps", "{:,.0f}", target="http8_vs_ts"))
        rows.append(Row(f"HTTP {c} {noun}, p50 ms", f"http_{c}_p50_ms", "{:.3f}", floor=f"direct_{c}_p50_ms"))
        rows.append(Row(f"HTTP {c} {noun}, p99 ms", f"http_{c}_p99_ms", "{:.3f}", floor=f"direct_{c}_p99_ms"))
        rows.append(Row(f"HTTP {c} {noun}, server CPU per call, ms", f"http_{c}_cpu_per_call_ms", "{:.3f}"))
    return rows


def num(d: dict[str, Any] | None, key: str) -> float | None:
    """`d[key]` as a float, or None when `d` is missing, the key absent, or the value not a number (or NaN)."""
    if not d:
        return None
    v = d.get(key)
    if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
        return float(v)
    return None


def evaluate(
    target: Target, ours: dict[str, Any] | None, sdk: dict[str, Any] | None, ts: dict[str, Any] | None
) -> dict[str, Any]:
    """One target's verdict (PASS, MISS, or n/a when a server was not measured) and the value judged."""
    mine = num(ours, target.metric)
    theirs = num(ts if target.against == "ts" else sdk, target.metric)
    value: float | None
    if target.kind.startswith("ratio"):
        value = mine / theirs if mine is not None and theirs else None
    else:
        value = mine
    if value is None:
        verdict = "n/a"
    elif target.kind.endswith("_le"):
        verdict = "PASS" if value <= target.bound else "MISS"
    else:
        verdict = "PASS" if value >= target.bound else "MISS"
    return {
        "id": target.id,
        "target": target.text,
        "metric": target.metric,
        "kind": target.kind,
        "bound": target.bound,
        "value": value,
        "result": verdict,
    }


def render_table(
    rows: list[Row],
    ours: dict[str, Any] | None,
    sdk: dict[str, Any] | None,
    ts: dict[str, Any] | None,
    floor: dict[str, Any],
    verdicts: dict[str, dict[str, Any]],
) -> str:
    def cell(d: dict[str, Any] | None, key: str, fmt: str) -> str:
        v = num(d, key)
        return "—" if v is None else fmt.format(v)

    def ratio(row: Row, other: dict[str, Any] | None) -> str:
        mine, theirs = num(ours, row.metric), num(other, row.metric)
        return f"{mine / theirs:.2f}" if row.ratio and mine is not None and theirs else "—"

    header = [
        "metric",
        "ours",
        "SDK" if sdk is not None else "SDK (off)",
        "TS SDK" if ts is not None else "TS SDK (off)",
        "direct",
        "ours/SDK",
        "ours/TS",
        "target",
        "result",
    ]
    body: list[list[str]] = []
    for row in rows:
        verdict = verdicts.get(row.target, {}) if row.target else {}
        body.append(
            [
                row.label,
                cell(ours, row.metric, row.fmt),
                cell(sdk, row.metric, row.fmt),
                cell(ts, row.metric, row.fmt),
                cell(floor, row.floor, row.fmt) if row.floor else "",
                ratio(row, sdk),
                ratio(row, ts),
                verdict.get("target", ""),
                verdict.get("result", ""),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    right = {1, 2, 3, 4, 5, 6}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(r) for r in body)])
