"""The dispatcher's steps (core/steps.py) on the event loop.

Both transports drive them here (core.steps.run drives the same generator on its caller's thread,
for the unit tests and `fairwins-mcp check`); each step is waited for without holding the loop: a
gateway call by the gateway client on this loop (upstream/aio.py), a Compute (reading, checking and
scrubbing a large answer) by one of a few threads, so the 2 KB calls beside a 4 MB answer are
served meanwhile. A call waiting on the gateway is a suspended generator, not a thread.

How large answers share the core with small calls is a `Pacing`, made by the server that serves
them and handed to every `drive`: no module state, but for the process's switch interval.
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

from mcp_server.core.steps import Alarm, Compute, Steps
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
# costs it little.
SWITCH_S: Final = 0.0002
# Seconds of a thread's CPU between two looks at the share: the longest a large answer's work runs
# at a stretch beside small calls (with the interpreter lock's hand-over, what the loop may wait).
PACE_SLICE: Final = 0.0005
# Seconds between two beats of the loop while a large answer is worked on: how often it says it
# ran, so a paced thread can tell a loop that is behind (share.LATE) from one that is idle.
BEAT: Final = 0.002


class _SwitchInterval:
    """The interpreter's switch interval, shortened while paced work runs.

    The one thing here that is the process's: every thread switches at it. Counted across the
    pacings of one process (the tests run several servers, each with its own loop), so the last
    to end puts back the interval it found.
    """

    __slots__ = ("_before", "_lock", "_working")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._working = 0
        self._before = sys.getswitchinterval()

    def begins(self, seconds: float | None) -> None:
        if seconds is None:
            return  # the process's interval left as it is
        with self._lock:
            if not self._working:
                self._before = sys.getswitchinterval()
            self._working += 1
            sys.setswitchinterval(min(sys.getswitchinterval(), seconds))

    def ends(self, seconds: float | None) -> None:
        if seconds is None:
            return
        with self._lock:
            self._working -= 1
            if not self._working:
                sys.setswitchinterval(self._before)


_SWITCH: Final = _SwitchInterval()


class Pacing:
    """How one server's large answers share the core with its small calls.

    Its executor (made on first use: a server that never sees a large answer starts no thread),
    the share its CPU is counted against, the pacers' slice (`every`) and the loop's beat, and the
    switch interval while a large answer is at work (`switch`; None leaves the process's as it is).
    """

    __slots__ = ("_executor", "_lock", "beat", "every", "share", "switch", "threads")

    def __init__(
        self,
        share: Share | None = None,
        *,
        threads: int = COMPUTE_THREADS,
        switch: float | None = SWITCH_S,
        every: float = PACE_SLICE,
        beat: float = BEAT,
    ) -> None:
        self.share = Share() if share is None else share
        self.threads, self.switch, self.every, self.beat = threads, switch, every, beat
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()  # the executor is asked for by each loop that drives with it

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The executor for Compute steps, made on first use."""
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self.threads, thread_name_prefix="fairwins-mcp-compute"
                )
            return self._executor

    def close(self) -> None:
        """Let the executor go: its threads end once the work queued is done."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


class Run:
    """What a drive saw."""

    __slots__ = ("heavy",)

    def __init__(self) -> None:
        self.heavy = False  # a Compute step ran: the answer is large, encode it off the loop too


class Pacer:
    """A large answer's thread at each `wire.pause.pause()`.

    Once `every` seconds of its CPU went by, that CPU is counted against the share, and the thread
    sleeps while the share is spent.

    The share's wait before a Compute starts is not enough on its own: a thread that holds the
    interpreter lock takes about half the core from the loop for as long as it runs.

    `sleep(seconds)` may end early: a true return ends the wait (`Cancellation.wait`, its call
    cancelled: the work is about to stop, and sleeps off no debt first).
    """

    __slots__ = ("clock", "counted", "cpu", "every", "mark", "share", "sleep")

    def __init__(
        self,
        share: Share,
        clock: Callable[[], float],
        cpu: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], bool | None] = time.sleep,
        every: float = PACE_SLICE,
    ) -> None:
        self.share, self.clock, self.cpu, self.sleep, self.every = share, clock, cpu, sleep, every
        self.mark = cpu()
        self.counted = 0.0  # the CPU already counted against the share

    def __call__(self) -> None:
        spent = self.cpu() - self.mark
        if spent < self.every:
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
    """The loop telling the share it ran, every `interval` while work is paced."""

    __slots__ = ("handle", "interval", "loop", "share")

    def __init__(self, loop: asyncio.AbstractEventLoop, share: Share, interval: float = BEAT) -> None:
        self.loop, self.share, self.interval = loop, share, interval
        share.loop_ran(loop.time())
        self.handle = loop.call_later(interval, self.beat)

    def beat(self) -> None:
        self.share.loop_ran(self.loop.time())
        self.handle = self.loop.call_later(self.interval, self.beat)

    def stop(self) -> None:
        self.handle.cancel()


async def off_loop(work: Callable[[], R], pacing: Pacing, cancellation: Cancellation | None = None) -> R:
    """`work()` in the pacing's executor, with the caller's context.

    The context holds the credentials the log filter looks for. Its CPU is counted against the
    large answers' share of the core (share.py), a slice at a time as it goes (Pacer), whose sleeps
    end early once `cancellation` is thrown. Meanwhile the loop beats, so the paced thread can tell
    it is behind.
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    share = pacing.share
    cpu = [0.0]
    sleep = time.sleep if cancellation is None else cancellation.wait

    def timed() -> R:
        start = time.thread_time()
        # loop.time is the monotonic clock: safe from any thread
        pacer = Pacer(share, loop.time, sleep=sleep, every=pacing.every)
        try:
            with paced(pacer):
                return context.run(work)
        finally:
            cpu[0] = time.thread_time() - start - pacer.counted

    beat = Beat(loop, share, pacing.beat)
    _SWITCH.begins(pacing.switch)
    try:
        return await loop.run_in_executor(pacing.executor(), timed)
    finally:
        beat.stop()
        _SWITCH.ends(pacing.switch)
        share.spent(cpu[0], loop.time())


async def compute(step: Compute[R], pacing: Pacing) -> R:
    """A Compute step's result, worked in the executor once the share allows.

    Its call's cancellation ends the wait for the share (the work never starts) and the work at
    its next slice, queued or running (`Compute.run`): either way the step gives its stand-in.
    """
    loop = asyncio.get_running_loop()
    share = pacing.share
    while True:
        now = loop.time()
        share.loop_ran(now)  # the loop asks: it is not behind
        delay = share.wait(now)
        if delay <= 0:
            break
        if await aio.pause(delay, step.cancellation):  # small calls contend, and the share is spent
            return step.if_cancelled
    return await off_loop(step.run, pacing, step.cancellation)


async def drive(steps: Steps[T], pacing: Pacing, run: Run | None = None) -> T:
    """Run `steps` to their end on the running loop, large answers paced.

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
                pacing.share.small_answered(time.monotonic())
            result: T = done.value
            return result
        failure = None
        try:
            if isinstance(step, GatewayCall):
                value = await step.arun()
            elif isinstance(step, Compute):
                heavy = True
                value = await compute(step, pacing)
                if run is not None:
                    run.heavy = True
            elif isinstance(step, Alarm):
                value = asyncio.get_running_loop().call_at(step.when, step.action)
            else:
                raise TypeError(f"no way to wait for {type(step).__name__} on the event loop")
        except Exception as exc:
            failure = exc
