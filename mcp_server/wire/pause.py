"""Where long work over a large answer lets the rest of the process run: `pause()` between two slices of it.

The passes over a large answer (the reader's chunks, the escapes of the text block, the depth
check, the slices of an encode) call `pause()` between slices. It does nothing unless the thread
doing the work was given a pacer (`paced`). The HTTP transport gives one to the threads that work
on large answers beside its event loop (transports/http/driver.py): there a thread that holds the
interpreter lock takes about half the core from the loop, whatever its budget says, for as long as
it runs; paced, it sleeps between slices and keeps to its share while small calls are answered.

Clocks and sleeps are the pacer's, never this layer's: a thread without one pays one attribute
lookup per slice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


def pause() -> None:
    """A slice of long work ended: this thread's pacer, if it has one, may make it wait."""
    pacer: Callable[[], None] | None = getattr(_local, "pacer", None)
    if pacer is not None:
        pacer()


@contextmanager
def paced(pacer: Callable[[], None]) -> Iterator[None]:
    """`pacer` is called at each `pause()` on this thread until the block ends."""
    outer = getattr(_local, "pacer", None)
    _local.pacer = pacer
    try:
        yield
    finally:
        _local.pacer = outer
