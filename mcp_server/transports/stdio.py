"""stdio transport: one JSON-RPC message per line, on the event loop.

"The server MUST NOT write anything to its stdout that is not a valid MCP message." The real
stdout is claimed at start and fd 1 is pointed at stderr, so a stray print() anywhere, even in C
code, lands on stderr instead of corrupting the wire.

HTTP's loop serves it (transports/http/loop.py), with HTTP's driver for each request (a call
waiting on the gateway is a suspended generator, not a thread), HTTP's road for the stop
signals, and an HTTP answer's flow control and deadline (`_Wire`). stdin and stdout are each
watched by the loop where it can (a pipe, a socket), else served by one thread of their own
(Windows, a regular file, an in-memory object).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import select
import signal
import socket
import stat
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import suppress
from dataclasses import replace
from itertools import chain
from typing import Any, BinaryIO, Final, NamedTuple

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Reply, Session
from mcp_server.core.steps import Steps
from mcp_server.ops import logs, records, signals
from mcp_server.transports.http import loop as loops
from mcp_server.transports.http.driver import Pacing, Run, drive, off_loop
from mcp_server.transports.http.flow import STREAM_BACKLOG, WRITE_HIGH, WRITE_LOW, WRITE_SLICE
from mcp_server.wire import lines
from mcp_server.wire.cancellation import Cancellation
from mcp_server.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Batch,
    Encoded,
    Id,
    Invalid,
    JSONObject,
    Notification,
    Part,
    Request,
    dumps,
    encode,
    error_object,
    error_response,
    parse,
    pieces,
)
from mcp_server.wire.lines import LineFramer, Oversized

log = logging.getLogger("fairwins_mcp.stdio")

MAX_LINE: Final = lines.MAX_LINE
CHUNK: Final = 64 * 1024  # what one read takes: a pipe's default capacity
# One deadline for a whole answer, as an HTTP connection's (its read timeout, by default): a
# client that has not taken an answer this long after its first byte was queued is not reading.
WRITE_TIMEOUT: Final = 30.0
# Requests read and not yet answered: past this, stdin is not read until some are (a client
# cannot fill memory with requests it sends faster than they are served).
MAX_UNANSWERED: Final = 256
# Bytes written to stdout in one turn of the loop at most: a multi-megabyte answer to a client
# reading fast is written in turns, with the loop's other work between them.
TURN_BYTES: Final = 1024 * 1024
# Exit code once the client stopped reading its answers past the deadline: the wire is broken.
EXIT_WIRE_BROKEN: Final = 1


def claim_stdout() -> BinaryIO:
    """The real stdout, kept private: fd 1 and sys.stdout are stderr now."""
    sys.stdout.flush()
    fd = os.dup(1)
    _widen_pipe(fd)
    if sys.platform == "win32":
        import msvcrt

        # Bytes as written: the C runtime must not turn a line's "\n" into "\r\n" on this handle.
        msvcrt.setmode(fd, os.O_BINARY)
    wire = os.fdopen(fd, "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return wire


def _widen_pipe(fd: int) -> None:
    """Let stdout's pipe hold 1 MiB, Linux's limit for an unprivileged process.

    A pipe holds 64 KiB by default: an answer of megabytes would be written in as many waits for
    the client to read. macOS and Windows have no such setting.
    """
    if sys.platform == "linux":
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError as exc:  # not a pipe (a file, a terminal), or over /proc/sys/fs/pipe-max-size
            log.debug("the stdout pipe keeps its size (%s)", exc)


def _encoded(message: JSONObject | Encoded) -> Sequence[Part] | None:
    """A message's line as pieces (jsonrpc.encode), or None: nothing to send.

    A value JSON cannot carry must not leave a request unanswered, nor stop the server: a response
    becomes -32603, anything else is dropped. (A batch's answers arrive encoded, each item already
    checked: batches.py.)
    """
    try:
        return encode(message)
    except (ValueError, TypeError):
        log.exception("a message could not be encoded as JSON")
        if isinstance(message, Encoded) or "method" in message or "id" not in message:
            return None
        return [dumps(error_response(message["id"], error_object(INTERNAL_ERROR, "Internal error")))]


# ---- stdout ---------------------------------------------------------------------------------------


class _Line:
    """One line waiting to be written: its slices, made as the wire takes them."""

    __slots__ = ("size", "slices")

    def __init__(self, parts: Sequence[Part]) -> None:
        self.size = sum(len(part) for part in parts) + 1  # a str part is ASCII: one byte a character
        self.slices = _slices(parts)


class _Terms(NamedTuple):
    """What both ways of writing stdout answer to: loop, deadline, server."""

    loop: asyncio.AbstractEventLoop
    timeout: float  # seconds a line may take from its first byte
    on_late: Callable[[], None]  # the client missed the deadline: stop serving
    on_room: Callable[[], None]  # the reading side may go on


class _Wire:
    """stdout's queued lines, under an HTTP answer's flow control and deadline.

    As an HTTP connection writes (connection.py): at most WRITE_HIGH bytes wait before an answer
    waits for room (`room`), a large answer goes WRITE_SLICE at a time as the client takes it, and
    each line must be taken within `timeout` of its first byte (one deadline for the line). A
    client that misses it is not reading: the wire is given up (`late`), even mid-line, since the
    line's end could only come after bytes the client is not taking, and the server stops serving
    (`on_late`). A client that closed its end (EPIPE) is gone: the rest is dropped quietly and
    serving goes on to the end of input. The deadline is the loop's timer on both roads; how a
    slice is written is the subclass's `_pump`.
    """

    def __init__(self, terms: _Terms) -> None:
        self.loop, self.timeout, self.on_late, self.on_room = terms
        self.waiting = 0  # bytes queued and not yet written
        self.late = False
        self._gone = False
        self._busy = False  # a write is under way: its end calls _pump
        self._lines: deque[_Line] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_line: _Line | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._held = False  # the reading side holds back for room

    def put(self, parts: Sequence[Part], limit: int | None = None) -> None:
        """Queue one line; with `limit`, dropped once that many bytes wait."""
        if self._gone or self.late:
            return
        if limit is not None and self.waiting >= limit:
            log.debug("a notification was dropped: the client is not reading stdout")
            return
        line = _Line(parts)
        self._lines.append(line)
        self.waiting += line.size
        if not self._busy:
            self._pump()

    def full(self) -> bool:
        """Whether WRITE_HIGH bytes wait: the reader holds back until `on_room`."""
        if self.waiting >= WRITE_HIGH and not (self._gone or self.late):
            self._held = True
            return True
        return False

    async def room(self) -> None:
        """Wait until fewer than WRITE_HIGH bytes wait, or the wire is given up."""
        while self.waiting >= WRITE_HIGH and not (self._gone or self.late):
            await self._wait()

    async def drained(self) -> None:
        """Wait until every byte queued is written, or the wire is given up."""
        while self.waiting and not (self._gone or self.late):
            await self._wait()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _pump(self) -> None:
        raise NotImplementedError

    def _wait(self) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = self.loop.create_future()
        self._waiters.append(waiter)
        return waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _settle(self) -> None:
        """After a write: the deadline moves to the head line; room wakes waiters."""
        if not self._lines:
            self.waiting = 0
        self._arm()
        if self.waiting < WRITE_LOW or not self._lines:
            self._wake()
            if self._held:
                self._held = False
                self.on_room()  # the lines read and held back are answered on

    def _arm(self) -> None:
        """The head line's deadline, from its first byte: one timer a line."""
        head = self._lines[0] if self._lines else None
        if head is self._timer_line:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_line = head
        self._timer = None if head is None else self.loop.call_later(self.timeout, self._expired)

    def _expired(self) -> None:
        self._timer = None
        if self._lines and self._lines[0] is self._timer_line:
            log.warning(
                "the client did not read its answers within %g s: stdout is given up (a line may be left "
                "half written) and the server stops serving",
                self.timeout,
            )
            self.late = True
            self._give_up()
            self.on_late()

    def _lost(self, exc: OSError | ValueError) -> None:
        log.debug("stdout is closed (%s): what is left is dropped, serving goes on to EOF", exc)
        self._gone = True
        self._give_up()

    def _give_up(self) -> None:
        self._lines.clear()
        self.waiting = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()
        if self._held and self._gone:
            self._held = False
            self.on_room()  # what was read is answered into nothing, as over a wire that failed


