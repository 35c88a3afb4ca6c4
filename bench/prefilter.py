"""The credential prefilter on answers that hold no credential: what every verbatim answer pays (issue 31).

    python3 -m bench.prefilter

`Redactor.might_be_in` on get_wagers answers of about 2 KB and 250 KB that hold no piece of the
bearer: with no `%` and no `\\` (one folded view, the search exact), with JSON's escaped quotes
(a description quoting someone), with every non-ASCII character `\\u`-escaped (a writer with
ensure_ascii), and with URL escapes beside JSON's (both views of the definition). Best of five
runs, in this process; microseconds per answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from mcp_server.core.redaction import Redactor

TOKEN = "fw1.Zq8v/Kt3R+mXp7:LwYd=2NcB"


def wagers(count: int, said: str) -> dict[str, object]:
    items = [
        {
            "id": f"w-{100000 + i}",
            "stake": f"{i % 500}.{i % 100:02d}",
            "asset": ["USDC", "DAI"][i % 2],
            "deadline": f"2026-12-{i % 28 + 1:02d}T00:00:00Z",
            "status": ["open", "settled"][i % 2],
            "description": said,
        }
        for i in range(count)
    ]
    return {"asOf": "2026-11-29T20:00:00Z", "chains": [{"chainId": 137, "state": "read", "wagers": items}]}


def best(run: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - started) / calls)
    return min(times) * 1e6


def main() -> int:
    redactor = Redactor(TOKEN, None)
    said = {
        "no % and no \\": ("Lakers beat the Celtics, café crème", False),
        "JSON's \\\" escapes": ('they said "Lakers by 5", café crème', False),
        "\\u00e9 escapes": ("Lakers beat the Celtics, café crème", True),
        '%20 URLs and \\"': ('see https://x.example/a%20b%2Fc, "quoted"', False),
    }
    for count in (10, 1500):
        for name, (text, ascii_only) in said.items():
            body = json.dumps(wagers(count, text), separators=(",", ":"), ensure_ascii=ascii_only).encode()
            assert not redactor.might_be_in(body)
            spent = best(lambda body=body: redactor.might_be_in(body), 2000 if count < 100 else 40)
            print(f"{len(body):>8,d} B  {name:22s} {spent:10.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
