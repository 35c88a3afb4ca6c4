"""`--workers N`: N pre-forked processes on one socket, under a supervisor.

The supervisor binds the socket (`listener.listen`), forks the workers (each inherits it and
accepts from the one kernel queue) and replaces any worker that dies. On SIGTERM or SIGINT it
tells every worker that the instance is stopping, waits for each to drain, and exits 0 when all
of them did.

One shared socket rather than SO_REUSEPORT: with a socket per worker the kernel hashes each new
connection to one worker's own accept queue, and a worker that closes its socket (to drain, or
because it died) resets every connection still queued there; with one socket there is one
queue, which outlives any worker, and no other process can bind the port beside us.

How a worker learns why it stops: the instance stopping (or the supervisor gone, even by
SIGKILL) is end-of-file on a pipe whose write end only the supervisor holds; the worker then
drains as the last holder of the socket. SIGTERM sent to one worker alone means that worker
leaves and the others go on: it closes its copy of the socket (the queue lives on in the
others) and drains its own connections, and the supervisor starts a replacement.

The metrics listener (`--metrics`) is shared the same way: bound by the supervisor, accepted on
by every worker, and each answers a scrape with every worker's figures summed (metrics.py). The
supervisor itself serves nothing: it forks, so it runs no thread.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Final

from mcp_server.ops import logs, signals

log = logging.getLogger("fairwins_mcp.workers")

QUICK_DEATH: Final = 5.0  # a worker that dies sooner than this after starting counts towards a crash loop
FIRST_BACKOFF: Final = 0.1
MAX_BACKOFF: Final = 10.0
STOP_SIGNALS: Final = signals.STOP_SIGNALS
# Turns of the supervisor's loop that may fail in a row (each logged, then retried after a backoff)
# before it gives up: it then stops its workers and exits non-zero, never left running deaf.
FAILED_TURNS: Final = 5


class Lifeline:
    """In a worker: the supervisor's pipe, whose EOF means the instance stops."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def watch(self, on_instance_stop: Callable[[], None]) -> None:
        """Call `on_instance_stop()` once when the supervisor stops or dies."""

        def wait() -> None:
            with suppress(OSError):
                while os.read(self.fd, 1):
                    pass
            on_instance_stop()

        signals.start(threading.Thread(target=wait, name="fairwins-mcp-lifeline", daemon=True))


Run = Callable[[socket.socket, Lifeline], int]


@dataclass
class _Slot:
    """One worker position: its live process, and when a new one may start."""

    index: int
    pid: int = 0
    started: float = 0.0
    backoff: float = 0.0
    restart_at: float = 0.0


