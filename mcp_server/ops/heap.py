"""The cyclic garbage collector's settings for a serving process.

Its start-up heap is set aside and its young generation made larger. Every call a crowd has in
flight holds its frames, futures and records while the gateway answers, and every idle keep-alive
connection holds its reader and transport. With CPython's defaults (700, 10, 10) a young collection
runs every 700 allocations, so everything that waits (every call does) is promoted to the oldest
generation within milliseconds. Full collections then run every 100 young ones and walk all of it:
what a full collection walks grows with the connections, how often it runs grows with the calls, so
the cost of a call grows with the crowd (bench.crowd, BENCHMARKS.md).

Two settings make it flat:
- `gc.freeze()` once start-up is done: the modules, the tool table and its schemas (some 80,000
  objects) move to a generation no collection walks. They live as long as the process anyway.
- A young generation of YOUNG allocations instead of 700. CPython counts it net: an allocation
  adds one, any deallocation takes one off. A call's own temporaries are freed by reference
  counting, so a steady load hardly moves the count; what moves it is a burst, whose calls all
  wait on the gateway at once, and a young collection walks every object allocated since the last
  one that is still alive, so a crowd's waiting calls. At 200,000 a call at 4,000 connections
  costs what it does at 1,000 (BENCHMARKS.md has the thresholds measured). The older generations
  keep CPython's ratios. Cyclic garbage (a connection that closed with a call in flight leaves
  some) still goes at the next collection of its generation: what can wait for one is at most
  YOUNG objects, some tens of MB at worst, never all of a process's garbage.

The process-wide collector is the process's to set: the command line calls `settle()` for a serving
process, never the server code, which tests run inside their own process.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG: Final = 200_000  # net allocations between young collections (CPython: 700)
MIDDLE: Final = 10  # young collections between middle ones (CPython's ratio, kept)
OLD: Final = 10  # middle collections between considering a full one (CPython's, kept)


def settle() -> None:
    """After start-up: collect its garbage, freeze the rest, set thresholds."""
    gc.collect()  # start-up's own cycles go now; frozen, they would stay for good
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