class _LoopWire(_Wire):
    """stdout the loop watches (a pipe, a socket), written when writable."""

    def __init__(
        self, terms: _Terms, fd: int, write: Callable[[memoryview | bytes], int], release: Callable[[], None]
    ) -> None:
        super().__init__(terms)
        self.fd, self._write, self._release = fd, write, release
        self._chunk: memoryview | bytes | None = None  # what the last write left of its slice

    def close(self) -> None:
        self._unwatch()
        super().close()
        self._release()

    def _pump(self) -> None:
        """Write what waits, until the wire is full or TURN_BYTES went this turn."""
        written = 0
        while not (self._gone or self.late):
            chunk = self._chunk if self._chunk is not None else self._next_slice()
            if chunk is None:
                break
            try:
                n = self._write(chunk)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:  # EPIPE, ECONNRESET: the client closed its end
                self._lost(exc)
                return
            written += n
            self.waiting -= n
            self._chunk = chunk[n:] if n < len(chunk) else None
            if self._chunk is not None or written >= TURN_BYTES:
                self._watch()  # full; or still writable, and the next turn writes on after the loop's other work
                break
        if not self._lines:
            self._unwatch()
        self._settle()

    def _give_up(self) -> None:
        self._chunk = None
        self._unwatch()
        super()._give_up()

    def _next_slice(self) -> memoryview | bytes | None:
        while self._lines:
            piece = next(self._lines[0].slices, None)
            if piece is not None:
                return piece
            self._lines.popleft()  # the line is written whole
        return None

    def _watch(self) -> None:
        if not self._busy:
            self.loop.add_writer(self.fd, self._pump)
            self._busy = True

    def _unwatch(self) -> None:
        if self._busy:
            self.loop.remove_writer(self.fd)
            self._busy = False


