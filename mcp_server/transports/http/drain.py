"""The drain's clock (pure): how long each step of a stop may take.

A stop that a load balancer survives (docs/hosting.md, "Hosted mode"):

1. pre-stop (optional): /healthz answers 503 while everything else is served as usual, for
   balancers that poll health before they stop routing;
2. no new handshakes (listener.refuse_new); connections already queued are accepted and
   served, until none has arrived for `settle` seconds; then the listening socket closes;
3. every request that arrives on an open connection is answered, with `Connection: close`;
   an idle keep-alive connection is closed only once idle for `idle_grace` seconds, which is
   longer than the balancer keeps an idle upstream connection, so the balancer always closes
   first and never sends a request on a connection the server is closing;
4. done when every connection has closed, or `limit` seconds after step 3 began.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

IDLE_TIMEOUT: Final = 30.0  # an idle keep-alive connection is closed after this long, outside a drain
IDLE_GRACE: Final = 10.0  # while draining: once idle this long; a balancer's upstream keep-alive must be shorter
SETTLE: Final = 0.5  # after new handshakes stop: a quiet time longer than any round trip still completing one
SETTLE_LIMIT: Final = 5.0  # and at most this long, however many queued connections keep arriving


@dataclass(frozen=True, slots=True)
class Timings:
    idle_timeout: float = IDLE_TIMEOUT
    idle_grace: float = IDLE_GRACE
    prestop: float = 0.0
    requests: float = 15.0  # how long a request in flight may still take: the gateway deadline and some
    settle: float = SETTLE

    def idle_limit(self, draining: bool) -> float:
        """Seconds an idle keep-alive connection stays open after its last answer."""
        return min(self.idle_grace, self.idle_timeout) if draining else self.idle_timeout

    @property
    def limit(self) -> float:
        """How long connections may go on once the listener closed.

        A request may still arrive on a connection idle for up to the grace, and then take
        its time.
        """
        return self.idle_limit(True) + self.requests

    @property
    def total(self) -> float:
        """The longest a stop may take, pre-stop included: the wait before SIGKILL."""
        return self.prestop + SETTLE_LIMIT + self.limit
