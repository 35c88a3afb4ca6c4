"""One connection's lifecycle as a table: events in, what they mean out.

Sans-I/O, in the manner of h11's state table and of reader.py beside it: nothing here touches a
socket or a clock. The connection (connection.py) feeds each event the loop reports (bytes, the
client's end, a reset), each step of its own (a request begins, a call begins and ends, an answer
begins and ends, a refusal that closes, a drain, a deadline passed), and does what the answer says.

Two sides, as h11 keeps them: the client's (`Side`) and ours (`Phase`); beside them, the watched
call (a request whole and waiting for a call slot or its call) and whether the client pipelines.

An end's place among the client's bytes decides what it says (docs/architecture.md, "An end's
place decides"): an end that had come by the moment a request was whole (read, or next in the
kernel: `end_next`) came with it, and an end behind requests not yet answered (the client
pipelined) came with them: both are a half-close, and every request sent before it is answered.
An end that comes later, while a request waits with nothing of the client's unread before it, is
the client leaving, as is a reset at any time: the watched call is cancelled (`CANCEL`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable


class Side(enum.Enum):
    """The client's sending side."""

    OPEN = "open"
    ENDED = "ended"  # its end was read: it sends nothing more (a half-close, or leaving)
    LOST = "lost"  # the connection is gone: reset, or closed under us; nothing more can be written


class Phase(enum.Enum):
    """Ours: what the connection is doing."""

    IDLE = "idle"  # waiting for the next request (or the first)
    READING = "reading"  # a request has begun: it must be whole by the read deadline
    ANSWERING = "answering"  # an answer is written: it must be out by the write deadline
    LINGERING = "lingering"  # after a refusal that closes: the rest is read and dropped
    CLOSED = "closed"


class Deadline(enum.Enum):
    """What a passed deadline means, by phase."""

    CLOSE = "close"  # idle past its limit, or done lingering: closed quietly, as keep-alive clients expect
    REFUSE = "refuse"  # the request did not arrive in time: 408, and closed
    ABORT = "abort"  # the client did not read its answer in time: cut off (a reset)


CANCEL = True  # what `ended` and `reset` return when the watched call's client left: cancel it


class Lifecycle:
    """One connection's state: fed events, it says what they mean."""

    # Slots: an idle keep-alive connection holds one, and thousands of them may be open at once.
    __slots__ = ("closing", "dropping", "linger", "phase", "pipelined", "side", "watched")

    def __init__(self) -> None:
        self.side = Side.OPEN
        self.phase = Phase.IDLE
        self.watched = False  # a call waits (for a slot, or its answer): its client's leaving cancels it
        # The client sent a request before its last was answered: a batch, not a client waiting on
        # one call, so its end says only that it will send no more (its reset still cancels).
        self.pipelined = False
        self.closing = False  # the answer being written is the connection's last
        self.linger = False  # close in stages after it: the refusal's request may still be arriving
        self.dropping = False  # whatever arrives is dropped (lingering, or cut off)

    @property
    def ended(self) -> bool:
        """Whether the client sends nothing more (ENDED or LOST)."""
        return self.side is not Side.OPEN

    @property
    def lost(self) -> bool:
        return self.side is Side.LOST

    # ---- the client's events ----------------------------------------------------------------

    def received(self) -> bool:
        """Bytes arrived; False when they are to be dropped."""
        if self.dropping:
            return False
        if self.watched:
            self.pipelined = True  # the next request came while a call waited
        return True

    def end(self, unread: bool) -> bool:
        """The client's end was read; CANCEL when the watched call's client leaves.

        `unread`: bytes of the client's not yet served came before it (it is a half-close).
        """
        first = self.side is Side.OPEN
        if first:
            self.side = Side.ENDED
        return first and not self.pipelined and not unread and self._leave()

    def reset(self) -> bool:
        """The connection is gone (reset, or closed); CANCEL if a call was watched."""
        self.side = Side.LOST
        return self._leave()

    def _leave(self) -> bool:
        watched, self.watched = self.watched, False
        return watched

    # ---- ours ---------------------------------------------------------------------------------

    def reading(self) -> None:
        """A request is read: from its first byte, its body after "100 Continue"."""
        self.phase = Phase.READING

    def call_begins(self, unread: bool, end_next: Callable[[], bool]) -> bool:
        """A whole request's call waits, its client watched; False if gone.

        A client already gone has its call cancelled at once, and is not watched. `unread`:
        bytes of the client's are here after the request (it pipelines). `end_next` says
        whether the client's end is next in the kernel, not yet read (a peek, asked only when
        the answer depends on it): an end that has come by now came with the request.
        """
        if self.side is Side.LOST:
            return False
        if unread:
            self.pipelined = True
        elif self.side is Side.OPEN and end_next():
            self.side = Side.ENDED
        self.watched = True
        return True

    def call_ends(self) -> None:
        """Nothing is left to cancel: the client's leaving from now ends no call."""
        self.watched = False

    def answer_begins(self) -> None:
        self.phase = Phase.ANSWERING

    def last_answer(self, linger: bool) -> None:
        """The next answer is the last; `linger`: close in stages after it."""
        self.closing = True
        self.linger = self.linger or linger

    def answer_ends(self) -> None:
        """The request is over (answered, or its client gone); the next is awaited."""
        if self.phase is Phase.READING or self.phase is Phase.ANSWERING:
            self.phase = Phase.IDLE

    def lingers(self) -> None:
        """The refusal is out, our half closed: what arrives is read and dropped."""
        self.phase = Phase.LINGERING
        self.dropping = True

    def aborted(self) -> None:
        """Cut off here: nothing more is read or written."""
        self.closing = True
        self.dropping = True
        self.phase = Phase.CLOSED

    def closed(self) -> None:
        self.closing = True
        self.phase = Phase.CLOSED

    def drain_begins(self) -> bool:
        """A drain begins: True if the connection idles (it re-reads its limit)."""
        return self.phase is Phase.IDLE

    def deadline(self) -> Deadline:
        """A deadline of the phase passed."""
        if self.phase is Phase.READING:
            return Deadline.REFUSE
        if self.phase is Phase.ANSWERING:
            return Deadline.ABORT
        return Deadline.CLOSE