class _ThreadWire(_Wire):
    """stdout the loop cannot watch, written by one thread of its own.

    Windows (its select watches sockets only), a terminal, a regular file, an in-memory object.
    The loop hands the thread the lines that wait, up to WRITE_SLICE bytes of them at once, and
    holds the deadline, so a client that stops reading meets it as on the loop's road. The thread
    cannot be joined while its write blocks, and need not be: it is a daemon, which the
    interpreter's exit does not wait for, and it writes a file with os.write to a descriptor of
    its own that nothing else closes, so it holds no lock another thread could wait on and no
    descriptor number that could be reused under it.
    """

    def __init__(self, terms: _Terms, write: Callable[[memoryview | bytes], None], release: Callable[[], None]) -> None:
        super().__init__(terms)
        self._handed: queue.SimpleQueue[list[_Line] | None] = queue.SimpleQueue()
        thread = threading.Thread(target=self._run, args=(write, release), name="fairwins-mcp-stdout", daemon=True)
        signals.start(thread)  # a stop signal must reach the main thread, not this one

    def close(self) -> None:
        super().close()
        self._handed.put(None)  # the thread ends after the write it is in, should that ever return

    def _pump(self) -> None:
        # Every line waiting is the thread's to write: none is with it while it is idle.
        batch: list[_Line] = []
        size = 0
        for line in self._lines:
            if batch and size + line.size > WRITE_SLICE:
                break
            batch.append(line)
            size += line.size
        if batch:
            self._busy = True
            self._handed.put(batch)
        self._settle()

    def _run(self, write: Callable[[memoryview | bytes], None], release: Callable[[], None]) -> None:
        """The writer thread: each batch written whole, then reported to the loop."""
        try:
            while (batch := self._handed.get()) is not None:
                failure: OSError | ValueError | None = None
                try:
                    for line in batch:
                        for piece in line.slices:
                            write(piece)
                except (OSError, ValueError) as exc:  # EPIPE; ValueError: a closed file object
                    failure = exc
                try:
                    self.loop.call_soon_threadsafe(self._written, batch, failure)
                except RuntimeError:
                    return  # the loop has closed
        finally:
            release()

    def _written(self, batch: list[_Line], failure: OSError | ValueError | None) -> None:
        self._busy = False
        if self._gone or self.late:
            return
        if failure is not None:
            self._lost(failure)
            return
        for line in batch:  # the head lines, in order
            self._lines.popleft()
            self.waiting -= line.size
        self._pump()


