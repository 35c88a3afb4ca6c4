"""The benchmark: cold start, memory, stdio latency, HTTP throughput and CPU per call, against a stub.

The code moved to bench.runner, which the next commit splits into one module per benchmark.
"""

from bench.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
