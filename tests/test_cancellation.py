"""wire/cancellation.Cancellation: the switch every request carries, thrown from any thread."""

from __future__ import annotations

import threading

from mcp_server.wire.cancellation import Cancellation


def test_a_wait_wakes_when_another_thread_cancels() -> None:
    cancellation = Cancellation()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(cancellation.wait(30)))
    waiter.start()
    while cancellation._event is None:  # the waiter is about to sleep (or asleep) on its Event
        threading.Event().wait(0.001)
    cancellation.cancel()
    waiter.join(10)
    assert woke == [True] and cancellation.is_set


def test_a_wait_after_the_cancel_returns_at_once_and_one_without_times_out() -> None:
    thrown = Cancellation()
    thrown.cancel()
    assert thrown.wait(30) is True
    assert Cancellation().wait(0.01) is False


def test_callbacks_run_once_on_cancel_and_never_after_unregistering() -> None:
    cancellation = Cancellation()
    ran: list[str] = []
    cancellation.on_cancel(lambda: ran.append("kept"))
    forget = cancellation.on_cancel(lambda: ran.append("forgotten"))
    forget()
    cancellation.cancel()
    cancellation.cancel()  # a second throw does nothing
    assert ran == ["kept"]
    cancellation.on_cancel(lambda: ran.append("late"))  # registered after the throw: runs at once
    assert ran == ["kept", "late"]


def test_no_wait_misses_a_cancel_thrown_at_the_same_moment() -> None:
    # The Event is made lazily, by the first wait: a cancel racing that wait must still wake it.
    for _ in range(300):
        cancellation = Cancellation()
        start = threading.Barrier(2)
        woke: list[bool] = []

        def wait(c: Cancellation = cancellation, b: threading.Barrier = start, out: list[bool] = woke) -> None:
            b.wait()
            out.append(c.wait(10))

        waiter = threading.Thread(target=wait)
        waiter.start()
        start.wait()
        cancellation.cancel()
        waiter.join(15)
        assert woke == [True]
