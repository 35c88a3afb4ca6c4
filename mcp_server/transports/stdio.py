"""stdio transport: one JSON-RPC message per line, requests handled concurrently, stdout kept for the wire.

"The server MUST NOT write anything to its stdout that is not a valid MCP message." The real
stdout is claimed at start and fd 1 is pointed at stderr, so a stray print() anywhere, even in C
code, lands on stderr instead of corrupting the wire.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import BinaryIO, Final

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.ops import logs, records, signals
from mcp_server.wire import lines
from mcp_server.wire.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Batch,
    Encoded,
    Id,
    Invalid,
    JSONObject,
    Notification,
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
STOP_SIGNALS: Final = signals.STOP_SIGNALS
CHUNK: Final = 64 * 1024  # what one read takes: a pipe's default capacity


def claim_stdout() -> BinaryIO:
    """Keep a private handle on the real stdout; from now on fd 1 and sys.stdout are stderr."""
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
    """Let the wire's pipe hold 1 MiB where the system allows it (Linux), so a large answer is written in few waits.

    A pipe holds 64 KiB by default: an answer of megabytes would be written in as many waits for
    the client to read. 1 MiB is Linux's default limit for an unprivileged process. macOS and
    Windows have no such setting (their pipes grow or are sized by the reader): nothing to do there.
    """
    if sys.platform == "linux":
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError as exc:  # not a pipe (a file, a terminal), or over /proc/sys/fs/pipe-max-size
            log.debug("the stdout pipe keeps its size (%s)", exc)
    else:
        log.debug("the stdout pipe keeps the system's size (only Linux lets a process set it)")


def _internal_error(message: JSONObject) -> JSONObject | None:
    """The -32603 answer standing in for a response that could not be encoded (None: not a response)."""
    if "method" in message or "id" not in message:
        return None
    return error_response(message["id"], error_object(INTERNAL_ERROR, "Internal error"))


class StdioServer:
    def __init__(self, dispatcher: Dispatcher, wire: BinaryIO, *, bearer: str | None = None, workers: int = 16) -> None:
        self.dispatcher = dispatcher
        self.wire = wire
        self.bearer = bearer
        self.session = Session(http=False)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fairwins-mcp-call")
        self._write_lock = threading.Lock()
        self._inflight: dict[Id, RequestContext] = {}
        self._inflight_lock = threading.Lock()
        self._pending: set[Future[None]] = set()
        # The stop signal's number once one arrived: read from the wake-up pipe (POSIX, a descriptor
        # to read), or set by the Python handler (any other reader). 0 while serving.
        self._signal = 0
        # While run() waits on a descriptor: the wake-up pipe's write end, where the C signal
        # handler writes each signal's number (signal.set_wakeup_fd, on the main thread).
        self.wake_fd: int | None = None
        self._wire_broken = False
        self._client_logged = False

    # ---- output -------------------------------------------------------------------------

    def write(self, message: JSONObject | Encoded) -> None:
        try:
            parts = encode(message)
        except (ValueError, TypeError):
            # A value JSON cannot carry must not leave a request unanswered (nor, on the reading
            # thread, stop the server): a response becomes -32603, anything else is dropped. (A
            # batch's answers arrive encoded, each item already checked: batches.py.)
            log.exception("a message could not be encoded as JSON")
            answer = None if isinstance(message, Encoded) else _internal_error(message)
            if answer is None:
                return
            parts = [dumps(answer)]
        with self._write_lock:
            if self._wire_broken:
                return
            try:
                # One piece after another, the line's end last: a large answer is never copied
                # into one buffer to be written (jsonrpc.encode).
                for piece in pieces(parts):
                    self.wire.write(piece)
                self.wire.write(b"\n")
                self.wire.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._wire_broken = True  # the client is gone; keep draining quietly

    # ---- input --------------------------------------------------------------------------

    def context(self) -> RequestContext:
        return RequestContext(
            bearer=self.bearer,
            bearer_source="env" if self.bearer else "none",
            send=self.write,
            record=records.Record("stdio"),
        )

    def finish(self, record: records.Record) -> None:
        """Log a message's record (stderr; stdout is the wire). The client is named once per session."""
        if record.client is not None:
            if self._client_logged and record.method != "initialize":
                record.client = None
            self._client_logged = True
        records.finish(record)

    def cancel(self, params: JSONObject) -> None:
        request_id = params.get("requestId")
        with self._inflight_lock:
            ctx = self._inflight.get(request_id) if isinstance(request_id, (str, int)) else None
        if ctx is not None:
            ctx.cancellation.cancel()  # stops the gateway wait; the answer is then not sent

    def _submit(self, work: Request | Batch, ctx: RequestContext | None) -> None:
        if self.dispatcher.is_blocking(work):
            # The era is decided as the request arrives: an `initialize` read after a modern
            # tools/call must not turn that call legacy while it waits for a worker. Blocking
            # single requests never change the session, so a copy is enough.
            session = replace(self.session) if isinstance(work, Request) else self.session
            # A call thread the pool starts here is born blocking the stop signals: one that took
            # SIGTERM would leave this thread asleep in its read, and the stop unheard (signals.py).
            with signals.held():
                future = self.pool.submit(self._run, work, ctx, session)
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)
        else:
            self._run(work, ctx, self.session)

    def _run(self, work: Request | Batch, ctx: RequestContext | None, session: Session) -> None:
        if isinstance(work, Batch):
            made: list[RequestContext] = []

            def make_ctx() -> RequestContext:
                made.append(self.context())
                return made[-1]

            reply = self.dispatcher.handle_batch(work, session, make_ctx)
            if reply.message is not None:
                self.write(reply.message)
            for item in made:
                if item.record.outcome:  # the first context only lent its headers
                    self.finish(item.record)
            return
        assert ctx is not None
        try:
            reply = self.dispatcher.handle(work, session, ctx)
        finally:
            with self._inflight_lock:
                if self._inflight.get(work.id) is ctx:
                    del self._inflight[work.id]
        if reply.message is not None and not ctx.cancellation.is_set:
            self.write(reply.message)
        del reply  # an answer is not kept past its write (a large one is megabytes)
        self.finish(ctx.record)

    def receive(self, line: bytes) -> None:
        message = parse(line)
        if isinstance(message, Notification) and message.method == "notifications/cancelled":
            self.cancel(message.params)
            record = records.Record("stdio")
            record.begin(message)
            self.finish(record)
            return
        if isinstance(message, Batch):
            for item in message.items:
                if isinstance(item, Notification) and item.method == "notifications/cancelled":
                    self.cancel(item.params)
            self._submit(message, None)
            return
        if isinstance(message, Request):
            ctx = self.context()
            with self._inflight_lock:
                self._inflight[message.id] = ctx
            self._submit(message, ctx)
            return
        ctx = self.context()
        reply = self.dispatcher.handle(message, self.session, ctx)
        if reply.message is not None:
            self.write(reply.message)
        self.finish(ctx.record)

    def _on_stop(self, signum: int, frame: object) -> None:
        # SIGTERM, or SIGINT (how Claude Code stops a stdio server, and a terminal's Ctrl-C).
        # Never raise here: an exception landing between a read and the framing of what it
        # returned would lose those lines (SIGINT's default, KeyboardInterrupt, did). A flag
        # only: on POSIX the loop learns of the signal from its byte on the wake-up pipe, since
        # this handler runs only when the main thread next runs Python code, which a thread
        # asleep in a read may never do.
        if not self._signal:
            self._signal = signum

    def run(self, reader: BinaryIO) -> int:
        """Serve `reader` until end of input or a stop signal; 0 once every request read is answered."""
        framer = LineFramer(MAX_LINE)
        on_main = threading.current_thread() is threading.main_thread()
        previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} if on_main else {}
        for signum in previous:
            signal.signal(signum, self._on_stop)
        try:
            if sys.platform != "win32" and (fd := _descriptor(reader)) is not None:
                self._serve_descriptor(fd, framer, on_main)
            else:
                if on_main:
                    signals.unblock()  # cli.main holds them back while the server starts
                self._serve_reads(reader, framer)
        finally:
            signalled = self._signal
            try:
                # Every request already read gets its answer before the process leaves.
                wait(list(self._pending))
                self.pool.shutdown(wait=True)
                if signalled:
                    name = signal.Signals(signalled).name
                    log.info("stopped: every request read before %s was answered", name)
            finally:
                for signum, handler in previous.items():
                    if handler is not None:
                        signal.signal(signum, handler)
        return 0

    def _serve_descriptor(self, fd: int, framer: LineFramer, on_main: bool) -> None:
        """POSIX: wait in select() on stdin and a wake-up pipe, never in a read; a stop signal's byte wakes the wait.

        A thread asleep in read(2) is woken by a signal only if the signal lands inside the call
        (EINTR). One that lands just before it (in the C code around the call, or while the thread
        waits for the GIL, which busy call threads make likely) only sets CPython's flag: the
        Python handler would run at the next bytecode, which never comes while the read waits
        for a client that has stopped writing. The C handler also writes the signal's number to
        the wake-up descriptor, at any moment, and select() returns whenever that byte is there,
        before or during the wait: the stop cannot be missed. select(), not epoll: epoll refuses
        regular files (`< requests.jsonl`), and both descriptors are small at start-up.
        """
        if sys.platform == "win32":
            raise RuntimeError("select() takes sockets only on Windows: the reader is read instead")
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)  # a full pipe drops a byte rather than block the C handler (required)
        os.set_blocking(wake_r, False)  # its bytes are taken without ever waiting for more
        self.wake_fd = wake_w
        previous_wake = signal.set_wakeup_fd(wake_w) if on_main else -1
        try:
            if on_main:
                # Only once the wake-up pipe is set: one held back during start-up lands as its byte.
                signals.unblock()
            while not self._signal:
                ready, _, _ = select.select([fd, wake_r], [], [])
                if wake_r in ready:
                    self._take_wake_bytes(wake_r)
                    if self._signal:
                        break
                if fd in ready:
                    try:
                        data = os.read(fd, CHUNK)
                    except BlockingIOError:
                        continue  # stdin shared with a process that made it non-blocking: wait again
                    if not data:
                        self._answer(framer.end())  # EOF: the client closed stdin
                        return
                    self._answer(framer.feed(data))
            self._log_stopping()
            self._drain_descriptor(fd, framer)
        finally:
            if on_main:
                signal.set_wakeup_fd(previous_wake)
            self.wake_fd = None
            os.close(wake_r)
            os.close(wake_w)

    def _take_wake_bytes(self, wake_r: int) -> None:
        """Read the signal numbers the C handler wrote; the first SIGTERM or SIGINT among them is the stop.

        Decided from the byte itself: the Python handler may not have run yet, and need not.
        Any other signal's byte (one another part of the process handles) only woke the wait.
        """
        try:
            data = os.read(wake_r, 4096)
        except BlockingIOError:
            return
        for signum in data:
            if signum in STOP_SIGNALS and not self._signal:
                self._signal = signum

    def _serve_reads(self, reader: BinaryIO, framer: LineFramer) -> None:
        """A reader without a descriptor (io.BytesIO), or Windows: the same framing, fed by the reader's reads.

        On Windows no signal interrupts a pipe read (and select() takes sockets only); end of
        input is how a client stops us there (Desktop ends the process; it sends no signal). A
        Ctrl-C in a console is seen by the Python handler, after the read that it waited on.
        """
        # read1: what is there, up to CHUNK, without waiting to fill CHUNK (objects without it: read).
        read: Callable[[int], bytes] = getattr(reader, "read1", reader.read)
        while not self._signal:
            data = read(CHUNK)
            if not data:
                self._answer(framer.end())
                return
            self._answer(framer.feed(data))
        self._log_stopping()

    def _log_stopping(self) -> None:
        name = signal.Signals(self._signal).name
        log.info("stopping on %s: every request already read is answered", name, extra=logs.AHEAD)

    def _drain_descriptor(self, fd: int, framer: LineFramer) -> None:
        """After SIGTERM or SIGINT, the whole lines the client already wrote are requests too: answer them.

        The signal can land with lines waiting in the pipe; dropping them would leave requests
        the client saw leave unanswered. Nothing is waited for (select with a timeout of 0), a
        line not yet ended is not a request and is dropped, and at most MAX_LINE bytes are taken
        this way: a client that keeps writing cannot keep the process from leaving.
        """
        budget = MAX_LINE
        while budget > 0:
            ready, _, _ = select.select([fd], [], [], 0)
            if not ready:
                return
            try:
                data = os.read(fd, min(CHUNK, budget))
            except OSError:  # BlockingIOError included: nothing there after all
                return
            if not data:
                return
            budget -= len(data)
            self._answer(framer.feed(data))

    def _answer(self, framed: Iterable[lines.Framed]) -> None:
        for item in framed:
            if isinstance(item, Oversized):
                err = error_object(INVALID_REQUEST, f"Invalid Request: a message over {item.limit} bytes")
                self.write(error_response(None, err))
                record = records.Record("stdio")
                record.begin(Invalid(None, err))
                self.finish(record)
            else:
                self.receive(item)


def _descriptor(reader: BinaryIO) -> int | None:
    """The reader's file descriptor, or None (an in-memory reader).

    run() is the reader's only reader: the descriptor is read directly, so nothing may sit in
    the reader's own buffer (nothing has read sys.stdin.buffer before serve()).
    """
    try:
        return reader.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def serve(dispatcher: Dispatcher, *, bearer: str | None = None, workers: int = 16) -> int:
    wire = claim_stdout()
    log.info("fairwins-mcp serving MCP over stdio")
    code = StdioServer(dispatcher, wire, bearer=bearer, workers=workers).run(sys.stdin.buffer)
    if threading.current_thread() is threading.main_thread():
        # Every request read is answered: a second SIGTERM or ^C on the way out (run() has put
        # the handlers it found back) must not turn this clean exit into a killed process.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    return code
