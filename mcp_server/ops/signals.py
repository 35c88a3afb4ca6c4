"""Which thread a stop signal reaches: the main thread alone, at once.

POSIX hands a process-directed signal to any thread that does not block it. CPython's C handler
then only sets a flag, and the Python handler runs on the main thread at its next bytecode: a
main thread asleep in a lock wait or a read is not woken, and the stop waits for whatever wakes
it next (an hour, in `stop.wait(3600)`). So every thread we start blocks SIGTERM and SIGINT: it
is created with them blocked (a new thread inherits its creator's mask), which leaves no moment
in which it could take one. The main thread alone unblocks them, and its wait is interrupted.

Windows has no signal masks and delivers no SIGTERM to a thread: nothing to do there.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Final

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


def start(thread: threading.Thread) -> None:
    """`thread.start()`, the new thread blocking stop signals from the first.

    A stop signal sent meanwhile waits, pending, and is delivered once the mask is restored.
    """
    if sys.platform == "win32":
        thread.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def block() -> None:
    """Block the stop signals here and in every thread started from now on."""
    if sys.platform != "win32":
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def unblock() -> None:
    """Let the stop signals reach this (main) thread again, its handlers set."""
    if sys.platform != "win32":
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