def _slices(parts: Sequence[Part]) -> Iterator[memoryview | bytes]:
    """A line's bytes in writes of at most WRITE_SLICE, its end last.

    Small pieces are joined into one write (an answer is a handful of them: one system call, not
    eight); a large piece is never copied whole.
    """
    held: list[memoryview | bytes] = []
    size = 0
    for piece in chain(pieces(parts), (b"\n",)):
        if not piece:
            continue
        if size + len(piece) <= WRITE_SLICE:
            held.append(piece)
            size += len(piece)
            continue
        if held:
            yield held[0] if len(held) == 1 else b"".join(held)
            held, size = [], 0
        if len(piece) <= WRITE_SLICE:
            held, size = [piece], len(piece)
            continue
        view = memoryview(piece)
        for at in range(0, len(view), WRITE_SLICE):
            yield view[at : at + WRITE_SLICE]
    if held:
        yield held[0] if len(held) == 1 else b"".join(held)


def _open_wire(
    loop: asyncio.AbstractEventLoop,
    wire: BinaryIO,
    timeout: float,
    on_late: Callable[[], None],
    on_room: Callable[[], None],
) -> _Wire:
    """The claimed stdout: on the loop where it can watch it, else on a thread."""
    terms = _Terms(loop, timeout, on_late, on_room)
    fd = _descriptor(wire)
    if fd is None:  # an in-memory wire

        def write_object(data: memoryview | bytes) -> None:
            wire.write(data)
            wire.flush()

        return _ThreadWire(terms, write_object, lambda: None)
    wire.flush()  # nothing may wait in the writer's own buffer: from here the descriptor is written directly
    unblocked = _unblocked(fd)
    if unblocked is not None:
        return _LoopWire(terms, *unblocked)
    own = os.dup(fd)

    def write_all(data: memoryview | bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(own, view) :]

    return _ThreadWire(terms, write_all, lambda: os.close(own))


def _unblocked(fd: int) -> tuple[int, Callable[[memoryview | bytes], int], Callable[[], None]] | None:
    """stdout's descriptor, write and release for the loop, or None.

    Never made non-blocking where others share it. A socket (Node's child processes, Claude Code's
    and the Inspector's, get socket pairs) is sent to with MSG_DONTWAIT, a flag of the call alone.
    A pipe on Linux is opened anew through /proc, a file description of our own, and that one is
    made non-blocking. A pipe elsewhere (macOS) has no such way: the pipe our parent made for us
    is made non-blocking, and blocking again when serving ends. A terminal's description is the
    whole session's, and a regular file is never watched: both go to the thread, as all of
    Windows' do (its select watches sockets only).
    """
    if sys.platform == "win32":
        return None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if stat.S_ISSOCK(mode):
        sock = socket.socket(fileno=os.dup(fd))
        return sock.fileno(), lambda data: sock.send(data, socket.MSG_DONTWAIT), sock.close
    if not stat.S_ISFIFO(mode):
        return None
    if sys.platform == "linux":
        try:
            private = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:  # no /proc, or the reading end already closed (ENXIO)
            log.debug("the stdout pipe could not be opened anew (%s): its own description is made non-blocking", exc)
        else:
            return private, lambda data: os.write(private, data), lambda: os.close(private)
    os.set_blocking(fd, False)

    def restore() -> None:
        try:
            os.set_blocking(fd, True)
        except OSError:
            pass  # closed already

    return fd, lambda data: os.write(fd, data), restore


