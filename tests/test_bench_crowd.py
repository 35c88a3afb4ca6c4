"""bench.crowd's bookkeeping: the worst run, the criteria's verdicts, the docs blocks and the charts.

No timing is asserted here (timings belong in bench/): these hold the harness to what it reports
from figures it is given, so that a collapsed run reads as a failure and a re-run rewrites only its
own part of a page.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bench import charts, crowd, runner


def run(rps: float, p99_ms: float = 250.0, cpu: float = 0.3, answered: int | None = None) -> dict[str, Any]:
    return {
        "rps": rps,
        "answered": int(rps * 10) if answered is None else answered,
        "p50_ms": 201.0,
        "p99_ms": p99_ms,
        "failed": 0,
        "timeouts": 0,
        "socket_errors": 0,
        "cpu_per_call_ms": cpu,
        "user_per_call_ms": cpu * 0.8,
        "ctx_per_call": 2.0,
        "peak_rss_mib": 40.0,
        "peak_pss_mib": 38.0,
    }


def test_the_worst_run_counts_figure_by_figure() -> None:
    found = crowd.worst([run(1000, p99_ms=300, cpu=0.30), run(900, p99_ms=250, cpu=0.35), run(950, p99_ms=400)])
    assert found["rps"] == 900
    assert found["p99_ms"] == 400
    assert found["cpu_per_call_ms"] == 0.35
    assert found["user_per_call_ms"] == pytest.approx(0.28)
    assert found["rps_runs"] == [1000, 900, 950]


def test_the_cpu_a_process_spends_in_its_own_code_is_counted_as_user_time() -> None:
    # The crowd reports the interpreter's part apart from the kernel's: Python arithmetic here
    # is user time, and the two parts add up to what cpu_ms reports.
    before = runner.cpu_split_ms(os.getpid())
    started = time.process_time()
    total = 0
    while time.process_time() - started < 0.3:
        total += sum(range(1000))
    spent_ms = (time.process_time() - started) * 1000
    user, system = runner.cpu_split_ms(os.getpid())
    assert total > 0
    assert user - before[0] >= spent_ms * 0.5 - 20  # clock ticks are 10 ms apart
    assert system - before[1] <= spent_ms * 0.5
    assert runner.cpu_ms(os.getpid()) >= user + system - 20


def test_a_run_that_answered_nothing_leaves_no_latency_to_pass_on() -> None:
    collapsed = run(0, p99_ms=math.nan, cpu=math.nan, answered=0)
    found = crowd.worst([run(1000), collapsed])
    assert found["rps"] == 0
    assert math.isnan(found["p99_ms"]) and math.isnan(found["cpu_per_call_ms"])


def cell(rps: float, p99_ms: float = 250.0, cpu: float = 0.3, ctx: float = 2.0) -> dict[str, Any]:
    return {"worst": {**crowd.worst([run(rps, p99_ms, cpu)]), "ctx_per_call": ctx}}


def results(ours: dict[int, dict[str, Any]], **others: dict[str, dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {"ours": {f"200/{size}": c for size, c in ours.items()}}
    found.update(others)
    return found


def verdicts(found: list[dict[str, Any]]) -> dict[str, str]:
    return {c["criterion"]: c["result"] for c in found}


SIZES = (64, 256, 1000, 4000)
RISE = "ours: CPU per call does not rise as the crowd grows (≤ 1.2× the cheapest smaller size)"


def flat() -> dict[str, Any]:
    """Ours near every ceiling up to its best, beside a floor a third its cost and a TS SDK a third its rate."""
    ours = {64: cell(310), 256: cell(1250), 1000: cell(4000, p99_ms=300), 4000: cell(4100, p99_ms=900)}
    ours_w2 = {"200/1000": cell(4800)}
    floor = {f"200/{s}": cell(1, cpu=0.1) for s in SIZES}
    ts = {"200/1000": cell(1000, p99_ms=2000)}
    found = results(ours, floor=floor, ts=ts)
    found["ours"]["1000/1000"] = cell(960, p99_ms=1100, ctx=3.0)
    found["ours-w2"] = ours_w2
    return found


def test_a_flat_server_passes_every_criterion() -> None:
    found = crowd.criteria(flat(), 20000, SIZES, 200.0)
    assert {c["result"] for c in found} == {"PASS"}, found


def test_a_collapse_at_one_size_fails_throughput_cost_and_the_ts_comparison() -> None:
    report = flat()
    report["ours"]["200/1000"] = cell(300, p99_ms=9000, cpu=2.0)
    found = verdicts(crowd.criteria(report, 20000, SIZES, 200.0))
    failed = {text for text, result in found.items() if result == "FAIL"}
    assert any(text.startswith("1000 connections: ours ≥ 90 %") for text in failed)
    assert "1000 connections: ours ≥ 2× the TypeScript SDK's req/s" in failed
    assert "1000 connections: ours p99 below the TypeScript SDK's" in failed
    assert RISE in failed
    assert "1000 connections: ours ≤ 4× the floor's CPU per call" in failed
    assert "1000 connections: --workers 2 answers more than one worker" not in failed
    assert found["64 connections: ours ≤ 4× the floor's CPU per call"] == "PASS"


def test_a_call_dearer_on_an_idle_server_passes_and_one_dearer_in_a_crowd_fails() -> None:
    assert crowd.worst_rise([0.66, 0.43, 0.35, 0.34]) == 1.0  # the idle machine's wake cost, not work
    assert crowd.worst_rise([0.40, 0.41, 0.39, 0.46]) == pytest.approx(0.46 / 0.39)
    report = flat()
    report["ours"]["200/64"] = cell(310, cpu=0.7)
    assert verdicts(crowd.criteria(report, 20000, SIZES, 200.0))[RISE] == "PASS"
    report["ours"]["200/4000"] = cell(4100, p99_ms=900, cpu=0.5)
    assert verdicts(crowd.criteria(report, 20000, SIZES, 200.0))[RISE] == "FAIL"


def test_a_size_that_answered_nothing_fails_rather_than_passing_on_zeros() -> None:
    report = flat()
    report["ours"]["1000/1000"] = {"worst": crowd.worst([run(0, p99_ms=math.nan, cpu=math.nan, answered=0)])}
    found = verdicts(crowd.criteria(report, 20000, SIZES, 200.0))
    assert found["1 s gateway, 1000 connections: ≥ 900 req/s (90 % of the ceiling)"] == "FAIL"
    assert found["1 s gateway, 1000 connections: p99 ≤ 1.3 s"] == "FAIL"
    assert found["1 s gateway, 1000 connections: context switches per call in single figures"] == "FAIL"


def test_the_warm_up_lasts_several_round_trips_of_a_slow_gateway() -> None:
    args = argparse.Namespace(warmup=3.0)
    assert crowd.warmup_s(args, 200.0) == 3.0
    assert crowd.warmup_s(args, 1000.0) == crowd.WARMUP_TRIPS * 1.0 > 3.0


def test_a_server_not_measured_is_not_applicable_not_passed() -> None:
    report = flat()
    del report["ts"]
    found = verdicts(crowd.criteria(report, 20000, SIZES, 200.0))
    assert found["1000 connections: ours ≥ 2× the TypeScript SDK's req/s"] == "n/a"


def test_a_double_slower_than_three_times_the_best_server_fails() -> None:
    found = verdicts(crowd.criteria(flat(), 10000, SIZES, 200.0))
    assert found["the double alone answers ≥ 3× the best server's rate"] == "FAIL"


def test_a_docs_block_is_rewritten_between_its_markers_only(tmp_path: Path) -> None:
    page = tmp_path / "page.txt"
    begin = "<!-- bench.crowd: begin (python -m bench.crowd --write-docs) -->"
    end = "<!-- bench.crowd: end -->"
    page.write_text(f"before\n\n{begin}\nold figures\n{end}\n\nafter\n", encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("no markers here\n", encoding="utf-8")
    crowd.replace_block([page, other], "bench.crowd", "new figures")
    crowd.replace_block([page], "bench.crowd", "newer figures")
    assert page.read_text(encoding="utf-8") == f"before\n\n{begin}\n\nnewer figures\n\n{end}\n\nafter\n"
    assert other.read_text(encoding="utf-8") == "no markers here\n"


def test_the_charts_are_svg_with_their_axes_legend_and_one_line_per_server() -> None:
    report = {
        "config": {"delay_ms": 200.0, "runs": 5},
        "started": "2026-12-02T01:00:00Z",
        "combos": [[200.0, s] for s in SIZES],
        "order": ["ours", "ts", "floor"],
        "labels": {"ours": "ours", "ts": "TypeScript SDK", "floor": "floor"},
        "results": {
            "ours": {f"200/{s}": cell(s * 4) for s in SIZES},
            "ts": {f"200/{s}": cell(s * 2, p99_ms=900) for s in SIZES},
            "floor": {f"200/{s}": cell(s * 4.5, p99_ms=220) for s in SIZES},
        },
    }
    drawn = charts.crowd_charts(report)
    assert set(drawn) == {"crowd-throughput.svg", "crowd-p99.svg"}
    ns = {"svg": "http://www.w3.org/2000/svg"}
    for name, svg in drawn.items():
        root = ET.fromstring(svg)
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert "connections (log scale)" in texts, name
        assert {"ours", "TypeScript SDK", "floor"} <= set(texts), name
        assert root.find("svg:rect", ns) is not None  # the white card under everything
        lines = root.findall("svg:polyline", ns)
        assert len(lines) == (4 if name == "crowd-throughput.svg" else 3)  # the ceiling too


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 4200.0), (0.0, 0.93), (0.0, 17.0)])
def test_linear_ticks_cover_the_range_in_round_steps(lo: float, hi: float) -> None:
    ticks = charts.nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
