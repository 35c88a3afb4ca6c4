"""The one event loop both transports serve on.

One loop per process serves stdio, or the MCP listener and the metrics listener. Every failure on
it has an owner (docs/architecture.md, "Who owns a failure"); what reaches the loop's exception
handler (`Guard`) nobody owned: a connection's callback costs that connection, anything else is a
logged bug, and the loop goes on serving. Only the vital parts (the accept path, the serving
coroutine with its drain, the selector) end the process, each by calling `Guard.fail`, so that
whatever supervises it replaces a process that cannot be trusted to accept.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import signal
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Final, Protocol, TypeVar

log = logging.getLogger("fairwins_mcp.http")

CLOSE_WAIT: Final = 2.0  # at the end, how long the connections' coroutines get to finish once cut off
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
T = TypeVar("T")


class Closable(Protocol):
    """What the end of the loop needs of a connection: transport, coroutine."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def task(self) -> asyncio.Task[None] | None: ...


def new_loop(selector: selectors.BaseSelector | None = None) -> asyncio.AbstractEventLoop:
    """A selector loop on every platform: epoll, kqueue, or select on Windows.

    The accept is ours: the loop tells us the listening socket is readable (add_reader), which
    Windows' default proactor loop does not offer (the price: select() stops at 512 sockets there,
    plenty for a member's local server). `selector`: a test's seam.
    """
    return asyncio.SelectorEventLoop(selector if selector is not None else selectors.DefaultSelector())


class Guard:
    """The loop's exception handler.

    A failure nobody owned costs its connection, or is a logged bug; `fail` ends it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fatal: BaseException | None = None
        self.strays = 0  # failures that reached the handler with no connection to charge: bugs, survived
        self._failed: asyncio.Future[None] = loop.create_future()
        loop.set_exception_handler(self._handle)

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", "unexpected error on the event loop"))
        transport = context.get("transport") or _transport_of(context)
        if transport is not None or context.get("protocol") is not None:
            # One connection's callback failed (its bytes, its end): that connection closes.
            log.error("a connection failed and was closed: %s", message, exc_info=exc)
            abort = getattr(transport, "abort", None)
            if callable(abort):
                try:
                    abort()
                except Exception:
                    log.debug("the failed connection could not be aborted", exc_info=True)
            return
        # A task's exception nobody retrieved, reported when the collector frees the task, must not
        # end the process with every call in flight. Whatever it was, it has already cost what it
        # could (its own work); the loop serves on, and the log says where the owner was missing.
        self.strays += 1
        log.error("a failure on the event loop had no owner (a bug; the server goes on): %s", message, exc_info=exc)

    def fail(self, exc: BaseException, why: str = "the event loop cannot go on") -> None:
        """The loop cannot go on: all waiting on `until` returns; exit non-zero."""
        if self.fatal is None:
            log.critical("%s: %s", why, exc, exc_info=exc)
            self.fatal = exc
        if not self._failed.done():
            self._failed.set_result(None)

    async def until(self, done: Awaitable[T]) -> T | None:
        """`done`'s result, or None when the loop failed first."""
        task: asyncio.Future[T] = asyncio.ensure_future(done)
        failed: asyncio.Future[Any] = self._failed
        try:
            await asyncio.wait([task, failed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
        return task.result() if task.done() and not task.cancelled() else None


def _transport_of(context: dict[str, Any]) -> asyncio.BaseTransport | None:
    """The transport in whose own step the failure was raised, if it was.

    asyncio reports a transport's scheduled steps (its socket's close() raising as it ends, say)
    with the handle alone, whose callback it may already have cleared; the callback's owner, or
    the innermost transport method the traceback crosses, says whose connection failed.
    """
    owner = getattr(getattr(context.get("handle"), "_callback", None), "__self__", None)
    if isinstance(owner, asyncio.BaseTransport):
        return owner
    exc = context.get("exception")
    tb = exc.__traceback__ if isinstance(exc, BaseException) else None
    found: asyncio.BaseTransport | None = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, asyncio.BaseTransport):
            found = candidate
        tb = tb.tb_next
    return found


def on_stop_signals(
    loop: asyncio.AbstractEventLoop, handler: Callable[[int], None], signals: Iterable[int] = STOP_SIGNALS
) -> Callable[[], None]:
    """Call `handler(signum)` on the loop for each signal; returns its undo.

    The Python handler queues `handler` with `call_soon_threadsafe`, which always lands. The C
    handler's byte goes to a socket of the stop signals' own (`signal.set_wakeup_fd`), which wakes
    the selector whichever thread the kernel chose. Never the loop's self-pipe, as asyncio's
    `add_signal_handler` does: a burst of `call_soon_threadsafe` (a crowd's calls cancelled
    together) fills it, and a signal whose byte is dropped there is never heard.
    """
    woken, wake = socket.socketpair()
    woken.setblocking(False)
    wake.setblocking(False)

    def heard(signum: int, frame: object) -> None:
        try:
            loop.call_soon_threadsafe(handler, signum)
        except RuntimeError:
            pass  # the loop has closed: nobody is left to stop

    def drain() -> None:
        try:
            while woken.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    loop.add_reader(woken.fileno(), drain)
    previous_fd = signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)
    previous = {signum: signal.signal(signum, heard) for signum in signals}

    def undo() -> None:
        for signum, before in previous.items():
            signal.signal(signum, before if before is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(previous_fd)
        if not loop.is_closed():
            loop.remove_reader(woken.fileno())
        woken.close()
        wake.close()

    return undo


def close(loop: asyncio.AbstractEventLoop, connections: Iterable[Closable]) -> None:
    """Cut off every open connection, let coroutines finish, close the loop."""
    if loop.is_closed():
        return
    from mcp_server.upstream import aio

    aio.close_pools(loop)  # the gateway connections this loop held
    for conn in list(connections):
        if conn.transport is not None:
            conn.transport.abort()
        if conn.task is not None:
            conn.task.cancel()
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        _finish(loop, asyncio.wait(pending, timeout=CLOSE_WAIT))
    _finish(loop, loop.shutdown_asyncgens())
    loop.close()


def _finish(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, Any]) -> None:
    """Run `work` to its end on `loop`; dropped if the loop cannot run (broke)."""
    try:
        loop.run_until_complete(work)
    except BaseException:
        work.close()
        log.debug("the loop could not finish its last work", exc_info=True)
