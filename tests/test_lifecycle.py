"""The connection's lifecycle table (http/lifecycle.py), fed events, no socket.

Each test is one order of events a client can make happen, and what the table says of it: where
an end falls among the client's bytes decides whether a waiting call is cancelled
(docs/architecture.md, "An end's place decides"), a reset always cancels, a refusal that closes
lingers, and a passed deadline means what the phase says.
"""

from __future__ import annotations

import pytest

from mcp_server.transports.http.lifecycle import CANCEL, Deadline, Lifecycle, Phase, Side


def _no_end() -> bool:
    return False


def _end_next() -> bool:
    return True


def _no_peek() -> bool:
    raise AssertionError("the kernel was peeked at when the answer did not depend on it")


def test_an_end_while_a_call_waits_with_nothing_unread_is_the_client_leaving() -> None:
    life = Lifecycle()
    life.reading()
    assert life.call_begins(unread=False, end_next=_no_end)
    assert life.end(unread=False) is CANCEL
    assert life.ended and not life.lost
    assert not life.watched, "a call is cancelled once"


def test_a_reset_cancels_a_waiting_call_even_when_the_client_pipelined() -> None:
    life = Lifecycle()
    assert life.call_begins(unread=True, end_next=_no_peek)
    assert life.received()
    assert life.reset() is CANCEL
    assert life.lost and life.ended


def test_a_reset_before_the_call_began_cancels_it_at_once_and_it_is_not_watched() -> None:
    life = Lifecycle()
    assert not life.reset(), "no call waits: nothing to cancel"
    assert not life.call_begins(unread=False, end_next=_no_peek)
    assert not life.watched


def test_an_end_read_before_the_call_began_came_with_the_request() -> None:
    # `nc -N`: the request, its end, then the wait for the answer.
    life = Lifecycle()
    assert not life.end(unread=True)
    assert life.call_begins(unread=False, end_next=_no_peek), "an end already read is not peeked for"
    assert life.side is Side.ENDED and life.watched


def test_an_end_next_in_the_kernel_when_the_call_begins_came_with_the_request() -> None:
    # The loop has not read the end yet: the peek finds it, and the transport's report of it later
    # is the same end, not a second one that would be the client leaving.
    life = Lifecycle()
    assert life.call_begins(unread=False, end_next=_end_next)
    assert life.ended
    assert not life.end(unread=False)
    assert life.watched


def test_bytes_during_a_call_are_a_client_that_pipelines_and_its_later_end_cancels_nothing() -> None:
    life = Lifecycle()
    life.call_begins(unread=False, end_next=_no_end)
    assert life.received()
    assert life.pipelined
    assert not life.end(unread=True)
    life.call_ends()
    # Its next call (the request it pipelined) begins after its end: still a batch, still answered.
    assert life.call_begins(unread=False, end_next=_no_peek)
    assert not life.end(unread=False)


def test_bytes_unread_when_the_call_begins_are_a_client_that_pipelines_and_no_peek_is_made() -> None:
    life = Lifecycle()
    assert life.call_begins(unread=True, end_next=_no_peek)
    assert life.pipelined
    assert not life.end(unread=False), "its end came behind a request not yet answered"


def test_an_end_behind_unread_bytes_is_a_half_close_even_of_a_client_that_never_pipelined() -> None:
    life = Lifecycle()
    life.call_begins(unread=False, end_next=_no_end)
    life.call_ends()
    life.call_begins(unread=False, end_next=_no_end)
    assert not life.end(unread=True)
    assert life.ended


def test_an_end_after_the_call_ended_cancels_nothing() -> None:
    life = Lifecycle()
    life.call_begins(unread=False, end_next=_no_end)
    life.call_ends()
    assert not life.end(unread=False)
    assert not life.reset()


def test_an_idle_connection_wakes_for_a_drain_and_a_busy_one_does_not() -> None:
    life = Lifecycle()
    assert life.drain_begins()
    life.reading()
    assert not life.drain_begins()
    life.answer_begins()
    assert not life.drain_begins()
    life.answer_ends()
    assert life.phase is Phase.IDLE and life.drain_begins()


@pytest.mark.parametrize(
    ("steps", "meaning"),
    [
        ((), Deadline.CLOSE),  # idle past its limit: closed quietly
        (("reading",), Deadline.REFUSE),  # the request did not arrive in time: 408
        (("reading", "answer_begins"), Deadline.ABORT),  # the client did not read its answer
        (("reading", "answer_begins", "reading"), Deadline.REFUSE),  # the body after "100 Continue"
        (("reading", "answer_begins", "answer_ends"), Deadline.CLOSE),  # idle again
        (("reading", "answer_begins", "lingers"), Deadline.CLOSE),  # done lingering
    ],
)
def test_a_passed_deadline_means_what_the_phase_says(steps: tuple[str, ...], meaning: Deadline) -> None:
    life = Lifecycle()
    for step in steps:
        getattr(life, step)()
    assert life.deadline() is meaning


def test_a_refusal_that_closes_lingers_and_then_drops_what_arrives() -> None:
    life = Lifecycle()
    life.reading()
    life.last_answer(linger=True)
    life.answer_begins()
    assert life.closing and life.linger
    assert life.received(), "bytes before the refusal is out are still the request's"
    life.lingers()
    assert not life.received()
    assert life.phase is Phase.LINGERING


def test_a_last_answer_that_does_not_linger_keeps_an_earlier_one_s_linger() -> None:
    life = Lifecycle()
    life.last_answer(linger=True)
    life.last_answer(linger=False)
    assert life.linger


def test_a_connection_cut_off_drops_what_arrives_and_is_closing() -> None:
    life = Lifecycle()
    life.answer_begins()
    life.aborted()
    assert not life.received()
    assert life.closing and life.phase is Phase.CLOSED
    assert life.deadline() is Deadline.CLOSE
