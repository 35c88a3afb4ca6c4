"""How long one large answer holds the event loop: the longest wait of a 1 ms heartbeat beside it.

    python3 -m bench.hold                     markets and wagers, 1 and 4 MB, each token
    python3 -m bench.hold --sizes 4 --calls 9

In this process, no socket: the HTTP transport's own driver (transports/http/driver.py) runs a
tools/call on an event loop against a gateway transport that hands back one fixed body (as
bench.shapes builds them), then encodes the answer as routes.py does and walks its pieces as a
connection writes them. Beside it, a task that sleeps 1 ms at a time records how late each wake
is: the longest lateness is the longest the loop (or the interpreter lock it needs) was held.
The collector is set as the command line sets it for a serving process (ops/heap.py).
The same heartbeat with nothing beside it is the machine's own lateness (a shared machine's
scheduler, the collector), printed first. Each figure is the median over calls of that call's
longest lateness, and the worst. Standard library only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.runner import REPO
from bench.shapes import MB, SHAPES, _tool_and_token, body

HEARTBEAT_S = 0.001


class _FixedAsync:
    """A gateway transport on the loop that answers every request with one body."""

    def __init__(self, data: bytes) -> None:
        from mcp_server.upstream.gateway import GatewayResponse

        self.response = GatewayResponse(200, (("Content-Type", "application/json"),), data)

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        return self.response


async def _heartbeat(stop: asyncio.Event, late: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(HEARTBEAT_S)
        late.append((time.perf_counter() - t0 - HEARTBEAT_S) * 1000)


async def _one(dispatcher: Any, session: Any, params: dict[str, Any], token: str | None, pacing: Any) -> list[float]:
    from mcp_server.core.context import RequestContext
    from mcp_server.transports.http.driver import Run, drive, off_loop
    from mcp_server.wire.jsonrpc import Request, encode, pieces

    stop, late = asyncio.Event(), list[float]()
    beat = asyncio.create_task(_heartbeat(stop, late))
    await asyncio.sleep(0.005)
    late.clear()
    ctx = RequestContext(bearer=token, bearer_source="header") if token else RequestContext()
    run = Run()
    reply = await drive(dispatcher.handle_steps(Request(1, "tools/call", params), session, ctx), pacing, run)
    answer = reply.message
    parts = await off_loop(lambda: encode(answer), pacing) if run.heavy else encode(answer)
    for _ in pieces(parts):  # as a connection writes them, on the loop
        await asyncio.sleep(0)
    stop.set()
    await beat
    return late


async def _alone(seconds: float) -> list[float]:
    stop, late = asyncio.Event(), list[float]()
    beat = asyncio.create_task(_heartbeat(stop, late))
    await asyncio.sleep(seconds)
    stop.set()
    await beat
    return late


EXTRA_SHAPES = ("wagers exposed", "markets invalid")


def hold_body(shape: str, size_mb: float) -> bytes:
    """bench.shapes' body, or one of the exact path's: the bearer written back in the last wager
    (`wagers exposed`: searched and scrubbed by value), or the last market breaking the schema
    (`markets invalid`: doubted, so read whole and checked by the exact reading)."""
    from bench.sizes import RANDOM_TOKEN

    data = body(shape.split()[0], size_mb)
    if shape == "wagers exposed":
        at = data.rindex(b'"description":"') + len(b'"description":"')
        return data[:at] + RANDOM_TOKEN.encode() + b" " + data[at:]
    if shape == "markets invalid":
        at = data.rindex(b'"volume":"')
        return data[:at] + b'"volume":5,"was":"' + data[at + len(b'"volume":"') :]
    return data


def measure(shape: str, data: bytes, calls: int) -> list[float]:
    """The longest lateness of the heartbeat (ms) in each of `calls` calls."""
    from mcp_server.core.context import RequestContext
    from mcp_server.core.protocol import Dispatcher, Session
    from mcp_server.setup.server import build_catalog
    from mcp_server.transports.http.driver import Pacing
    from mcp_server.upstream.gateway import Gateway
    from mcp_server.wire.jsonrpc import Request

    gateway = Gateway("http://127.0.0.1:9", timeout=30.0, transport=_FixedAsync(data))
    dispatcher = Dispatcher(build_catalog(gateway))
    session = Session(http=True)
    init = Request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    dispatcher.handle(init, session, RequestContext())
    name, arguments, token = _tool_and_token(shape.replace("exposed", "random"))
    params = {"name": name, "arguments": arguments}

    pacing = Pacing()  # as a server's: one for all its calls

    async def all_calls() -> list[float]:
        worst = []
        for _ in range(calls + 1):
            late = await _one(dispatcher, session, params, token, pacing)
            worst.append(max(late, default=0.0))
        return worst[1:]  # the first compiles the verdicts

    try:
        return asyncio.run(all_calls())
    finally:
        pacing.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.hold", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1.0, 4.0], help="gateway answer sizes, MB")
    parser.add_argument("--shapes", nargs="+", default=[*SHAPES, *EXTRA_SHAPES], choices=[*SHAPES, *EXTRA_SHAPES])
    parser.add_argument("--calls", type=int, default=7)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from mcp_server.ops import heap

    heap.settle()  # the collector as the command line sets it for a serving process (ops/heap.py)
    alone = asyncio.run(_alone(1.0))
    print(f"heartbeat alone: lateness p50 {statistics.median(alone):.2f} ms, max {max(alone):.2f} ms")
    print(f"{'shape':16} {'gateway MB':>10} {'longest hold, median ms':>24} {'worst ms':>9}")
    for shape in args.shapes:
        for size in args.sizes:
            data = hold_body(shape, size)
            worst = measure(shape, data, args.calls)
            print(f"{shape:16} {len(data) / MB:10.2f} {statistics.median(worst):24.1f} {max(worst):9.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
