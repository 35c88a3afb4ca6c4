"""SVG charts of the crowd and the answer sizes (issue 35, point 5), standard library only.

    python -m bench.charts      from bench/results/crowd.json and bench/results/sizes.json into docs/images/

    crowd-throughput.svg   answered calls per second against connections (log scale), each server's
                           worst run at the 200 ms gateway, with the ceiling (connections / 0.2 s)
    crowd-p99.svg          p99 latency against connections, the same runs
    sizes-cpu.svg          server CPU per call against answer size (log scales), over HTTP, from bench.sizes
    shapes-cpu.svg         CPU per MB of gateway answer against its size, by shape, from bench.shapes
                           (bench/results/shapes.json), with issue 50's bar of 25 ms per MB
    fairness.svg           the small calls' latency percentiles alone and beside 4 MB answers, on one
                           core, from bench.fairness (bench/results/fairness.json)

Each chart is a plain SVG on a white card (readable on light and dark pages): labelled axes,
a legend, one colour and marker per server. A chart whose JSON is missing is not written.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bench.runner import REPO

IMAGES = REPO / "docs" / "images"
CROWD_JSON = REPO / "bench" / "results" / "crowd.json"
SIZES_JSON = REPO / "bench" / "results" / "sizes.json"
SHAPES_JSON = REPO / "bench" / "results" / "shapes.json"
FAIRNESS_JSON = REPO / "bench" / "results" / "fairness.json"
WIDTH, HEIGHT = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 78, 190, 48, 62
# Colour-blind-safe (Okabe-Ito), dark enough on white.
STYLE = {
    "ours": ("#0072B2", "circle"),
    "ours-w2": ("#56B4E9", "circle"),
    "ts": ("#D55E00", "square"),
    "sdk": ("#009E73", "triangle"),
    "floor": ("#6B6B6B", "diamond"),
    "ceiling": ("#999999", ""),
    "markets": ("#0072B2", "circle"),
    "wagers random": ("#D55E00", "square"),
    "wagers unlucky": ("#009E73", "triangle"),
    "bar": ("#999999", ""),
    "alone": ("#0072B2", "circle"),
    "beside": ("#D55E00", "square"),
}


@dataclass
class Series:
    key: str
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False


class Axis:
    def __init__(self, lo: float, hi: float, log: bool, start: float, end: float) -> None:
        self.log = log
        if log:
            self.lo, self.hi = math.log10(lo), math.log10(hi)
        else:
            self.lo, self.hi = lo, hi
        self.start, self.end = start, end

    def at(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.start + (v - self.lo) / ((self.hi - self.lo) or 1) * (self.end - self.start)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round linear ticks from `lo` to past `hi`."""
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(math.ceil((hi - first) / step) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(float(v))
    return ticks


def label_number(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3 and v % 1000 == 0:
        return f"{v / 1e3:g}k" if v >= 1e4 else f"{v:,.0f}"
    return f"{v:,.3g}" if v < 1 else f"{v:,.0f}" if v == int(v) else f"{v:,.2f}"


def marker(shape: str, x: float, y: float, colour: str) -> str:
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}"/>'
    if shape == "triangle":
        return (
            f'<polygon points="{x:.1f},{y - 5:.1f} {x + 5:.1f},{y + 4:.1f} {x - 5:.1f},{y + 4:.1f}" fill="{colour}"/>'
        )
    if shape == "diamond":
        points = f"{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}"
        return f'<polygon points="{points}" fill="{colour}"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>'


def chart(
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    *,
    x_log: bool,
    y_log: bool = False,
    x_ticks: Sequence[float] | None = None,
    note: str = "",
) -> str:
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if y > 0 or not y_log]
    x_lo, x_hi = min(xs), max(xs)
    if x_log:
        x_lo, x_hi = x_lo / 1.3, x_hi * 1.3
    if y_log:
        y_lo, y_hi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
        yticks = log_ticks(y_lo, y_hi)
    else:
        yticks = nice_ticks(0, max(ys) * 1.05)
        y_lo, y_hi = 0.0, yticks[-1]
    x = Axis(x_lo, x_hi, x_log, LEFT, WIDTH - RIGHT)
    y = Axis(y_lo, y_hi, y_log, HEIGHT - BOTTOM, TOP)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" rx="8" fill="#ffffff" stroke="#d0d0d0"/>',
        f'<text x="{LEFT}" y="28" font-size="15" font-weight="bold" fill="#1a1a1a">{escape(title)}</text>',
    ]
    for t in yticks:
        py = y.at(t)
        out.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{WIDTH - RIGHT}" y2="{py:.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py + 4:.1f}" text-anchor="end" fill="#333">{label_number(t)}</text>')
    for t in x_ticks or (log_ticks(x_lo, x_hi) if x_log else nice_ticks(x_lo, x_hi)):
        px = x.at(t)
        out.append(f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{HEIGHT - BOTTOM}" stroke="#f0f0f0"/>')
        out.append(
            f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle" fill="#333">{label_number(t)}</text>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - RIGHT - LEFT}" height="{HEIGHT - BOTTOM - TOP}" '
        'fill="none" stroke="#888"/>'
    )
    out.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 18}" text-anchor="middle" fill="#1a1a1a">'
        f"{escape(x_label)}</text>"
    )
    cy = (TOP + HEIGHT - BOTTOM) / 2
    out.append(
        f'<text x="18" y="{cy:.0f}" text-anchor="middle" transform="rotate(-90 18 {cy:.0f})" fill="#1a1a1a">'
        f"{escape(y_label)}</text>"
    )
    for i, s in enumerate(series):
        colour, shape = STYLE.get(s.key, ("#000000", "circle"))
        pts = [(x.at(px), y.at(py)) for px, py in sorted(s.points) if py > 0 or not y_log]
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        if shape:
            out.extend(marker(shape, px, py, colour) for px, py in pts)
        ly = TOP + 12 + i * 22
        lx = WIDTH - RIGHT + 16
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 22}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        if shape:
            out.append(marker(shape, lx + 11, ly, colour))
        out.append(f'<text x="{lx + 30}" y="{ly + 4}" fill="#1a1a1a">{escape(s.label)}</text>')
    if note:
        out.append(
            f'<text x="{WIDTH - 12}" y="{HEIGHT - 6}" text-anchor="end" font-size="10" fill="#666">'
            f"{escape(note)}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def crowd_series(report: dict[str, Any], metric: str, scale: float) -> tuple[list[Series], list[int], float]:
    delay = float(report["config"]["delay_ms"])
    sizes = sorted({int(size) for d, size in report["combos"] if float(d) == delay})
    found = []
    for key in report["order"]:
        if key == "ours-w2":
            continue  # one size only: the tables have it
        points = []
        for size in sizes:
            entry = report["results"].get(key, {}).get(f"{delay:g}/{size}", {})
            value = (entry.get("worst") or {}).get(metric)
            if isinstance(value, (int, float)):
                points.append((float(size), value * scale))
        if points:
            found.append(Series(key, report["labels"][key], points))
    return found, sizes, delay


def crowd_charts(report: dict[str, Any]) -> dict[str, str]:
    note = f"worst of {report['config']['runs']} runs, server pinned to one core; {report['started'][:10]}"
    series, sizes, delay = crowd_series(report, "rps", 1.0)
    ceiling = Series("ceiling", f"ceiling (c / {delay / 1000:g} s)", [(s, s / (delay / 1000)) for s in sizes], True)
    top = max((y for s in series for _, y in s.points), default=1.0)
    if any(v > top * 1.6 for _, v in ceiling.points):  # the axis follows the servers, not the ceiling
        ceiling.points = [(s, min(v, top * 1.6)) for s, v in ceiling.points]
        ceiling.label = f"ceiling c / {delay / 1000:g} s (cut)"
    throughput = chart(
        f"Throughput against connections (gateway {delay:g} ms)",
        "connections (log scale)",
        "answered calls per second",
        [*series, ceiling],
        x_log=True,
        x_ticks=sizes,
        note=note,
    )
    series, sizes, delay = crowd_series(report, "p99_ms", 1 / 1000)
    p99 = chart(
        f"p99 latency against connections (gateway {delay:g} ms)",
        "connections (log scale)",
        "p99 latency, s (log scale)",
        series,
        x_log=True,
        y_log=True,
        x_ticks=sizes,
        note=note,
    )
    return {"crowd-throughput.svg": throughput, "crowd-p99.svg": p99}


def sizes_chart(report: dict[str, Any]) -> str:
    """CPU per call (median of its rounds) against the answer's bytes, over HTTP with a random member
    token (bench.sizes measures a token sharing pieces with the answer too), one line per server."""
    sizes = {int(k): v for k, v in report["sizes"].items()}
    per: dict[str, list[tuple[float, float]]] = {}
    for key, cell in report["cells"].items():
        count, server, transport, token = key.split("/")
        if transport != "http" or token != "random" or not cell.get("cpu_ms"):
            continue
        values = [v for v in cell["cpu_ms"] if isinstance(v, (int, float))]
        if values:
            per.setdefault(server, []).append((sizes[int(count)] / 1024, statistics.median(values)))
    labels = {"ours": "ours", "sdk": "Python SDK", "ts": "TypeScript SDK"}
    series = [Series(k, label, sorted(per[k])) for k, label in labels.items() if k in per]
    floors = [(sizes[int(c)] / 1024, v) for c, v in report.get("floor_ms", {}).items() if isinstance(v, (int, float))]
    if floors:
        series.append(Series("floor", "floor (one json.loads + escape)", sorted(floors), True))
    return chart(
        "Server CPU per call against answer size (HTTP)",
        "answer size, KiB (log scale)",
        "CPU per call, ms (log scale)",
        series,
        x_log=True,
        y_log=True,
        note=f"bench.sizes, median of rounds; {report.get('started', '')[:10]}",
    )


def shapes_chart(report: dict[str, Any]) -> str:
    """CPU per MB of gateway answer (in process, median of its calls) against the answer's size, one line per shape."""
    per: dict[str, list[tuple[float, float]]] = {}
    for row in report["rows"]:
        per.setdefault(row["shape"], []).append((row["gateway_bytes"] / 1e6, row["cpu_ms_per_mb"]))
    series = [Series(shape, shape, sorted(points)) for shape, points in per.items()]
    sizes = sorted({x for s in series for x, _ in s.points})
    series.append(Series("bar", "issue 50's bar", [(sizes[0], 25.0), (sizes[-1], 25.0)], True))
    return chart(
        "Server CPU per MB of gateway answer, by shape",
        "gateway answer, MB (log scale)",
        "CPU per MB, ms",
        series,
        x_log=True,
        x_ticks=sizes,
        note=f"bench.shapes, in process, median of calls; Python {report.get('python', '')}",
    )


def fairness_chart(report: dict[str, Any]) -> str:
    """The small calls' latency at each percentile, alone and beside the large answers, on a scale of nines."""
    series = []
    for key, label in (("alone", "2 KB calls alone"), ("beside", "beside 4 MB answers")):
        points = [(-math.log10(1 - float(p) / 100), ms) for p, ms in report[key].get("percentiles_ms", {}).items()]
        series.append(Series(key, label, points))
    return chart(
        "Small calls beside large answers, server on one core",
        "percentile: 0.3 = p50, 1 = p90, 2 = p99, 3 = p99.9",
        "latency, ms",
        series,
        x_log=False,
        note=f"bench.fairness; p99 {report['p99_ratio']}x alone, throughput {report['throughput_ratio']} of alone",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.charts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--crowd", default=str(CROWD_JSON))
    parser.add_argument("--sizes", default=str(SIZES_JSON))
    parser.add_argument("--shapes", default=str(SHAPES_JSON))
    parser.add_argument("--fairness", default=str(FAIRNESS_JSON))
    parser.add_argument("--out", default=str(IMAGES))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    crowd, sizes = Path(args.crowd), Path(args.sizes)
    charts: dict[str, str] = {}
    if crowd.is_file():
        charts.update(crowd_charts(json.loads(crowd.read_text(encoding="utf-8"))))
    if sizes.is_file():
        charts["sizes-cpu.svg"] = sizes_chart(json.loads(sizes.read_text(encoding="utf-8")))
    shapes, fairness = Path(args.shapes), Path(args.fairness)
    if shapes.is_file():
        charts["shapes-cpu.svg"] = shapes_chart(json.loads(shapes.read_text(encoding="utf-8")))
    if fairness.is_file():
        charts["fairness.svg"] = fairness_chart(json.loads(fairness.read_text(encoding="utf-8")))
    for name, svg in charts.items():
        (out / name).write_text(svg, encoding="utf-8")
        written.append(str(out / name))
    print("\n".join(written) or "nothing written: no results JSON")
    return 0 if written else 1


if __name__ == "__main__":
    raise SystemExit(main())
