"""The one timer thread: an action that raises costs its own timer only; a thread that cannot go on ends the process."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mcp_server.ops import watchdog
from mcp_server.ops.watchdog import Watchdog
from tests.conftest import ROOT, WAIT, server_env


class Broken(Exception):
    """The injected failure."""


def test_an_action_that_raises_is_logged_once_with_its_traceback_and_later_deadlines_still_fire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timers = Watchdog()
    fired = threading.Event()

    def explode() -> None:
        raise Broken("the injected action failure")

    now = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="fairwins_mcp.watchdog"):
        timers.schedule(now, explode)
        timers.schedule(now + 0.05, fired.set)  # after the failure, on the same thread
        assert fired.wait(WAIT), "the timer thread stopped after an action raised"
        # And a deadline scheduled afterwards, when the thread is asleep again, fires too.
        again = threading.Event()
        timers.schedule(time.monotonic(), again.set)
        assert again.wait(WAIT)
    failures = [r for r in caplog.records if r.name == "fairwins_mcp.watchdog"]
    assert len(failures) == 1, [r.getMessage() for r in failures]
    assert failures[0].exc_info is not None and isinstance(failures[0].exc_info[1], Broken)
    assert "the other deadlines still hold" in failures[0].getMessage()


def test_a_cancelled_timer_does_not_fire_and_an_earlier_one_wakes_the_thread() -> None:
    timers = Watchdog()
    late, early, cancelled = threading.Event(), threading.Event(), threading.Event()
    now = time.monotonic()
    timers.schedule(now + 3600, late.set)
    timers.schedule(now + 0.01, cancelled.set).cancel()
    timers.schedule(now + 0.02, early.set)
    assert early.wait(WAIT)
    assert not cancelled.is_set() and not late.is_set()


# The timer thread's own clock raises (a seam of ours: Watchdog(clock=...)), in a process of its
# own, which must then exit non-zero at once rather than live on with no deadline holding.
_BROKEN_CLOCK = textwrap.dedent(
    """
    import threading, time
    from mcp_server.ops import logs
    from mcp_server.ops.watchdog import Watchdog

    logs.configure("info", "text")
    calls = []

    def clock():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("the injected clock failure")
        return time.monotonic()

    timers = Watchdog(clock=clock)
    fired = threading.Event()
    timers.schedule(time.monotonic(), fired.set)
    assert fired.wait({wait})
    timers.schedule(time.monotonic() + 3600, lambda: None)  # the clock's second reading raises
    threading.Event().wait({wait})
    print("still running: the timer thread died and the process lived on", flush=True)
    """
)


def test_a_timer_thread_that_cannot_go_on_exits_the_process_non_zero_with_a_sentence() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _BROKEN_CLOCK.format(wait=WAIT)],
        cwd=ROOT,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )
    assert done.returncode == watchdog.EXIT_CODE, (done.returncode, done.stdout, done.stderr)
    assert time.monotonic() - started < WAIT, "the process waited out its sleep instead of exiting at once"
    assert "still running" not in done.stdout
    assert "the watchdog's timer thread failed" in done.stderr
    assert "RuntimeError: the injected clock failure" in done.stderr  # the traceback, through the log writer
    assert done.stderr.count("the injected clock failure") == 1
