"""The server's tables, as mcp_server.fairwins.snapshot loads them, equal assistant_contract's, in both directions.

The only test module that imports both packages: the server itself never imports the contract.
"""

from __future__ import annotations

from typing import Any

import pytest

from assistant_contract import ALL_SCOPES, DESCRIPTION_MAX, OUTPUT_SCHEMAS, PUBLIC_PATHS, ROUTES, TOOL_DEFS, results
from mcp_server.fairwins.outcomes import Failure, Wording, chain_notes
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import BUILD_INTENT, build_tools
from mcp_server.upstream.gateway import Gateway
from tests import wording

SNAP = load()
WORDING = Wording.from_snapshot(SNAP.wording)


def both_ways(server: dict[str, Any], contract: dict[str, Any], what: str) -> None:
    only_server = sorted(set(server) - set(contract))
    only_contract = sorted(set(contract) - set(server))
    assert not only_server, f"{what} only the server has: {only_server}"
    assert not only_contract, f"{what} only the contract has: {only_contract}"
    for key in contract:
        assert server[key] == contract[key], f"{what} {key!r} differs"


def test_route_paths_equal_the_contract_routes() -> None:
    both_ways(SNAP.route_paths, {rid: r["path"] for rid, r in ROUTES.items()}, "route")


def test_route_methods_scopes_and_prices_equal_the_contract_routes() -> None:
    both_ways(SNAP.routes, {rid: dict(r) for rid, r in ROUTES.items()}, "route")


def test_public_paths_and_scopes_equal_the_contract() -> None:
    assert SNAP.public_paths == PUBLIC_PATHS
    assert SNAP.scopes == ALL_SCOPES


def test_the_unknown_sentence_equals_the_contract() -> None:
    assert SNAP.wording["unknown"] == results.UNKNOWN_SENTENCE
    assert WORDING.unknown == results.UNKNOWN_SENTENCE


def test_state_phrases_equal_the_contract() -> None:
    both_ways(SNAP.wording["statePhrases"], results.STATE_PHRASES, "state phrase")


def test_the_chain_sentence_equals_the_contract() -> None:
    assert SNAP.wording["chainUnknown"] == results.CHAIN_UNKNOWN


def test_failure_sentences_equal_the_contract() -> None:
    both_ways(SNAP.wording["failures"], results.FAILURE_SENTENCES, "failure sentence")


def test_the_http_slot_and_the_code_pattern_equal_the_contract() -> None:
    both_ways(SNAP.wording["httpFacts"], results.HTTP_FACTS, "HTTP facts template")
    assert SNAP.wording["errorCodePattern"] == results.ERROR_CODE_PATTERN


@pytest.mark.parametrize("cause", sorted(results.FAILURE_SENTENCES))
@pytest.mark.parametrize(
    ("status", "code"), [(None, None), (503, None), (503, "unavailable"), (404, "not found <b>"), (200, None)]
)
def test_each_failure_the_server_renders_is_the_contracts_sentence(
    cause: str, status: int | None, code: str | None
) -> None:
    slots = {"detail": ": why", "scope": "read:wagers", "wait": "; retry after 3 s"}
    expected = results.failure_sentence(cause, "your wagers", status=status, code=code, **slots)
    failure = Failure(cause, status, code, **slots)
    assert WORDING.say(failure, "your wagers") == expected
    assert WORDING.failure(cause, "your wagers", status=status, code=code, **slots) == expected
    assert expected.endswith(" " + results.UNKNOWN_SENTENCE)


def test_chain_notes_use_the_contract_sentence_and_phrases() -> None:
    envelope = {
        "chains": [{"chainId": 8453, "state": "unreadable", "reason": "r"}, {"chainId": 1, "state": "not-configured"}]
    }
    assert chain_notes(envelope, WORDING) == [
        results.CHAIN_UNKNOWN.format(chain_id=8453, phrase=results.STATE_PHRASES["unreadable"], reason=" (r)"),
        results.CHAIN_UNKNOWN.format(chain_id=1, phrase=results.STATE_PHRASES["not-configured"], reason=""),
        results.UNKNOWN_SENTENCE,
    ]


def test_every_served_tool_calls_what_the_contract_says_it_executes() -> None:
    served = {t.name: t for t in build_tools(SNAP, Gateway(None), WORDING)}
    contract = {t["name"]: t for t in TOOL_DEFS if t["exec"]["kind"] != "local"}
    assert set(served) == set(contract) | {"build_intent"}
    for name, tool in contract.items():
        ex = tool["exec"]
        if ex["kind"] == "route":
            route = ROUTES[ex["route"]]
            assert (served[name].method, served[name].path_template) == (route["method"], route["path"]), name
            assert served[name].public is False
        else:
            assert ex["path"] in PUBLIC_PATHS
            assert (served[name].method, served[name].path_template) == ("GET", ex["path"]), name
            assert served[name].public is True


def test_build_intent_is_the_servers_own_and_calls_the_contracts_build_route() -> None:
    assert "build_intent" not in {t["name"] for t in TOOL_DEFS}
    route = ROUTES[BUILD_INTENT["exec"]["route"]]
    assert (route["method"], route["path"], route["scope"]) == (
        "POST",
        "/v1/member/intents/build",
        BUILD_INTENT["scope"],
    )


def test_build_intent_states_each_rule_once_within_the_contracts_length() -> None:
    # The server's own tool is held to the contract's description rules, as every table tool is.
    assert not wording.repeated(BUILD_INTENT["description"])
    assert len(BUILD_INTENT["description"]) <= DESCRIPTION_MAX


def test_build_intent_answers_with_the_contracts_schema_for_its_route() -> None:
    (served,) = [t for t in build_tools(SNAP, Gateway(None), WORDING) if t.name == "build_intent"]
    assert served.definition()["outputSchema"] == OUTPUT_SCHEMAS[BUILD_INTENT["exec"]["route"]]
