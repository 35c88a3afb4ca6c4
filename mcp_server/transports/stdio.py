"""stdio transport: one JSON-RPC message per line, requests handled concurrently, stdout kept for the wire.

"The server MUST NOT write anything to its stdout that is not a valid MCP message." The real
stdout is claimed at start and fd 1 is pointed at stderr, so a stray print() anywhere, even in C
code, lands on stderr instead of corrupting the wire.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import BinaryIO, Final

from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.ops import logs, records, signals
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

log = logging.getLogger("fairwins_mcp.stdio")

MAX_LINE: Final = 4 * 1024 * 1024
STOP_SIGNALS: Final = signals.STOP_SIGNALS


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


def _set_blocking(fd: int, blocking: bool) -> bool:
    """`os.set_blocking` where it works on stdin; False where it cannot (Windows: see `StdioServer._on_stop`)."""
    if sys.platform == "win32":
        # Python 3.11 has no os.set_blocking on Windows (3.12 added it for pipes), and no signal
        # there interrupts a pipe read anyway: Desktop ends the process rather than signal it.
        # End of input is how a Windows client stops us, and that path needs no trick.
        return False
    try:
        os.set_blocking(fd, blocking)
    except OSError:
        return False
    return True


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
        self._stopping = False
        self._signal = 0
        self._input_fd: int | None = None
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
        # Never raise here: an exception landing just after readline() returned would lose the
        # line it read (SIGINT's default, KeyboardInterrupt, did). Instead the input is made
        # non-blocking, so the interrupted read returns what it has, and run() answers every
        # whole line already written, then stops.
        self._stopping = True
        self._signal = signum
        if self._input_fd is not None:
            _set_blocking(self._input_fd, False)

    def run(self, reader: BinaryIO) -> int:
        if threading.current_thread() is threading.main_thread():
            try:
                self._input_fd = reader.fileno()
            except (AttributeError, OSError, ValueError):
                self._input_fd = None
            for signum in STOP_SIGNALS:
                signal.signal(signum, self._on_stop)
            if sys.platform != "win32":
                # cli.main holds them back while the server starts: one sent meanwhile lands now.
                signals.unblock()
        partial = b""
        try:
            while not self._stopping:
                line = reader.readline(MAX_LINE + 1)
                if not line:
                    break  # EOF: the client closed stdin (or the signal found nothing to read)
                if self._stopping and not line.endswith(b"\n"):
                    partial = line  # cut short by the signal: the rest of it may be in the pipe
                    break
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    self._skip_rest(reader)
                    err = error_object(INVALID_REQUEST, f"Invalid Request: a message over {MAX_LINE} bytes")
                    self.write(error_response(None, err))
                    record = records.Record("stdio")
                    record.begin(Invalid(None, err))
                    self.finish(record)
                    continue
                line = line.strip(b" \t\r\n")
                if line:
                    self.receive(line)
        finally:
            signalled = signal.Signals(self._signal).name if self._stopping else None
            if signalled is not None:
                log.info("stopping on %s: every request already read is answered", signalled, extra=logs.AHEAD)
                self._drain_buffered(reader, partial)
            # Every request already read gets its answer before the process leaves.
            wait(list(self._pending))
            self.pool.shutdown(wait=True)
            if signalled is not None:
                log.info("stopped: every request read before %s was answered", signalled)
        return 0

    def _drain_buffered(self, reader: BinaryIO, partial: bytes = b"") -> None:
        """After SIGTERM or SIGINT, the whole lines the client already wrote are requests too: answer them.

        The signal can land while readline() holds several lines in its buffer, with more waiting
        in the pipe; dropping them would leave requests the client saw leave unanswered. Nothing
        is waited for: the descriptor is made non-blocking, a line not yet complete is not a
        request, and at most MAX_LINE bytes are taken this way.
        """
        try:
            fd = reader.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a pipe (an in-memory reader has nothing buffered beyond what run() reads)
        if not _set_blocking(fd, False):
            return
        budget = MAX_LINE  # a client that keeps writing cannot keep the process from leaving
        try:
            while budget > 0:
                try:
                    line = partial + reader.readline(MAX_LINE + 1)
                except OSError:
                    return
                partial = b""
                if not line or not line.endswith(b"\n"):
                    return
                budget -= len(line)
                line = line.strip(b" \t\r\n")
                if line:
                    self.receive(line)
        finally:
            _set_blocking(fd, True)

    @staticmethod
    def _skip_rest(reader: BinaryIO) -> None:
        while True:
            chunk = reader.readline(MAX_LINE)
            if not chunk or chunk.endswith(b"\n"):
                return


def serve(dispatcher: Dispatcher, *, bearer: str | None = None, workers: int = 16) -> int:
    wire = claim_stdout()
    log.info("fairwins-mcp serving MCP over stdio")
    return StdioServer(dispatcher, wire, bearer=bearer, workers=workers).run(sys.stdin.buffer)
