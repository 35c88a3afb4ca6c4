"""The dispatcher's steps (core/steps.py) on the event loop: gateway calls awaited there, CPU work in a small executor.

`Dispatcher.handle` drives the same generator on its caller's thread; here each step is waited
for without holding the loop: a gateway call by the async client on this loop (upstream/aio.py),
a Compute (reading, checking and scrubbing a large answer) by one of a few threads, so the 2 KB
calls beside a 4 MB answer are served meanwhile. A call waiting on the gateway is a suspended
generator, not a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from mcp_server.core.steps import Compute, Steps
from mcp_server.transports.http.share import Share
from mcp_server.upstream import aio
from mcp_server.upstream.gateway import GatewayCall

T = TypeVar("T")
R = TypeVar("R")
# CPU work is held by the interpreter lock whatever the thread count: two threads keep one large
# answer from queueing behind another, and the loop takes its turn between their slices.
COMPUTE_THREADS: Final = 2
SWITCH_S: Final = 0.001  # the interpreter lock's switch interval once the executor exists

_executor: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """The executor for Compute steps, made on first use (a server that never sees a large answer has none)."""
    global _executor
    with _lock:
        if _executor is None:
            # The loop waits for the interpreter lock whenever it wakes while a large answer is
            # worked on: CPython hands the lock over after SWITCH_S (5 ms by default), a wait each
            # small call met at every wake. The work is Python and C slices, so handing over
            # sooner costs it little.
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_S))
            _executor = concurrent.futures.ThreadPoolExecutor(
                COMPUTE_THREADS, thread_name_prefix="fairwins-mcp-compute"
            )
        return _executor


class Run:
    """What a drive saw: `heavy` once a Compute step ran (its answer is large: encode it off the loop too)."""

    __slots__ = ("heavy",)

    def __init__(self) -> None:
        self.heavy = False


# The executor's CPU, counted against the share large answers may take of the core (share.py).
SHARE: Final = Share()


async def off_loop(work: Callable[[], R]) -> R:
    """`work()` in the executor, with the caller's context (the log filter finds its credentials there).

    Its CPU is counted against the large answers' share of the core (share.py)."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    cpu = [0.0]

    def timed() -> R:
        start = time.thread_time()
        try:
            return context.run(work)
        finally:
            cpu[0] = time.thread_time() - start

    try:
        return await loop.run_in_executor(executor(), timed)
    finally:
        SHARE.spent(cpu[0], loop.time())


async def drive(steps: Steps[T], run: Run | None = None) -> T:
    """Run `steps` to their end on the running loop; the generator's return value.

    A step that raises raises inside the generator, as with `core.steps.run`; a cancelled drive
    (the client left) is not an error the handler words: it ends the drive where it waits.
    """
    value: Any = None
    failure: Exception | None = None
    heavy = False
    while True:
        try:
            step = steps.send(value) if failure is None else steps.throw(failure)
        except StopIteration as done:
            if not heavy:  # a small call answered: large ones keep to their share meanwhile
                SHARE.small_answered(asyncio.get_running_loop().time())
            result: T = done.value
            return result
        failure = None
        try:
            if isinstance(step, GatewayCall):
                value = await aio.run(step)
            elif isinstance(step, Compute):
                heavy = True
                loop = asyncio.get_running_loop()
                delay = SHARE.wait(loop.time())
                if delay > 0:
                    await asyncio.sleep(delay)  # small calls are being answered: the share is spent
                # The request's context goes with the work (the log filter finds its credentials there).
                value = await off_loop(step.work)
                if run is not None:
                    run.heavy = True
            else:
                raise TypeError(f"no way to wait for {type(step).__name__} on the event loop")
        except Exception as exc:
            failure = exc
