"""Who gets a connection: the bound, per-peer caps, a health-check reserve.

Pure bookkeeping behind one lock (no sockets): the server asks `connect(peer)` on accept and
`head_started(peer)` when a request head begins to arrive, and gives both back when done. A peer
is a client address; behind a reverse proxy every request comes from the proxy's one address, so
there the per-peer caps are set to 0 (off) and the proxy keeps its own per-client limits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final, Literal

HEALTH_RESERVE: Final = 8  # connections beyond the bound that may only ask GET /healthz
# A request over the in-flight bound waits this long for a slot before it is refused (503): a burst
# is absorbed while calls finish, and a stalled gateway does not hold the queue for ever.
SLOT_WAIT: Final = 2.0


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int  # open connections, all peers together
    max_peer_connections: int = 0  # open connections of one peer (0: no per-peer cap)
    max_peer_heads: int = 0  # request heads of one peer arriving at once, not yet whole (0: no cap)
    health_reserve: int = HEALTH_RESERVE


@dataclass(frozen=True, slots=True)
class Turned:
    """A connection refused on accept, and its answer: status, code, sentence."""

    status: int
    error: str
    message: str


Slot = Literal["main", "reserve"]

PEER_FULL: Final = Turned(429, "too_many_connections", "Too many connections from this address; retry shortly")
HEADS_FULL: Final = Turned(
    429, "too_many_unfinished_requests", "Too many unfinished requests from this address; finish one first"
)
BUSY: Final = Turned(503, "busy", "Too many connections; retry shortly")


class Admission:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._open = 0  # main slots in use
        self._reserve = 0
        self._peers: dict[str, list[int]] = {}  # peer → [connections, unfinished heads]

    @property
    def connections(self) -> int:
        with self._lock:
            return self._open + self._reserve

    def connect(self, peer: str) -> Slot | Turned:
        """The slot a new connection from `peer` takes, or its refusal."""
        limits = self.limits
        with self._lock:
            counts = self._peers.get(peer)
            if counts is not None and 0 < limits.max_peer_connections <= counts[0]:
                return PEER_FULL
            if self._open < limits.max_connections:
                self._open += 1
                slot: Slot = "main"
            elif self._reserve < limits.health_reserve:
                self._reserve += 1
                slot = "reserve"
            else:
                return BUSY
            if counts is None:
                self._peers[peer] = [1, 0]
            else:
                counts[0] += 1
            return slot

    def disconnect(self, peer: str, slot: Slot) -> None:
        with self._lock:
            if slot == "main":
                self._open -= 1
            else:
                self._reserve -= 1
            counts = self._peers[peer]
            counts[0] -= 1
            if counts[0] == 0 and counts[1] == 0:
                del self._peers[peer]

    def head_started(self, peer: str) -> bool:
        """Count a request head begun by `peer`; False past its cap."""
        with self._lock:
            counts = self._peers[peer]
            if 0 < self.limits.max_peer_heads <= counts[1]:
                return False
            counts[1] += 1
            return True

    def head_done(self, peer: str) -> None:
        """That head is whole, refused, or its connection gone."""
        with self._lock:
            counts = self._peers[peer]
            counts[1] -= 1
