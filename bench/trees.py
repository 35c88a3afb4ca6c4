"""Two checkouts' stdio servers side by side: cold start and CPU per call, taking turns.

    python3 -m bench.trees BEFORE AFTER [--cold 12] [--calls 3000] [--rounds 10]

BEFORE and AFTER are source trees (`git archive REV | tar -x -C DIR`); each server runs with its
tree on PYTHONPATH and this interpreter, against the stub gateway (0 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from bench.cold_start import measure_cold_starts
from bench.runner import Deadline, StubProcess, child_env
from bench.stdio import measure_stdio
from bench.stub_gateway import BENCH_TOKEN


def main(argv: Sequence[str] | None = None) -> int:
    """Print each tree's cold start and CPU per call, and after's over before's."""
    parser = argparse.ArgumentParser(prog="python3 -m bench.trees")
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--cold", type=int, default=12, help="cold starts of each")
    parser.add_argument("--calls", type=int, default=3000, help="calls a round")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of calls, alternating")
    args = parser.parse_args(argv)
    deadline = Deadline(3600)
    stub = StubProcess(0.0, deadline)
    try:
        env = child_env(stub.url, BENCH_TOKEN)
        servers: list[tuple[str, list[str], dict[str, Any]]] = [
            (label, ["env", f"PYTHONPATH={root}", sys.executable, "-m", "mcp_server"], {})
            for label, root in (("before", args.before), ("after", args.after))
        ]
        errors: list[str] = []
        measure_cold_starts(servers, env, args.cold, deadline, errors)
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            for label, cmd, _ in servers:
                cpu[label].append(measure_stdio(label, cmd, env, args.calls, 100, deadline)["cpu_per_call_ms"])
    finally:
        stub.close()
    cold = {label: out["cold_first_result_ms"] for label, _, out in servers}
    for label in ("before", "after"):
        runs = cpu[label]
        print(
            f"{label}: first result {cold[label]:.1f} ms (median of {args.cold}); CPU per call "
            f"{statistics.median(runs):.3f} ms median ({min(runs):.3f}-{max(runs):.3f})"
        )
    print(
        f"after / before: cold start {cold['after'] / cold['before']:.2f}, CPU per call "
        f"{statistics.median(cpu['after']) / statistics.median(cpu['before']):.2f}"
    )
    if errors:
        print("errors:", *errors, sep="\n  ")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
