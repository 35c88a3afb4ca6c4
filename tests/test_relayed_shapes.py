"""A readable answer is never called unreadable: the relayed reads in more than one shape (issue 48).

The gateway relays bodies from third parties (docs/gateway.md, "Pinned and relayed"): each public
read whose record names a source other than FairWins (assistant_contract's RELAYED), such as
Polymarket's markets, a perpetuals venue's pairs, a news vendor's items. The contract types them
only where this server relies on them, so each comes back as a result in the sandbox's shape, in
the source's own as published (Polymarket's `outcomes` and `outcomePrices` as JSON-encoded
strings) and in plain lists (`outcomes: ["Yes", "No"]` with `prices` beside them): in process,
then through the official Python SDK client and the TypeScript SDK client, over stdio and HTTP,
each validating structuredContent against the outputSchema it listed. An answer that still
misses the schema is said to be in a shape the contract does not describe, and its text is kept.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any, Final

import pytest

from assistant_contract import results
from assistant_contract.tools import RELAYED
from mcp_server.fairwins.outcomes import Wording, undescribed
from mcp_server.fairwins.snapshot import load
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from tests.conftest import NODE_TOOLS, ROOT, client_for, server_env
from tests.hosts import node, tool
from tests.mcp_http import serving
from tests.outputs import failure_facts
from tests.samples import VALID_ARGUMENTS
from tests.sandbox_gateway import RELAYED_SHAPES, SandboxGateway
from tests.test_sdk_client import sdk
from tests.test_shared_token import SDK_PYTHON


def gateway_path(entry: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The path a public read asks the gateway for: `{name}` from the argument (or its default), the rest as query."""
    properties = entry["inputSchema"].get("properties", {})
    rest = dict(arguments)

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return urllib.parse.quote(str(rest.pop(name, properties[name].get("default"))), safe="")

    path = re.sub(r"{(\w+)}", fill, entry["exec"]["path"])
    return path + (f"?{urllib.parse.urlencode(rest)}" if rest else "")


def relayed_calls() -> list[tuple[str, dict[str, Any], str]]:
    """Each relayed read, with no arguments when it needs none and with its sample arguments (tests/samples.py)."""
    entries = {t["name"]: t for t in load().tools}
    calls = []
    for name in sorted(RELAYED):
        sample = VALID_ARGUMENTS.get(name, {})
        needs = entries[name]["inputSchema"].get("required", [])
        choices: list[dict[str, Any]] = ([] if needs else [{}]) + ([sample] if sample else [])
        for arguments in choices:
            calls.append((name, arguments, gateway_path(entries[name], arguments)))
    return calls


# Each relayed read, and the gateway path it asks (the answer it must pass on unchanged): derived
# from the contract, so a new relayed read is walked here with no edit.
CALLS: Final = relayed_calls()
PY_HTTP: Final = ROOT / "tests" / "sdk" / "relayed_calls.py"
TS_CALLS: Final = ROOT / "tests" / "sdk" / "ts_calls.mjs"
TS_DIST: Final = ROOT / ".tools/inspector/node_modules/@modelcontextprotocol/client/dist/"


@pytest.fixture(params=RELAYED_SHAPES)
def gateway(request: pytest.FixtureRequest) -> Iterator[SandboxGateway]:
    with SandboxGateway(relayed=request.param) as started:
        yield started


def answers(gateway: SandboxGateway) -> list[Any]:
    """What the gateway itself answers to each call's path, read straight from it."""
    bodies = []
    for _, _, path in CALLS:
        with urllib.request.urlopen(gateway.url + path, timeout=10) as answered:
            bodies.append(json.load(answered))
    gateway.seen.clear()
    return bodies


def stdin() -> str:
    return "".join(json.dumps([name, arguments]) + "\n" for name, arguments, _ in CALLS)