# ---- stdin ----------------------------------------------------------------------------------------


class _WatchedInput:
    """POSIX stdin the loop watches (a pipe, a socket, a terminal).

    The descriptor stays blocking (its description is the parent's, or a whole terminal
    session's): it is read only when the loop says bytes are there, and so never waits.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, take: Callable[[bytes], None]) -> None:
        self.loop, self.fd, self.take = loop, fd, take
        self.loop.add_reader(fd, self._readable)  # raises for what the loop cannot watch (a regular file)
        self._watching = True

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, CHUNK)
        except (BlockingIOError, InterruptedError):
            return  # stdin shared with a process that made it non-blocking, and emptied: wait again
        except OSError as exc:  # EIO: the terminal went away
            log.info("stdin could not be read (%s): taken as its end", exc)
            data = b""
        self.take(data)

    def pause(self) -> None:
        if self._watching:
            self.loop.remove_reader(self.fd)
            self._watching = False

    def resume(self) -> None:
        if not self._watching:
            self.loop.add_reader(self.fd, self._readable)
            self._watching = True

    def stop(self) -> None:
        self.pause()

    def rest(self, budget: int) -> Iterator[bytes]:
        """After a stop signal: up to `budget` bytes already written, unwaited."""
        while budget > 0:
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                return
            try:
                data = os.read(self.fd, min(CHUNK, budget))
            except OSError:  # BlockingIOError included: nothing there after all
                return
            if not data:
                return
            budget -= len(data)
            yield data


class _ThreadInput:
    """stdin the loop cannot watch, read by one thread of its own.

    Windows, a regular file, an in-memory reader. One chunk at a time: the thread reads the next
    only once the loop has taken the last and wants more. On Windows no signal interrupts a pipe
    read: end of input is how a client stops the server there (Desktop sends no signal).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, reader: BinaryIO, take: Callable[[bytes], None]) -> None:
        self.loop, self.take = loop, take
        # read1: what is there, up to CHUNK, without waiting to fill CHUNK (objects without it: read).
        self._read: Callable[[int], bytes] = getattr(reader, "read1", reader.read)
        self._wanted = threading.Event()
        self._wanted.set()
        self._paused = False
        self._stopped = False
        thread = threading.Thread(target=self._run, name="fairwins-mcp-stdin", daemon=True)
        signals.start(thread)  # a stop signal must reach the main thread, not this one

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            if self._stopped:
                return
            self._wanted.clear()
            try:
                data = self._read(CHUNK)
            except (OSError, ValueError) as exc:
                log.info("stdin could not be read (%s): taken as its end", exc)
                data = b""
            except Exception:  # a bug: this thread owns its reads, and the loop waits on it for the end
                log.exception("stdin's reader failed: taken as its end")
                data = b""
            try:
                self.loop.call_soon_threadsafe(self._handed, data)
            except RuntimeError:
                return  # the loop has closed
            if not data:
                return

    def _handed(self, data: bytes) -> None:
        if self._stopped:
            return
        self.take(data)
        if data and not self._paused and not self._stopped:
            self._wanted.set()

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            self._wanted.set()

    def stop(self) -> None:
        self._stopped = True
        self._wanted.set()

    def rest(self, budget: int) -> Iterator[bytes]:
        return iter(())  # what the thread handed in was taken; it is not asked for more


# ---- the server -----------------------------------------------------------------------------------


