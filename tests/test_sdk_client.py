"""The official MCP Python SDK client (mcp 2.3.0, in .venv-sdk) against the shipped server over stdio.

Its client validates every successful result's structuredContent against the tool's outputSchema
(and raises when it does not fit); tests/sdk/session.py also validates every structuredContent it
sees, error results included, with jsonschema, as a strict client (the TypeScript SDK's) does.
`make test` installs the SDK first; without it these tests fail, naming the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Final

import pytest

from assistant_contract.export import SNAPSHOT_SCHEMA_PATH
from tests import catalog
from tests.conftest import ROOT, server_env, venv_python
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway

SDK_PYTHON: Final = venv_python(ROOT / ".venv-sdk")
SESSION: Final = ROOT / "tests" / "sdk" / "session.py"
TIMEOUT: Final = 120.0
INTENT: Final = {"intent": "create_wager", "chainId": 137, "params": {"stake": "5"}}
NEWS: Final = {"chainId": 137, "asset": "USDC", "slug": "usd-coin"}
FAILING_NEWS: Final = {"chainId": 137, "asset": "DOWN", "slug": "down"}

# Every served tool once with arguments it accepts (tests/samples.py), then a few more answers.
ANSWERED: Final = [
    *((name, VALID_ARGUMENTS.get(name, {})) for name in catalog.SERVED),
    ("get_wagers", {}),
    ("get_wagers", {"chainId": 8453}),
    ("build_intent", INTENT),
    ("get_prediction_markets", {"q": "ETH"}),
    ("get_token_news", NEWS),
]
MEMBER_CALLS: Final = [
    *ANSWERED,
    ("get_token_news", FAILING_NEWS),  # the gateway answers 503 unavailable
    ("get_wagers", {"chainId": 0}),  # invalid arguments
]
TOKENLESS_CALLS: Final = [
    ("get_wagers", {}),  # an x402 v1 price
    ("build_intent", INTENT),  # an x402 v2 price
    ("get_fees", {}),  # priceable, but the gateway answers 401: no token
    ("get_membership", {}),  # never priced: refused before any call
]


def sdk(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    done = subprocess.run(
        [str(SDK_PYTHON), str(SESSION), *args],
        cwd=ROOT,
        env=env or dict(os.environ),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"the SDK session failed:\n{done.stdout}\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def session(mode: str, calls: list[tuple[str, dict[str, Any]]], **env: str) -> dict[str, Any]:
    with SandboxGateway() as gateway:
        gateway.fault("/v1/news/137/DOWN", "status", status=503)
        stdin = "".join(json.dumps([name, arguments]) + "\n" for name, arguments in calls)
        return sdk("calls", mode, sys.executable, stdin=stdin, env=server_env(FAIRWINS_API_URL=gateway.url, **env))


@pytest.fixture(scope="module", params=["legacy", "auto"], ids=["handshake-2025-11-25", "discover-2026-07-28"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def member(mode: str) -> dict[str, Any]:
    return session(mode, MEMBER_CALLS, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)


@pytest.fixture(scope="module")
def tokenless(mode: str) -> dict[str, Any]:
    return session(mode, TOKENLESS_CALLS)


def test_every_tool_the_sdk_lists_has_an_output_schema_valid_in_draft_7_and_2020_12(member: dict[str, Any]) -> None:
    schemas = member["schemas"]
    assert sorted(schemas) == list(catalog.SERVED) and all(
        s is not None and s["type"] == "object" for s in schemas.values()
    )


def test_the_sdk_accepts_every_answer_and_every_failure_of_a_member_session(member: dict[str, Any]) -> None:
    calls = member["calls"]
    assert [c["name"] for c in calls] == [name for name, _ in MEMBER_CALLS]
    assert not [c for c in calls if "raised" in c], "the SDK client refused a result"
    assert all(c["jsonschema"] == [] for c in calls), [c for c in calls if c["jsonschema"]]
    answers, failures = calls[: len(ANSWERED)], calls[len(ANSWERED) :]
    assert all(c["isError"] is False and c["structuredContent"] for c in answers)
    assert failures[0]["isError"] and failures[0]["structuredContent"] == {
        "kind": "unavailable",
        "status": 503,
        "code": "unavailable",
    }
    assert "(HTTP 503, unavailable)" in failures[0]["text"]
    assert failures[1]["isError"] and failures[1]["structuredContent"] == {"kind": "invalid_arguments"}


def test_the_sdk_refuses_what_breaks_the_schemas_it_was_given(member: dict[str, Any]) -> None:
    assert member["misfits"] and all(m.startswith("refused: Invalid structured content") for m in member["misfits"])


def test_the_sdk_accepts_prices_and_refusals_without_a_token(tokenless: dict[str, Any]) -> None:
    calls = {c["name"]: c for c in tokenless["calls"]}
    assert not [c for c in calls.values() if "raised" in c], "the SDK client refused a result"
    assert all(c["isError"] is True and c["jsonschema"] == [] for c in calls.values())
    assert calls["get_wagers"]["structuredContent"]["x402Version"] == 1
    assert calls["build_intent"]["structuredContent"]["x402Version"] == 2
    assert calls["get_fees"]["structuredContent"] == {"kind": "no_token", "status": 401, "code": "invalid_token"}
    assert calls["get_membership"]["structuredContent"] == {"kind": "no_token"}


def test_the_sdk_client_receives_progress_with_a_real_total(member: dict[str, Any]) -> None:
    wagers = next(c for c in member["calls"] if c["name"] == "get_wagers")
    assert wagers["progress"] == [[0, 1, "Reading your wagers…"], [1, 1, "The gateway answered."]]


def test_the_snapshot_validates_against_its_format_schema_with_jsonschema() -> None:
    verdict = sdk("format", str(ROOT / "toolDefs.snapshot.json"), str(SNAPSHOT_SCHEMA_PATH))
    assert verdict == {"problems": [], "refuses_a_long_description": True}