def test_the_shapes_differ_where_the_old_contract_refused_them() -> None:
    # Not three names for one body: Polymarket's outcomes are a string, the plain ones names.
    seen: dict[str, dict[str, Any]] = {}
    for shape in RELAYED_SHAPES:
        with SandboxGateway(relayed=shape) as started:
            # Each tool's first call's answer (markets: the search without text).
            bodies = answers(started)
            seen[shape] = {}
            for (name, _, _), body in zip(CALLS, bodies, strict=True):
                seen[shape].setdefault(name, body)
    markets = {shape: bodies["get_prediction_markets"]["markets"][0] for shape, bodies in seen.items()}
    assert markets["source"]["outcomes"] == '["Yes", "No"]' and markets["plain"]["outcomes"] == ["Yes", "No"]
    assert markets["sandbox"]["outcomes"] == [{"name": "Yes", "price": "0.41"}, {"name": "No", "price": "0.59"}]
    assert json.loads(markets["source"]["outcomePrices"]) == ["0.41", "0.59"]
    assert markets["plain"]["prices"] == ["0.41", "0.59"]
    pairs = {shape: bodies["get_perps_pairs"]["pairs"][0] for shape, bodies in seen.items()}
    assert pairs["source"]["name"] == "BTC" and isinstance(pairs["plain"]["maxLeverage"], str)
    news = {shape: bodies["get_token_news"]["items"][0] for shape, bodies in seen.items()}
    assert news["source"]["source"] == {"title": "Sandbox Wire", "domain": "news.sandbox.invalid"}
    assert isinstance(news["plain"]["published_at"], int)


def test_every_relayed_read_of_the_contract_is_called_here() -> None:
    uncalled = set(RELAYED) - {name for name, _, _ in CALLS}
    assert not uncalled, f"tests/samples.py: VALID_ARGUMENTS has no arguments for {sorted(uncalled)}"
    assert set(RELAYED) <= {t["name"] for t in load().tools if t["exec"]["kind"] == "public"}


def test_each_relayed_read_in_each_shape_is_a_result_carrying_the_answer_unchanged(gateway: SandboxGateway) -> None:
    expected = answers(gateway)
    mcp = client_for(gateway.url)
    for (name, arguments, _), body in zip(CALLS, expected, strict=True):
        result = mcp.call_tool(name, arguments)
        assert result["isError"] is False, result["content"][0]["text"]
        assert result["structuredContent"] == body and json.loads(result["content"][0]["text"]) == body


def test_the_python_sdk_client_accepts_each_shape_over_stdio(gateway: SandboxGateway) -> None:
    expected = answers(gateway)
    report = sdk("calls", "legacy", sys.executable, stdin=stdin(), env=server_env(FAIRWINS_API_URL=gateway.url))
    assert "accepted" not in " ".join(report["misfits"])  # its validation bites
    for call, body in zip(report["calls"], expected, strict=True):
        assert "raised" not in call, call["raised"]
        assert call["isError"] is False and call["jsonschema"] == [] and call["structuredContent"] == body


