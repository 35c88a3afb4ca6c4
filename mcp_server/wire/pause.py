"""Where long work over a large answer lets the rest of the process run.

The passes over a large answer call `pause()` between slices. It does nothing unless the thread
doing the work was given a pacer (`paced`) or a call to stop with (`stops_with`). A server's pacing
(transports/http/driver.py, `Pacing`) gives a pacer to the thread working on one of its large
answers beside its event loop: a thread that holds the interpreter lock takes about half the core
from the loop, whatever its budget says; paced, it sleeps between slices and keeps to its server's
share while small calls are answered. Work for a cancelled call stops at its next pause
(core/steps.py, `Compute`): nobody will read what it makes.

The pacer is the thread's, not an argument, so the passes that pause are the same code on a paced
thread and on any other. Clocks and sleeps are the pacer's, never this layer's: a thread without
one pays one attribute lookup per slice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mcp_server.wire.cancellation import Cancellation

_local = threading.local()


class Abandoned(BaseException):
    """Raised at a pause of work whose call was cancelled.

    A BaseException, as asyncio's CancelledError is: no `except Exception` around the work takes
    it for the work's own failure. `Compute.run` (core/steps.py) catches it.
    """


def pause() -> None:
    """A slice of long work ended: the thread's pacer, if any, may wait here."""
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


@contextmanager
def stops_with(cancellation: Cancellation) -> Iterator[None]:
    """Until the block ends, `pause()` here raises Abandoned once cancelled.

    Before and after this thread's pacer, if it has one: a pacer may sleep, and the call may be
    cancelled meanwhile.
    """
    outer: Callable[[], None] | None = getattr(_local, "pacer", None)

    def stop_or_pace() -> None:
        if cancellation.is_set:
            raise Abandoned
        if outer is not None:
            outer()
            if cancellation.is_set:
                raise Abandoned

    with paced(stop_or_pace):
        yield
