"""The conformance fixture server: the real dispatcher and Streamable HTTP transport, serving the fixture catalog.

    python -m tests.conformance.server --port 0

Binds 127.0.0.1 (the suite's DNS-rebinding scenario needs a loopback URL), prints one line,
`conformance fixture server on http://127.0.0.1:PORT/mcp`, to stdout, and serves until SIGTERM
or SIGINT. Test-only: the shipped server never lists these fixtures.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from mcp_server.core.protocol import Dispatcher
from mcp_server.transports.http import gate
from mcp_server.transports.http.server import McpHTTPServer
from tests.conformance.fixtures import fixture_catalog

HOST = "127.0.0.1"


def build_server(port: int = 0) -> McpHTTPServer:
    """The fixture catalog behind the real HTTP transport on 127.0.0.1:`port` (not yet serving)."""
    dispatcher = Dispatcher(fixture_catalog(), title="FairWins conformance fixtures")
    return McpHTTPServer((HOST, port), dispatcher, gate.Policy(loopback_bind=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.server", description="The conformance fixture server."
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--verbose", action="store_true", help="access log and protocol log on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = build_server(args.port)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="conformance-accept")
    thread.start()
    sys.stdout.write(f"conformance fixture server on {server.url}\n")
    sys.stdout.flush()
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.drain(5.0)
        thread.join(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
