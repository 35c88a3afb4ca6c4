"""The small writes of a loop's turn, sent together once its work is done.

Each send wakes the process reading the other end (the client, a proxy, the gateway) and, on
loopback, its other core; a send in the middle of the turn's other work finds that reader asleep
again by the next one. Held until the turn's work is done and then sent back to back, they reach
readers still awake from the first: the same bytes and the same number of sends, for less CPU
(BENCHMARKS.md, "Issue 50, fifth look").

An answer waits at most what is left of its turn (the callback runs first in the next one,
before the ready sockets that turn reads), and never behind more than HOLD_CONNECTIONS others: a
busy turn (a crowd's, hundreds of answers long) sends them in batches as it goes, each batch
still back to back. A large write is not held: it is sent at once, after whatever its connection
holds, so each connection's bytes keep their order (see `Held`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Final, Protocol

log = logging.getLogger("fairwins_mcp.http")

# Writes up to this size are held to the end of the turn; a larger one (a slice of a large answer)
# is worth its send alone, and is paced by the transport's flow control, which must see it.
HOLD_MAX: Final = 64 * 1024
# Connections held at once: past this many the outbox sends them all then and there. The wake-up
# a batch shares is paid once whatever its size; an answer made early in a long turn waits for
# at most this many others' work (about 17 ms of it at a crowd's 0.27 ms a call), not the turn's.
HOLD_CONNECTIONS: Final = 64


class Held(Protocol):
    """A connection holding bytes: a write is held or sent after, never before."""

    def send_held(self) -> None:
        """Hand what is held to the transport (nothing if the connection is gone)."""
        ...

    def abort(self) -> None: ...


class Outbox:
    """A loop's connections holding bytes, sent once the turn's work is done."""

    __slots__ = ("_holding", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: the loop is this outbox's key in `_outboxes`, which a strong reference from its
        # value would keep for ever.
        self._loop = weakref.ref(loop)
        self._holding: list[Held] = []
        self._scheduled = False

    def hold(self, held: Held) -> None:
        """`held` holds bytes, sent as the turn ends or at the HOLD_CONNECTIONS-th."""
        self._holding.append(held)
        if len(self._holding) >= HOLD_CONNECTIONS:
            self._send_all()
        elif not self._scheduled:
            loop = self._loop()
            if loop is None:
                return  # no loop any more: nothing of it will run, and its connections are gone
            self._scheduled = True
            loop.call_soon(self._turn_done)

    def _turn_done(self) -> None:
        self._scheduled = False
        self._send_all()

    def _send_all(self) -> None:
        holding, self._holding = self._holding, []
        for held in holding:
            try:
                held.send_held()
            except Exception as exc:
                # One connection's send failed in a way its transport did not report (a bug): that
                # connection is cut off, and every other still gets its bytes. The text, not the
                # exception: a record kept a while would keep the connection through its traceback.
                log.error("sending a connection's held bytes failed; it is cut off: %r", exc)
                try:
                    held.abort()
                except Exception as again:
                    log.debug("the connection could not be cut off either: %r", again)


def taken(held: list[bytes]) -> bytes:
    """What a connection holds as one piece for one write; `held` is emptied."""
    data = held[0] if len(held) == 1 else b"".join(held)
    held.clear()
    return data


_outboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Outbox] = weakref.WeakKeyDictionary()


def outbox(loop: asyncio.AbstractEventLoop) -> Outbox:
    """`loop`'s outbox, shared by its client and gateway connections."""
    found = _outboxes.get(loop)
    if found is None:
        found = _outboxes[loop] = Outbox(loop)
    return found
