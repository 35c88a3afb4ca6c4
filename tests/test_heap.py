"""ops/heap.settle: what a serving process does to the cyclic collector (in a child process: it is process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys

from mcp_server.ops import heap

PROBE = """
import gc, json, weakref
gc.disable()  # nothing collects the cycle below before settle() does
from mcp_server.ops import heap

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle only the collector frees
freed = []
weakref.finalize(a, freed.append, True)
del a, b
gc.enable()
before = gc.get_threshold()
heap.settle()
young = len(gc.get_objects(generation=0))
# After settle, with no explicit collect: a cycle made now, then more than a young generation's
# worth of objects kept alive, is freed by the collector on its own (settle widens it, never stops it).
c, d = Node(), Node()
c.other, d.other = d, c
later = []
weakref.finalize(c, later.append, True)
del c, d
kept = [[] for _ in range(heap.YOUNG + 1000)]
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "freed": freed, "young": young, "later": later, "enabled": gc.isenabled()}))
"""


def test_settle_collects_start_up_garbage_freezes_the_rest_and_widens_the_young_generation() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    assert found["freed"] == [True], "start-up's cycles must be collected, not frozen for good"
    assert found["frozen"] > 1000, "the modules and everything start-up built are set aside"
    assert found["young"] < 100, "nothing left for the young generation to walk"
    assert tuple(found["before"]) != (heap.YOUNG, heap.MIDDLE, heap.OLD)
    assert tuple(found["after"]) == (heap.YOUNG, heap.MIDDLE, heap.OLD)
    assert found["enabled"] and found["later"] == [True], "cycles made while serving are still collected unasked"
