"""A 4 MB answer whose last item is long, beside an ordinary 4 MB answer: CPU per tools/call.

    python3 -m bench.long_item [--calls N] [--json PATH]

Issue 31, finding 7: the chunked reader (mcp_server.core.answers) searched for the next "}, {"
with no end bound and never moved its start forward when nothing was found, so each item before
a long last one rescanned the whole rest of the answer. Both answers here are one read chain of
the envelope of docs/gateway.md (so nothing follows the last wager), just under the server's 4 MiB cap:
ORDINARY is some 22,500 wagers of about 170 bytes; LONG is 2,000 of them, the last of which
holds a 3.5 MB description with a "}" every 19 characters (a smiley: the search stops at each).

Our server runs over stdio (a fresh process per answer, `python -m mcp_server`) against a
gateway served from this process on 127.0.0.1 that answers every call with the one body. CPU per
call is the server process's own (utime + stime, /proc), the median over calls after two
warm-up calls. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.runner import REPO, StdioSession, child_env, cpu_ms, initialize_params, rounded
from bench.stub_gateway import wagers

CAP = 4 * 1024 * 1024  # the server's default response cap (bytes)
TOKEN = "fw1.bench-long-item-0000"


def one_chain(count: int) -> Any:
    """the envelope of docs/gateway.md with one read chain of `count` wagers: no "}, {" after its last one."""
    value: Any = wagers(count)
    value["chains"] = value["chains"][:1]
    return value


def ordinary() -> bytes:
    """Wagers up to just under the cap."""
    body = json.dumps(one_chain(22_500), separators=(",", ":")).encode()
    assert len(body) < CAP, len(body)
    return body


def long_last() -> bytes:
    """2,000 wagers, the last one's description long enough to bring the answer to the same size."""
    value = one_chain(2_000)
    rows = value["chains"][0]["wagers"]
    short = len(json.dumps(value, separators=(",", ":")))
    rows[-1]["description"] = "closing braces :-} " * ((len(ordinary()) - short) // 19)
    body = json.dumps(value, separators=(",", ":")).encode()
    assert len(body) < CAP, len(body)
    return body


class _Gateway(BaseHTTPRequestHandler):
    body = b""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def cpu_per_call(body: bytes, calls: int) -> dict[str, Any]:
    handler = type("Gateway", (_Gateway,), {"body": body})
    gateway = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    session = StdioSession("ours", [sys.executable, "-m", "mcp_server"], child_env(url, TOKEN))
    try:
        session.request("initialize", initialize_params())
        session.notify("notifications/initialized")
        samples: list[float] = []
        for n in range(calls + 2):
            before = cpu_ms(session.pid)
            answer, _ = session.request("tools/call", {"name": "get_wagers", "arguments": {}})
            after = cpu_ms(session.pid)
            if answer.get("result", {}).get("isError") is not False:
                raise SystemExit(f"the call failed: {json.dumps(answer)[:300]}")
            if n >= 2:
                samples.append(after - before)
        return {"bytes": len(body), "cpu_ms_median": statistics.median(samples), "cpu_ms": samples}
    finally:
        session.close()
        gateway.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "long_item.json")
    args = parser.parse_args(argv)
    results = {"ordinary": cpu_per_call(ordinary(), args.calls), "long_last": cpu_per_call(long_last(), args.calls)}
    for name, got in results.items():
        print(f"{name:>9}: {got['bytes'] / 1e6:.2f} MB, {got['cpu_ms_median']:.0f} ms of CPU per call (median)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rounded(results), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
