"""The gateway's one client held to the same tests from both kinds of caller: one that blocks, one on a loop.

`gateway_driver` is parametrised: under "blocking", Gateway.call runs the call on the test
thread's own loop; under "loop", every Gateway.call a test makes is served by GatewayCall.arun on
an event loop running on a thread of its own (one loop for the test, so its pool lives as long
as the test's, as a server's lives as long as its loop), the test thread waiting for it. The
test's own code is unchanged: the same scenarios, the same assertions.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from mcp_server.ops.records import Attempt
from mcp_server.ops.tracecontext import Trace
from mcp_server.upstream import aio, http1
from mcp_server.upstream.gateway import Gateway, GatewayRequest, Outcome
from mcp_server.wire.cancellation import Cancellation

WAIT = 60.0  # the longest a test's call may take on the loop, a net under every deadline


@pytest.fixture(params=["blocking", "loop"])
def gateway_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "blocking":
        yield "blocking"
        return
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="gateway-driver-loop", daemon=True)
    thread.start()

    def on_loop(
        self: Gateway,
        gateway_request: GatewayRequest,
        cancellation: Cancellation | None = None,
        on_retry: Callable[[int, str, float], None] | None = None,
        *,
        trace: Trace | None = None,
        observe: Callable[[Attempt], None] | None = None,
    ) -> Outcome:
        work = self.step(gateway_request, cancellation, on_retry, trace=trace, observe=observe).arun()
        return asyncio.run_coroutine_threadsafe(work, loop).result(WAIT)

    monkeypatch.setattr(Gateway, "call", on_loop)
    try:
        yield "loop"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.close()


class ClientEnd:
    """The client's end of a connected socket as the gateway client holds it (aio._Connection), driven from this thread.

    Its loop runs only while an answer is read (or the connection closed): what arrives between
    reads waits in the kernel, where the pool's check (http1.quiet) looks for it.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(self._held(sock))

    async def _held(self, sock: socket.socket) -> aio._Connection:
        _, wire = await self.loop.create_connection(lambda: aio._Wire(self.loop), sock=sock)
        return aio._Connection(wire)

    def read_response(self, max_head: int, max_body: int) -> http1.Response:
        return self.loop.run_until_complete(asyncio.wait_for(self.conn.read(max_body, max_head), WAIT))

    def quiet(self) -> bool:
        return self.conn.quiet()

    def close(self) -> None:
        """Abort the connection, as the client does, and let the loop finish closing it."""
        self.conn.close()
        self.loop.run_until_complete(asyncio.sleep(0))

    def end(self) -> None:
        self.close()
        self.loop.close()