def test_the_python_sdk_client_accepts_each_shape_over_http(gateway: SandboxGateway) -> None:
    assert SDK_PYTHON.exists(), f"the MCP Python SDK is not installed in {SDK_PYTHON.parent.parent}: run `make test`"
    expected = answers(gateway)
    with serving(build_dispatcher(Config(api_url=gateway.url, timeout=5.0))) as server:
        done = subprocess.run(
            [str(SDK_PYTHON), str(PY_HTTP), f"http://127.0.0.1:{server.server_address[1]}/mcp"],
            cwd=ROOT,
            input=stdin(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, f"the SDK session failed:\n{done.stdout}\n{done.stderr}"
    for call, body in zip(json.loads(done.stdout), expected, strict=True):
        assert "raised" not in call, call["raised"]
        assert call["isError"] is False and call["jsonschema"] == [] and call["structuredContent"] == body


def typescript(*target: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    tool("inspector")  # installs the pinned Inspector, whose Client is the TypeScript SDK's
    assert TS_DIST.exists(), f"the TypeScript SDK client is not at {TS_DIST}"
    done = subprocess.run(
        [node(), str(TS_CALLS), TS_DIST.as_uri() + "/", *target],
        cwd=ROOT,
        env=env,
        input=stdin(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the TypeScript client failed:\n{done.stdout}\n{done.stderr}"
    shown: list[dict[str, Any]] = json.loads(done.stdout)
    return shown


def assert_accepted(shown: list[dict[str, Any]], expected: list[Any]) -> None:
    for call, body in zip(shown, expected, strict=True):
        assert "thrown" not in call, call
        assert call["isError"] is False and call["structuredContent"] == body
        assert call["ajv"] is None and call["misfit"]  # the SDK's validator accepts it, and refuses a misfit


@NODE_TOOLS
def test_the_typescript_sdk_client_accepts_each_shape_over_http(gateway: SandboxGateway) -> None:
    expected = answers(gateway)
    with serving(build_dispatcher(Config(api_url=gateway.url, timeout=5.0))) as server:
        shown = typescript("http", f"http://127.0.0.1:{server.server_address[1]}/mcp")
    assert_accepted(shown, expected)


@NODE_TOOLS
def test_the_typescript_sdk_client_accepts_each_shape_over_stdio(gateway: SandboxGateway) -> None:
    expected = answers(gateway)
    shown = typescript("stdio", sys.executable, "-m", "mcp_server", env=server_env(FAIRWINS_API_URL=gateway.url))
    assert_accepted(shown, expected)


# ---- an answer that still misses the schema -------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ({"markets": [{"id": "1", "outcomes": '["Yes", "No"]'}]}, "markets[0].question", "is required"),
        ({"markets": [{"question": "Q?", "outcomes": 2}]}, "markets[0].outcomes", "must be a string, an array or null"),
        ({"data": []}, "markets", "is required"),
        ([{"question": "Q?"}], "", "must be an object"),
    ],
    ids=["no-question", "outcomes-a-number", "no-list", "a-bare-list"],
)
def test_a_markets_answer_outside_the_contract_is_named_undescribed_and_its_text_kept(
    body: object, field: str, expected: str
) -> None:
    with SandboxGateway() as started:
        started.fault("/v1/polymarket/137/markets", "status", status=200, body=body)
        result = client_for(started.url).call_tool("get_prediction_markets", {})
    facts = failure_facts(result, "undescribed_answer")
    assert facts.get("field", "") == field and facts["expected"] == expected and facts["status"] == 200
    sentence, text = (block["text"] for block in result["content"])
    where = f"`{field}`" if field else "the answer"
    assert sentence.startswith(
        "The gateway answered with the prediction markets (HTTP 200), but in a shape this server's contract "
        f"does not describe: {where} {expected}. Its answer follows as the gateway wrote it, unchecked"
    )
    assert "could not be read" not in sentence and "Could not read" not in sentence
    assert json.loads(text) == body


def test_a_body_that_is_not_json_is_still_unreadable() -> None:
    with SandboxGateway() as started:
        started.fault("/v1/perps/pairs", "status", status=200, body="<html>maintenance</html>")
        result = client_for(started.url).call_tool("get_perps_pairs", {})
    assert failure_facts(result, "unreadable_answer")["status"] == 200
    assert result["content"][0]["text"].startswith(
        "Could not read the perpetuals pairs: the gateway's answer could not"
    )
    assert len(result["content"]) == 1  # nothing read, so no text of the gateway's is passed on


def test_the_server_words_an_undescribed_answer_as_the_contract_does() -> None:
    wording = Wording.from_snapshot(load().wording)
    said = wording.say(undescribed("`markets[0].question` is required", 200), "the prediction markets")
    assert said == results.undescribed_sentence(
        "the prediction markets", "markets[0].question", "is required", status=200
    )
    whole = undescribed("the arguments must be an object", 200)
    assert whole.facts() == {"kind": "undescribed_answer", "status": 200, "expected": "must be an object"}
    assert wording.say(whole, "your wagers") == results.undescribed_sentence(
        "your wagers", "", "must be an object", status=200
    )


def polymarket_markets(n: int) -> dict[str, Any]:
    """`n` markets as Polymarket publishes each one: far over the size read whole, so read in pieces."""
    return {
        "chainId": 137,
        "q": None,
        "markets": [
            {
                "id": str(i),
                "question": f"Will market {i} resolve Yes?",
                "slug": f"market-{i}",
                "outcomes": '["Yes", "No"]',
                "outcomePrices": '["0.5", "0.5"]',
                "volume": "1000.5",
                "volumeNum": 1000.5,
                "endDate": None,
                "active": True,
            }
            for i in range(n)
        ],
    }


def test_a_large_answer_in_polymarkets_shape_is_read_in_pieces_and_passed_on() -> None:
    body = polymarket_markets(3000)
    with SandboxGateway() as started:
        started.fault("/v1/polymarket/137/markets", "status", status=200, body=body)
        result = client_for(started.url).call_tool("get_prediction_markets", {})
    assert result["isError"] is False and result["structuredContent"] == body


def test_a_large_answer_missing_a_question_in_its_1500th_market_is_named_at_that_market() -> None:
    body = polymarket_markets(3000)
    del body["markets"][1499]["question"]
    with SandboxGateway() as started:
        started.fault("/v1/polymarket/137/markets", "status", status=200, body=body)
        result = client_for(started.url).call_tool("get_prediction_markets", {})
    facts = failure_facts(result, "undescribed_answer")
    assert (facts["field"], facts["expected"]) == ("markets[1499].question", "is required")
    assert json.loads(result["content"][1]["text"]) == body
