"""What MCP Apps costs: tools/list and resources/read with and without the UI extension (issue 36).

    python3 -m bench.apps

In this process, the real dispatcher of the shipped catalogue (no gateway is called: listing
and reading a view never touch it), one request at a time: the encoded size of each answer and
its time, best of five runs of 2,000 calls, in microseconds. `legacy` is 2025-11-25 after an
`initialize` (a stdio session), `modern` is 2026-07-28 with the client capabilities in `_meta`.
A client declaring nothing is served the list it was before the views existed (plus the icons
every 2025-11-25 client gets: the first row, 2025-06-18, has none); one declaring the extension
gets `_meta.ui` on the four tools and may read the four views.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mcp_server.core.apps import UI_EXTENSION, UI_MIME_TYPE
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.fairwins import views
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import Request, dumps
from mcp_server.wire.versions import META_CAPABILITIES, META_CLIENT_INFO, META_VERSION

UI: dict[str, Any] = {"extensions": {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}}
CALLS = 2_000


def best(run: Callable[[], object]) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(CALLS):
            run()
        times.append((time.perf_counter() - start) / CALLS)
    return min(times) * 1e6


def main() -> int:
    dispatcher = Dispatcher(build_catalog(Gateway("http://127.0.0.1:9", timeout=1.0)))

    def legacy_session(caps: dict[str, Any], version: str) -> Session:
        session = Session()
        init = {"protocolVersion": version, "capabilities": caps, "clientInfo": {"name": "b", "version": "0"}}
        dispatcher.handle(Request(0, "initialize", init), session, RequestContext())
        return session

    def legacy(
        caps: dict[str, Any], method: str, params: dict[str, Any], version: str = "2025-11-25"
    ) -> Callable[[], bytes]:
        session = legacy_session(caps, version)
        return lambda: bytes(dumps(dispatcher.handle(Request(1, method, params), session, RequestContext()).message))

    def modern(caps: dict[str, Any], method: str, params: dict[str, Any]) -> Callable[[], bytes]:
        meta = {META_VERSION: "2026-07-28", META_CAPABILITIES: caps, META_CLIENT_INFO: {"name": "b", "version": "0"}}
        full = {**params, "_meta": meta}
        return lambda: bytes(
            dumps(dispatcher.handle(Request(1, method, full), Session(http=True), RequestContext()).message)
        )

    view = views.VIEWS[0].uri
    print(f"{'request':<46}{'bytes':>10}{'µs':>10}")
    # Before icons existed (2025-06-18): what the icons add to every 2025-11-25 tools/list.
    run = legacy({}, "tools/list", {}, "2025-06-18")
    print(f"{'2025-06-18 tools/list (no icons)':<46}{len(run()):>10}{best(run):>10.1f}")
    for era, make in (("legacy", legacy), ("modern", modern)):
        for label, caps in (("no extension", {}), ("UI extension", UI)):
            for method, params in (("tools/list", {}), ("resources/list", {}), ("resources/read", {"uri": view})):
                run = make(caps, method, params)
                size = len(run())
                print(f"{era + ' ' + method + ' (' + label + ')':<46}{size:>10}{best(run):>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