class StdioServer:
    """One MCP session over stdin and a claimed stdout, served by run()."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        wire: BinaryIO,
        *,
        bearer: str | None = None,
        workers: int = 16,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.dispatcher = dispatcher
        self.wire = wire
        self.bearer = bearer
        self.session = Session(http=False)
        self.workers = workers  # calls served at once; the others wait for a place, in order
        self.write_timeout = write_timeout
        self._inflight: dict[Id, RequestContext] = {}
        self._batches: set[Cancellation] = set()  # the batches under way
        self._tasks: set[asyncio.Task[None]] = set()
        self._signal = 0  # the stop signal's number once one arrived; 0 while serving
        self._client_logged = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._out: _Wire  # stdout, once run() serves
        self._input: _WatchedInput | _ThreadInput | None = None
        self._framer = LineFramer(MAX_LINE)
        self._framed: deque[lines.Framed] = deque()
        self._ended = False  # no more lines will be read: end of input, a stop signal, or the wire given up
        self._over: asyncio.Future[None] | None = None
        self._slots: asyncio.Semaphore  # the `workers` places, once run() serves
        self._thread = 0  # the loop's thread, while run() serves
        self.pacing = Pacing()  # large answers share the core with the small calls beside them

    # ---- output -------------------------------------------------------------------------

    def _notify(self, message: JSONObject) -> None:
        """A call's notification, from any thread; dropped past STREAM_BACKLOG."""
        if threading.get_ident() == self._thread:
            self._put(message, STREAM_BACKLOG)
        elif self._loop is not None:
            with suppress(RuntimeError):  # the loop has closed: serving is over
                self._loop.call_soon_threadsafe(self._put, message, STREAM_BACKLOG)

    def _put(self, message: JSONObject | Encoded, limit: int | None) -> None:
        parts = _encoded(message)
        if parts is not None:
            self._out.put(parts, limit)

    async def _answer(self, message: JSONObject | Encoded, heavy: bool) -> None:
        """A task's answer, queued once stdout has room (heavy: encoded off-loop)."""
        await self._out.room()
        parts = await off_loop(lambda: _encoded(message), self.pacing) if heavy else _encoded(message)
        if parts is not None:
            self._out.put(parts)

    # ---- input --------------------------------------------------------------------------

    def context(self) -> RequestContext:
        return RequestContext(
            bearer=self.bearer,
            bearer_source="env" if self.bearer else "none",
            send=self._notify,
            record=records.Record("stdio"),
        )

    def finish(self, record: records.Record) -> None:
        """Log a message's record, naming the client once per session."""
        if record.client is not None:
            if self._client_logged and record.method != "initialize":
                record.client = None
            self._client_logged = True
        records.finish(record)

    def _log(self, message: object) -> None:
        record = records.Record("stdio")
        record.begin(message)
        self.finish(record)

    def _cancels(self, message: object) -> bool:
        """Whether `message` is notifications/cancelled: its call is cancelled."""
        if not (isinstance(message, Notification) and message.method == "notifications/cancelled"):
            return False
        request_id = message.params.get("requestId")
        ctx = self._inflight.get(request_id) if isinstance(request_id, (str, int)) else None
        if ctx is not None:
            ctx.cancellation.cancel()  # stops the gateway wait; the answer is then not sent
        return True

    def receive(self, line: bytes) -> None:
        message = parse(line)
        if self._cancels(message):
            self._log(message)
            return
        if isinstance(message, Batch):
            for item in message.items:
                self._cancels(item)
            if self.dispatcher.is_blocking(message):
                self._start(self._batch(message, self.session))
            else:
                self._batch_now(message)
            return
        if isinstance(message, Request) and self.dispatcher.is_blocking(message):
            ctx = self.context()
            self._inflight[message.id] = ctx
            # The era is decided as the request arrives: an `initialize` read after a modern
            # tools/call must not turn that call legacy while it waits for its turn. Blocking
            # single requests never change the session, so a copy is enough.
            self._start(self._call(message, ctx, replace(self.session)))
            return
        # Not waiting on the network (initialize, ping, tools/list, a notification): answered as
        # it is read, in order, so that what it changes in the session holds for the next line.
        ctx = self.context()
        reply = self.dispatcher.handle(message, self.session, ctx)
        if reply.message is not None:
            self._put(reply.message, None)
        self.finish(ctx.record)

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended_task)

    def _ended_task(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # The dispatcher is the exception-to-wire boundary; what gets past it is a bug here.
            log.error("a request's task failed (a bug; the server goes on)", exc_info=exc)
        self._work()

    async def _driven(self, steps: Steps[Reply]) -> tuple[Reply, bool]:
        """A reply driven in one of the `workers` places, and whether it was heavy."""
        run = Run()
        async with self._slots:
            return await drive(steps, self.pacing, run), run.heavy

    async def _call(self, message: Request, ctx: RequestContext, session: Session) -> None:
        try:
            reply, heavy = await self._driven(self.dispatcher.handle_steps(message, session, ctx))
        finally:
            if self._inflight.get(message.id) is ctx:
                del self._inflight[message.id]
        if reply.message is not None and not ctx.cancellation.is_set:
            await self._answer(reply.message, heavy)
        self.finish(ctx.record)

    def _batch_contexts(self) -> tuple[list[RequestContext], Callable[[], RequestContext]]:
        made: list[RequestContext] = []

        def make_ctx() -> RequestContext:
            made.append(self.context())
            return made[-1]

        return made, make_ctx

    def _batch_done(self, made: list[RequestContext]) -> None:
        for item in made:
            if item.record.outcome:  # the first context only lent its headers
                self.finish(item.record)

    async def _batch(self, batch: Batch, session: Session) -> None:
        made, make_ctx = self._batch_contexts()
        cancellation = Cancellation()  # thrown only when stdout is given up: the batch has nowhere to go
        self._batches.add(cancellation)
        try:
            reply, heavy = await self._driven(
                self.dispatcher.handle_batch_steps(batch, session, make_ctx, cancellation)
            )
        finally:
            self._batches.discard(cancellation)
        if reply.message is not None:
            await self._answer(reply.message, heavy)
        self._batch_done(made)

    def _batch_now(self, batch: Batch) -> None:
        made, make_ctx = self._batch_contexts()
        reply = self.dispatcher.handle_batch(batch, self.session, make_ctx)
        if reply.message is not None:
            self._put(reply.message, None)
        self._batch_done(made)

    def _answer_line(self, item: lines.Framed) -> None:
        if isinstance(item, Oversized):
            err = error_object(INVALID_REQUEST, f"Invalid Request: a message over {item.limit} bytes")
            self._put(error_response(None, err), None)
            self._log(Invalid(None, err))
        else:
            self.receive(item)

    # ---- the loop -----------------------------------------------------------------------

    def _take(self, data: bytes) -> None:
        """stdin's bytes (b"": its end), framed and answered as the bounds allow."""
        if self._ended:
            return
        if not data:
            self._framed.extend(self._framer.end())  # EOF: the client closed stdin
            self._end_input()
        else:
            self._framed.extend(self._framer.feed(data))
        self._work()

    def _work(self) -> None:
        """Answer the lines read, in order, while stdout and the calls leave room."""
        while self._framed and not self._held_back():
            self._answer_line(self._framed.popleft())
        if self._input is not None and not self._ended:
            if self._framed or self._held_back():
                self._input.pause()
            else:
                self._input.resume()
        if self._ended and not self._framed and self._over is not None and not self._over.done():
            self._over.set_result(None)

    def _held_back(self) -> bool:
        return self._out.full() or len(self._tasks) >= MAX_UNANSWERED

    def _end_input(self) -> None:
        self._ended = True
        if self._input is not None:
            self._input.stop()

    def _on_stop(self, signum: int) -> None:
        # SIGTERM, or SIGINT (how Claude Code stops a stdio server, and a terminal's Ctrl-C): the
        # lines the client already wrote are requests too, and are answered; nothing more is read.
        if self._signal:
            return
        self._signal = signum
        name = signal.Signals(signum).name
        log.info("stopping on %s: every request already read is answered", name, extra=logs.AHEAD)
        if not self._ended:
            self._drain_input()

    def _drain_input(self) -> None:
        """After a stop signal, answer the whole lines already written.

        The signal can land with lines waiting in the pipe; dropping them would leave requests
        the client saw leave unanswered. Nothing is waited for, a line not yet ended is not a
        request and is dropped, and at most MAX_LINE bytes are taken this way: a client that
        keeps writing cannot keep the process from leaving.
        """
        assert self._input is not None
        rest = list(self._input.rest(MAX_LINE))
        self._end_input()
        for data in rest:
            self._framed.extend(self._framer.feed(data))
        self._work()

    def _on_late(self) -> None:
        """The client missed the answer deadline: read no more, cancel the calls."""
        self._end_input()
        self._framed.clear()  # nowhere to answer them
        for ctx in list(self._inflight.values()):
            ctx.cancellation.cancel()
        for cancellation in list(self._batches):
            cancellation.cancel()
        self._work()

    def run(self, reader: BinaryIO) -> int:
        """Serve `reader` to its end or a stop signal: 0, or EXIT_WIRE_BROKEN."""
        loop = loops.new_loop()
        loops.Guard(loop)  # a failure nobody owned is logged, and serving goes on
        self._loop = loop
        self._thread = threading.get_ident()
        try:
            return loop.run_until_complete(self._serve(loop, reader))
        finally:
            try:
                loops.close(loop, ())
            finally:
                self._loop, self._thread = None, 0
                self.pacing.close()

    async def _serve(self, loop: asyncio.AbstractEventLoop, reader: BinaryIO) -> int:
        self._over = loop.create_future()
        self._slots = asyncio.Semaphore(self.workers)
        on_main = threading.current_thread() is threading.main_thread()
        undo = loops.on_stop_signals(loop, self._on_stop, signals.STOP_SIGNALS) if on_main else None
        self._out = _open_wire(loop, self.wire, self.write_timeout, self._on_late, self._work)
        try:
            if on_main:
                # Only once the handlers are set: one held back during start-up is heard now.
                signals.unblock()  # cli.main holds them back while the server starts
            self._input = self._open_input(loop, reader)
            await self._over
            # Every request already read gets its answer before the process leaves.
            while self._tasks:
                await asyncio.wait(list(self._tasks))
            await self._out.drained()
            if self._signal and not self._out.late:
                log.info("stopped: every request read before %s was answered", signal.Signals(self._signal).name)
        finally:
            if self._input is not None:
                self._input.stop()
            self._out.close()
            if undo is not None:
                undo()
        return EXIT_WIRE_BROKEN if self._out.late else 0

    def _open_input(self, loop: asyncio.AbstractEventLoop, reader: BinaryIO) -> _WatchedInput | _ThreadInput:
        # run() is the reader's only reader, and reads its descriptor directly: nothing may wait in
        # the reader's own buffer (nothing has read sys.stdin.buffer before serve()).
        if sys.platform != "win32" and (fd := _descriptor(reader)) is not None:
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return _WatchedInput(loop, fd, self._take)
            except (OSError, ValueError) as exc:  # epoll refuses what it cannot watch
                log.debug("stdin cannot be watched by the loop (%s): a thread reads it", exc)
        return _ThreadInput(loop, reader, self._take)


def _descriptor(file: BinaryIO) -> int | None:
    """A file object's descriptor, or None (an in-memory object)."""
    try:
        return file.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def serve(dispatcher: Dispatcher, *, bearer: str | None = None, workers: int = 16) -> int:
    wire = claim_stdout()
    log.info("fairwins-mcp serving MCP over stdio")
    code = StdioServer(dispatcher, wire, bearer=bearer, workers=workers).run(sys.stdin.buffer)
    if threading.current_thread() is threading.main_thread():
        # Every request read is answered: a second SIGTERM or ^C on the way out (run() has put
        # the handlers it found back) must not turn this clean exit into a killed process.
        for signum in signals.STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    return code