@dataclass
class Supervisor:
    """Starts, watches, replaces and stops workers, on the thread that forks."""

    listener: socket.socket
    count: int
    run: Run
    stop_timeout: float  # after the stop, how long workers may take to drain before SIGKILL
    # More listening sockets the workers share and drain (the metrics listener): kept open here, so
    # their queues outlive any worker, and closed with the first.
    others: Sequence[socket.socket] = ()
    slots: list[_Slot] = field(default_factory=list)
    stopping: bool = False
    failed: int = 0
    replaced: int = 0  # workers that died while the instance was serving, each replaced
    # The one call that learns which worker died (a seam: tests hand in one that fails).
    waitpid: Callable[[int, int], tuple[int, int]] = os.waitpid
    _deadline: float = 0.0  # once stopping: when the workers still running are killed
    _wake_r: int = -1
    _wake_w: int = -1
    _life_r: int = -1
    _life_w: int = -1

    def serve(self) -> int:
        """Run the workers until SIGTERM or SIGINT; 0 if all then drained cleanly."""
        if sys.platform == "win32":
            raise RuntimeError(_NO_FORK)
        if threading.active_count() != 1:
            # fork() copies only the calling thread: a lock another thread held would stay held forever.
            raise RuntimeError("the worker supervisor must fork before any thread starts")
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._life_r, self._life_w = os.pipe()
        previous = {sig: signal.getsignal(sig) for sig in (*STOP_SIGNALS, signal.SIGCHLD)}
        old_wakeup = signal.set_wakeup_fd(self._wake_w)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_stop)
        signal.signal(signal.SIGCHLD, _wake_only)
        try:
            self.slots = [_Slot(i) for i in range(self.count)]
            for slot in self.slots:
                self._start(slot)
            log.info("%d workers started (pids %s)", self.count, ", ".join(str(s.pid) for s in self.slots))
            self._loop()
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for fd in (self._wake_r, self._wake_w, self._life_r, self._life_w):
                _close_fd(fd)
        return 1 if self.failed else 0

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _loop(self) -> None:
        failures = 0
        backoff = 0.0
        while True:
            try:
                wait = self._turn()
            except Exception:
                # One turn lost (its reaps, starts or kills are tried again on the next); a loop
                # that keeps failing gives up rather than run on, deaf to its workers and signals.
                failures += 1
                if failures >= FAILED_TURNS:
                    log.critical(
                        "the worker supervisor's loop failed %d times in a row and cannot go on: "
                        "its workers are told to stop, and it exits 1",
                        failures,
                        exc_info=True,
                    )
                    self._give_up()
                    return
                backoff = next_backoff(backoff, 0.0)
                log.exception(
                    "the worker supervisor's loop failed (%d in a row); it goes on in %.1f s", failures, backoff
                )
                wait = backoff
            else:
                failures, backoff = 0, 0.0
            if wait is None:
                return
            self._sleep(wait)

    def _turn(self) -> float | None:
        """Reap, start or stop workers; seconds to the next pass, None at the end."""
        if sys.platform == "win32":
            raise RuntimeError(_NO_FORK)
        self._reap()
        now = time.monotonic()
        if self.stopping and not self._deadline:
            self._deadline = now + self.stop_timeout
            self._stop_all()
        alive = [s for s in self.slots if s.pid]
        if self.stopping:
            if not alive:
                return None
            if now >= self._deadline:
                for slot in alive:
                    late = (slot.index, slot.pid, self.stop_timeout)
                    log.warning("worker %d (pid %d) still running after %.0f s: killed", *late)
                    _kill(slot.pid, signal.SIGKILL)
                self._deadline = now + 3600  # the kills are reaped on the next turns
                self.failed += len(alive)
                return 0.0
            return self._deadline - now
        for slot in self.slots:
            if not slot.pid and slot.restart_at <= now:
                self._start(slot)
        pending = [s.restart_at for s in self.slots if not s.pid]
        return max(0.0, min(pending) - now) if pending else 3600.0

    def _sleep(self, wait: float) -> None:
        """Sleep `wait` seconds, or until a signal writes to the wake-up fd."""
        try:
            ready, _, _ = select.select([self._wake_r], [], [], wait)
        except InterruptedError:
            return
        if ready:
            with suppress(BlockingIOError):
                os.read(self._wake_r, 4096)

    def _give_up(self) -> None:
        """The loop cannot go on: the workers drain (lifeline EOF), as if we died."""
        self.failed += 1
        if not self.stopping:
            self.stopping = True
            try:
                self._stop_all()
            except Exception:
                log.exception("the workers could not all be told to stop")

    def _stop_all(self) -> None:
        log.info("stopping: %d workers drain, then exit", sum(1 for s in self.slots if s.pid))
        _close_fd(self._life_w)  # every worker reads EOF: the instance is stopping
        self._life_w = -1
        # The workers hold the sockets open while they take in what is queued; ours are no longer needed.
        self.listener.close()
        for other in self.others:
            other.close()

    def _start(self, slot: _Slot) -> None:
        if sys.platform == "win32":
            raise RuntimeError(_NO_FORK)
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: this slot waits its backoff, the others serve on
            slot.backoff = next_backoff(slot.backoff, 0.0)
            slot.restart_at = time.monotonic() + slot.backoff
            log.error("worker %d could not be started (%s); trying again in %.1f s", slot.index, exc, slot.backoff)
            return
        if pid == 0:  # the worker: never returns into the supervisor's loop
            code = 1
            try:
                code = self._worker()
            except BaseException:
                log.exception("worker %d failed", slot.index)
            finally:
                _flush()
                os._exit(code)
        slot.pid, slot.started = pid, time.monotonic()

    def _worker(self) -> int:
        if sys.platform == "win32":
            raise RuntimeError(_NO_FORK)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # until the worker's own server sets its handler
        # Ctrl-C reaches the whole process group; the supervisor alone decides what it means.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for fd in (self._wake_r, self._wake_w, self._life_w):
            _close_fd(fd)
        logs.mark_pid()  # this worker's own records say so, not the supervisor's pid they were forked with
        return self.run(self.listener, Lifeline(self._life_r))

    def _reap(self) -> None:
        if sys.platform == "win32":
            raise RuntimeError(_NO_FORK)
        while True:
            try:
                pid, status = self.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s in self.slots if s.pid == pid), None)
            if slot is None:
                continue
            slot.pid = 0
            how = _describe(status)
            if self.stopping:
                if os.waitstatus_to_exitcode(status) != 0:
                    self.failed += 1
                    log.warning("worker %d (pid %d) %s while draining", slot.index, pid, how)
                else:
                    log.info("worker %d (pid %d) drained and exited", slot.index, pid)
                continue
            lived = time.monotonic() - slot.started
            # A worker that was asked to leave (SIGTERM to it alone) and drained is no crash.
            clean = os.waitstatus_to_exitcode(status) == 0
            slot.backoff = 0.0 if clean else next_backoff(slot.backoff, lived)
            slot.restart_at = time.monotonic() + slot.backoff
            self.replaced += 1
            log.warning(
                "worker %d (pid %d) %s after %.1f s; a replacement starts %s (%d replaced since the start)",
                slot.index,
                pid,
                how,
                lived,
                f"in {slot.backoff:.1f} s" if slot.backoff else "now",
                self.replaced,
            )


