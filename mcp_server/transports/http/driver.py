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
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.pause import paced

T = TypeVar("T")
R = TypeVar("R")
# CPU work is held by the interpreter lock whatever the thread count: two threads keep one large
# answer from queueing behind another, and the loop takes its turn between their slices.
COMPUTE_THREADS: Final = 2
# The interpreter lock's switch interval while a large answer is worked on. The loop gives the
# lock up at each system call it makes (a read, a send, the selector) and the working thread takes
# it; the loop then waits the switch interval to have it back (5 ms by default), at every one of a
# small call's half-dozen system calls. The work is Python and C slices, so handing over sooner
# costs it little (bench.fairness: the small calls' p99 beside 4 MB answers 2.2× alone at 1 ms,
# 2.0× at 0.2 ms).
SWITCH_S: Final = 0.0002

_executor: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()
_working = 0  # large answers being worked on
_switch_before = sys.getswitchinterval()


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """The executor for Compute steps, made on first use (a server that never sees a large answer has none)."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                COMPUTE_THREADS, thread_name_prefix="fairwins-mcp-compute"
            )
        return _executor


def _work_begins() -> None:
    """The short switch interval, from the first large answer at work until the last one ends: the
    process's other threads (the log writer) switch at the default the rest of the time."""
    global _working, _switch_before
    with _lock:  # one process may run more than one loop (the tests do)
        if not _working:
            _switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_before, SWITCH_S))
        _working += 1


def _work_ends() -> None:
    global _working
    with _lock:
        _working -= 1
        if not _working:
            sys.setswitchinterval(_switch_before)


class Run:
    """What a drive saw: `heavy` once a Compute step ran (its answer is large: encode it off the loop too)."""

    __slots__ = ("heavy",)

    def __init__(self) -> None:
        self.heavy = False


# The executor's CPU, counted against the share large answers may take of the core (share.py).
SHARE: Final = Share()
# Seconds of a thread's CPU between two looks at the share: the longest a large answer's work runs
# at a stretch beside small calls (with the interpreter lock's hand-over, what the loop may wait).
PACE_SLICE: Final = 0.0005
# Seconds between two beats of the loop while a large answer is worked on: how often it says it
# ran, so a paced thread can tell a loop that is behind (share.LATE) from one that is idle.
BEAT: Final = 0.002


class Pacer:
    """A large answer's thread at each `wire.pause.pause()`: once PACE_SLICE of its CPU went by, that
    CPU is counted against the share, and the thread sleeps while the share is spent.

    The share's wait before a Compute starts is not enough on its own: a thread that holds the
    interpreter lock takes about half the core from the loop for as long as it runs, so one large
    answer once started held the small calls beside it to half speed for its whole length
    (bench.fairness: their p99 3× alone). Paced, it runs PACE_SLICE at a time.

    `sleep(seconds)` may end early: a true return ends the wait (`Cancellation.wait`, its call
    cancelled: the work is about to stop, and sleeps off no debt first).
    """

    __slots__ = ("clock", "counted", "cpu", "mark", "share", "sleep")

    def __init__(
        self,
        share: Share,
        clock: Callable[[], float],
        cpu: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], bool | None] = time.sleep,
    ) -> None:
        self.share, self.clock, self.cpu, self.sleep = share, clock, cpu, sleep
        self.mark = cpu()
        self.counted = 0.0  # the CPU already counted against the share

    def __call__(self) -> None:
        spent = self.cpu() - self.mark
        if spent < PACE_SLICE:
            return
        now = self.clock()
        self.share.spent(spent, now)
        self.counted += spent
        # Each wait ends where contention may have ended (share.py), and is asked again then.
        while (wait := self.share.wait(now)) > 0:
            if self.sleep(wait):
                break
            now = self.clock()
        self.mark = self.cpu()


class Beat:
    """The loop's beat while a large answer is worked on: every BEAT, it tells the share it ran."""

    __slots__ = ("handle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        SHARE.loop_ran(loop.time())
        self.handle = loop.call_later(BEAT, self.beat)

    def beat(self) -> None:
        SHARE.loop_ran(self.loop.time())
        self.handle = self.loop.call_later(BEAT, self.beat)

    def stop(self) -> None:
        self.handle.cancel()


async def off_loop(work: Callable[[], R], cancellation: Cancellation | None = None) -> R:
    """`work()` in the executor, with the caller's context (the log filter finds its credentials there).

    Its CPU is counted against the large answers' share of the core (share.py), a slice at a time
    as it goes (Pacer), whose sleeps end early once `cancellation` is thrown. Meanwhile the loop
    beats, so the paced thread can tell it is behind."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    cpu = [0.0]
    sleep = time.sleep if cancellation is None else cancellation.wait

    def timed() -> R:
        start = time.thread_time()
        pacer = Pacer(SHARE, loop.time, sleep=sleep)  # loop.time is the monotonic clock: safe from any thread
        try:
            with paced(pacer):
                return context.run(work)
        finally:
            cpu[0] = time.thread_time() - start - pacer.counted

    beat = Beat(loop)
    _work_begins()
    try:
        return await loop.run_in_executor(executor(), timed)
    finally:
        beat.stop()
        _work_ends()
        SHARE.spent(cpu[0], loop.time())


async def compute(step: Compute[R]) -> R:
    """A Compute step's result: its work in the executor once the share lets it start.

    Its call's cancellation ends the wait for the share (the work never starts) and the work at
    its next slice, queued or running (`Compute.run`): either way the step gives its stand-in.
    """
    loop = asyncio.get_running_loop()
    while True:
        now = loop.time()
        SHARE.loop_ran(now)  # the loop asks: it is not behind
        delay = SHARE.wait(now)
        if delay <= 0:
            break
        if await aio.pause(delay, step.cancellation):  # small calls contend, and the share is spent
            return step.if_cancelled
    # The request's context goes with the work (the log filter finds its credentials there).
    return await off_loop(step.run, step.cancellation)


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
                # time.monotonic() is loop.time() (asyncio's clock), without asking for the loop:
                # on Python 3.11 that asks the kernel for the process id each time.
                SHARE.small_answered(time.monotonic())
            result: T = done.value
            return result
        failure = None
        try:
            if isinstance(step, GatewayCall):
                value = await step.arun()
            elif isinstance(step, Compute):
                heavy = True
                value = await compute(step)
                if run is not None:
                    run.heavy = True
            else:
                raise TypeError(f"no way to wait for {type(step).__name__} on the event loop")
        except Exception as exc:
            failure = exc
