"""What a request waits for, as values: the steps a handler yields.

Sans-I/O dispatch. The path from a message to the gateway (protocol.BLOCKING_METHODS, and batches
of them) is a generator: it yields a `Step` (a gateway call, CPU work that may take milliseconds,
or an alarm to set) and is sent what the step gave. One definition of every step, driven two ways:
both transports drive the generator on their event loop (transports/http/driver.drive), so a call
waiting on the gateway holds a suspended generator, not a thread; `run` here waits for each step in
turn on the caller's thread, for Dispatcher.handle (the unit tests, and the messages stdio answers
as it reads them, which wait on nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.pause import Abandoned, stops_with

T = TypeVar("T")
R = TypeVar("R")


class Step(Protocol):
    """One thing a request waits for; `run` waits for it on this thread."""

    def run(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class Compute(Generic[R]):
    """CPU work that may take milliseconds, done off the event loop.

    Reading, checking and scrubbing a large answer, in a small executor while the loop serves on.
    The work is for one call. Once that call's `cancellation` is thrown, the work does not start,
    or stops at its next pause (wire/pause.py), and the step gives `if_cancelled` instead: a
    stand-in nobody reads, since no transport sends a cancelled call's answer (the HTTP one
    answers 499, a batch drops or replaces it, stdio writes nothing).
    """

    work: Callable[[], R]
    cancellation: Cancellation
    if_cancelled: R

    def run(self) -> R:
        """The work, on this thread; `if_cancelled` once its call is cancelled."""
        if self.cancellation.is_set:
            return self.if_cancelled
        try:
            with stops_with(self.cancellation):
                return self.work()
        except Abandoned:
            return self.if_cancelled


class Cancellable(Protocol):
    """What an alarm's step gives back: a way to call it off."""

    def cancel(self) -> None: ...


class _Unset:
    """The handle of an alarm no driver can fire."""

    def cancel(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Alarm:
    """An action to run at a monotonic time, unless called off first.

    Yielding one waits for nothing: the step gives back its handle at once. On an event loop the
    loop's own timer holds it (the one deadline mechanism: no timer thread). Driven on a thread
    (`run`), nothing can interrupt the step that thread is waiting on, so the alarm never fires
    there: whoever sets one also compares the clock with `when` between its steps.
    """

    when: float  # on time.monotonic()'s clock, which is asyncio's loop.time()
    action: Callable[[], None]

    def run(self) -> Cancellable:
        return _Unset()


Steps = Generator[Step, Any, T]


def run(steps: Steps[T]) -> T:
    """Drive `steps` on this thread, each step waited for in turn.

    A step that raises raises inside the generator, at its `yield`, as a call made there would:
    the handler's own `except` (a paid call's words about its payment above all) sees it first.
    """
    try:
        step = next(steps)
        while True:
            try:
                value = step.run()
            except Exception as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(value)
    except StopIteration as done:
        result: T = done.value
        return result


def done(value: T) -> Steps[T]:
    """A value as steps that wait for nothing: a handler that never waits."""
    return value
    yield  # a generator: unreachable, by design