_NO_FORK: Final = "--workers forks worker processes, and Windows has no fork(): run one process without --workers"


def unsupported() -> str | None:
    """Why --workers cannot run here, in one sentence; None where it can.

    A worker is the supervisor forked without exec. Windows has no fork(). macOS has it, but
    Apple's frameworks, which CPython loads there for TLS roots, proxies and name lookups, are not
    safe in a child forked from a process that used them (CPython's multiprocessing stopped forking
    there in 3.8 for that reason): rather than a worker that hangs or crashes now and then, none.
    """
    if sys.platform == "win32":
        return _NO_FORK
    if sys.platform == "darwin":
        return (
            "--workers forks worker processes, which macOS does not support beside its system "
            "frameworks: run one process without --workers (or several behind a balancer)"
        )
    return None


def next_backoff(previous: float, lived: float) -> float:
    """Seconds to a replacement: 0 after a long life, doubling in a crash loop."""
    if lived >= QUICK_DEATH:
        return 0.0
    return min(MAX_BACKOFF, max(FIRST_BACKOFF, previous * 2))


def _wake_only(signum: int, frame: object) -> None:
    return None  # the wake-up fd already woke the loop


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _kill(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _close_fd(fd: int) -> None:
    if fd >= 0:
        with suppress(OSError):
            os.close(fd)


def _flush() -> None:
    for handler in logging.getLogger("fairwins_mcp").handlers:
        handler.flush()  # a log writer thread's queue too: os._exit runs no atexit
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()


def supervise(
    listener: socket.socket, count: int, run: Run, *, stop_timeout: float, others: Sequence[socket.socket] = ()
) -> int:
    """Serve with `count` workers running `run(listener, lifeline)`; exit code."""
    return Supervisor(listener, count, run, stop_timeout, others).serve()
