"""Each answer is held to what docs/gateway.md documents and no tighter (issue 31, point 6).

A real gateway echoes the search text of a markets search made without one as `"q": null`;
docs/gateway.md guarantees no field of a public read, and says `q` may be null.
"""

from __future__ import annotations

import json
import sys
from typing import Final

from tests.conftest import server_env
from tests.sandbox_gateway import SandboxGateway
from tests.test_sdk_client import sdk

MARKETS: Final = "/v1/polymarket/137/markets"


def test_a_markets_search_without_text_reads_a_gateway_that_echoes_q_as_null() -> None:
    body = {"chainId": 137, "q": None, "markets": [{"id": "pm-101", "question": "Will ETH close above $5,000?"}]}
    with SandboxGateway() as gateway:
        gateway.fault(MARKETS, "status", status=200, body=json.dumps(body))
        report = sdk(
            "calls",
            "legacy",
            sys.executable,
            stdin=json.dumps(["get_prediction_markets", {}]) + "\n",
            env=server_env(FAIRWINS_API_URL=gateway.url, SDK_CALL_TIMEOUT="30"),
        )
        (seen,) = gateway.seen
    assert seen.path == MARKETS and "q=" not in seen.query  # a search without text
    (call,) = report["calls"]
    assert "raised" not in call, call["raised"]
    assert call["isError"] is False and call["jsonschema"] == []
    assert call["structuredContent"] == body
