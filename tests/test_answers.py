"""Answers passed on as the gateway wrote them: each fast path vouches only for what the exact one accepts.

A 2xx answer is read in pieces and checked as it is read (answers.Reader, schema.compile_bulk),
searched for the call's credentials on its raw bytes (redaction.Redactor.might_be_in), and then
written as the gateway's own text and bytes (jsonrpc.Verbatim). Each of these is a fast path in
front of the exact one that was there before (outcomes.read_json with the compiled checker,
Redactor.scrub on every string, jsonrpc.dumps of the value). So each is tested against that exact
path as the oracle: generated answers, mutated in every way a gateway could get one wrong, must
never be vouched for where the exact path refuses, or searched less where it finds a credential.
Then the same end to end: through the dispatcher, a stdio process, an HTTP server and the official
SDK client.
"""

from __future__ import annotations

import copy
import json
import random
import string
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from mcp_server.core import schema
from mcp_server.core.answers import STREAMED, Reader
from mcp_server.core.context import RequestContext
from mcp_server.core.redaction import MIN_RUN, Redactor
from mcp_server.fairwins.snapshot import load
from mcp_server.setup.config import Config
from mcp_server.setup.server import build_dispatcher
from mcp_server.wire import jsonrpc, pause
from mcp_server.wire.jsonrpc import dumps, encode, pieces, verbatim, verbatim_text
from mcp_server.wire.x402 import Payment
from tests.conftest import client_for, run_stdio, server_env
from tests.mcp_http import post, serving
from tests.outputs import failure_facts
from tests.sandbox_gateway import ECHO_FORMS, TOKEN_MEMBER_A, SandboxGateway
from tests.secret_canaries import canary_payment, header_value
from tests.test_redaction import bearer_secret, exposed
from tests.test_sdk_client import sdk

SCHEMAS: Final = load().output_schemas
WAGERS_SCHEMA: Final = SCHEMAS["member.wagers"]
WAGERS: Final = "/v1/member/wagers"
SMALL_CHUNK: Final = 300  # characters a chunk holds in these tests: many chunks in a small answer


def wager(i: int, rng: random.Random | None = None) -> dict[str, Any]:
    said = ["text written by the counterparty", "Lakers beat the Celtics — café crème", 'a "quoted" }, {"id": word']
    return {
        "id": f"w-{100000 + i}",
        "stake": f"{i % 500}.{i % 100:02d}",
        "asset": ["USDC", "DAI"][i % 2],
        "deadline": f"2026-12-{i % 28 + 1:02d}T00:00:00Z",
        "status": ["open", "settled"][i % 2],
        "description": said[(rng.randrange(3) if rng else i) % 3],
    }


def envelope(count: int, rng: random.Random | None = None) -> dict[str, Any]:
    return {
        "asOf": "2026-11-29T20:00:00Z",
        "chains": [
            {"chainId": 137, "state": "read", "wagers": [wager(i, rng) for i in range(count)]},
            {"chainId": 8453, "state": "unreadable", "reason": "wager index did not answer within 5 s"},
            {"chainId": 1, "state": "not-configured"},
        ],
    }


def exact(text: str, output_schema: dict[str, Any]) -> bool:
    """The exact reading, as before: strict JSON, then the compiled checker over the whole value."""
    try:
        value = jsonrpc.loads(text)
    except ValueError:
        return False
    return schema.check(value, output_schema) is None


def written(value: Any, rng: random.Random) -> str:
    """`value` as a gateway might write it: compact or pretty, escaped or not."""
    style = rng.randrange(4)
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == 1:
        return json.dumps(value, separators=(",", ":"))
    if style == 2:
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value, separators=(", ", ": "))


# ---- the reader against the exact reading --------------------------------------------------------


def test_a_large_answer_is_vouched_for_and_only_its_skeleton_is_kept() -> None:
    value = envelope(3000)
    text = json.dumps(value, separators=(",", ":"))
    vouched, skeleton = Reader(WAGERS_SCHEMA, kept=("chains",), chunk=SMALL_CHUNK, small=0).read(text)
    assert vouched and exact(text, WAGERS_SCHEMA)
    expected = copy.deepcopy(value)
    expected["chains"][0]["wagers"] = STREAMED
    assert skeleton == expected  # the chains' states are kept for the notes; the wagers are not


def _value_mutations(value: dict[str, Any], rng: random.Random) -> Iterator[dict[str, Any]]:
    """The answer with one thing wrong (or not: some changes keep it within the schema)."""
    wagers = value["chains"][0]["wagers"]
    bad: list[Any] = [5, 2.5, 2.0, None, True, [], {}, ["x"], {"a": 1}, "", "x" * 300]
    for _ in range(6):
        mutated = copy.deepcopy(value)
        target = mutated["chains"][0]["wagers"]
        kind = rng.randrange(9)
        if target and kind == 0:
            item = rng.choice(target)
            item[rng.choice(list(item))] = rng.choice(bad)
        elif target and kind == 1:
            del rng.choice(target)[rng.choice(["id", "stake", "asset", "deadline", "status", "description"])]
        elif target and kind == 2:
            rng.choice(target)[rng.choice(["extra", "nested", "id2"])] = rng.choice(bad)
        elif target and kind == 3:
            target[rng.randrange(len(target))] = rng.choice(bad)
        elif kind == 4:
            mutated["chains"][rng.randrange(3)]["state"] = rng.choice(["read", "unknown", 137, None])
        elif kind == 5:
            mutated["chains"][rng.randrange(3)] = rng.choice(bad)
        elif kind == 6:
            mutated[rng.choice(["chains", "asOf", "more"])] = rng.choice(bad)
        elif kind == 7:
            mutated["chains"][0]["wagers"] = rng.choice(bad)
        else:
            del mutated["chains"][rng.randrange(3)]["chainId"]
        yield mutated
    yield value if wagers else {"chains": []}


def _text_mutations(text: str, rng: random.Random) -> Iterator[str]:
    """The answer's text with one thing wrong in it, as a broken gateway or proxy would send it."""
    at = rng.randrange(len(text))
    yield text[:at]  # cut short
    yield text[:at] + text[at + 1 :]  # a character lost
    yield text[:at] + rng.choice('{}[],:"\\ x0') + text[at:]
    yield text + rng.choice([" ", "\n", "x", "{}", ",", "]"])
    yield "\ufeff" + text
    yield text.replace("25.00", "NaN", 1).replace('"0.00"', "1e999", 1).replace('"1.01"', "9" * 5000, 1)
    yield text.replace('"wagers"', '"wagers":[],"wagers"', 1)  # a name given twice
    yield text.replace('"state":"read"', '"st\\u0061te":"read"', 1)  # a name escaped
    yield text.replace(
        '"wagers":[',
        '"wagers":[{"id":"w-0","stake":"1","asset":"A","deadline":"d","status":"s","nested":[{"a":1},{"b":2}]},',
        1,
    )


@pytest.mark.parametrize("seed", range(12))
def test_every_answer_the_reader_vouches_for_the_exact_reading_accepts(seed: int) -> None:
    rng = random.Random(seed)
    reader = Reader(WAGERS_SCHEMA, kept=("chains",), chunk=rng.choice([1, SMALL_CHUNK, 2000]), small=seed % 2 * 9000)
    vouched = refused = 0
    for round_ in range(30):
        value = envelope(rng.choice([0, 1, 3, 40, 400]), rng)
        for mutated in _value_mutations(value, rng):
            text = written(mutated, rng)
            for candidate in [text, *(_text_mutations(text, rng) if round_ % 3 == 0 else [])]:
                ok, _ = reader.read(candidate)
                if ok:
                    vouched += 1
                    assert exact(candidate, WAGERS_SCHEMA), candidate[:300]
                elif not exact(candidate, WAGERS_SCHEMA):
                    refused += 1
    assert vouched > 50 and refused > 50  # both kinds were generated, so the assertions above mattered


@pytest.mark.parametrize("target", sorted(SCHEMAS))
def test_the_reader_of_every_tool_vouches_only_for_what_the_exact_reading_accepts(target: str) -> None:
    rng = random.Random(target)
    output_schema = SCHEMAS[target]
    reader = Reader(output_schema, kept=("chains",), chunk=64, small=0)
    samples: list[Any] = [
        {"chains": [{"chainId": 1, "enabled": True}] * 50, "status": "ok", "asOf": "t"},
        {"markets": [{"question": "q?", "id": i} for i in range(100)], "chainId": 137},
        {"items": [{"headline": "h"}] * 60, "chainId": 137, "asset": "USDC"},
        {"pairs": [{"symbol": "BTC-USD"}] * 60},
        {"account": "0x" + "ab" * 20, "scopes": ["read:wagers"], "expiresAt": "t"},
        {
            "typedData": {
                "domain": {},
                "types": {"T": [{"name": "a", "type": "uint"}]},
                "primaryType": "T",
                "message": {},
            },
            "expiresAt": "t",
            "submit": {"relayPath": "/v1/relay/x"},
        },
        {"accepts": []},
        {"kind": "unreadable_answer"},
        envelope(30),
    ]
    for sample in samples:
        for mutated in [sample, *_value_mutations(envelope(20), rng)]:
            for _ in range(3):
                text = written(mutated, rng)
                for candidate in [text, *_text_mutations(text, rng)]:
                    if reader.read(candidate)[0]:
                        assert exact(candidate, output_schema), (target, candidate[:300])


MARKETS_SCHEMA: Final = SCHEMAS["/v1/polymarket/{chainId}/markets"]


def market(i: int, rng: random.Random) -> dict[str, Any]:
    said = ["Will it rain?", 'a "quoted" }, {"id": word', "brackets ] } [ { in a question", "}]"]
    return {
        "id": f"0x{i:064x}",
        "slug": f"market-{i}",
        "question": rng.choice(said),
        "outcomes": [{"name": "Yes", "price": "0.40"}, {"name": "No", "price": "0.60"}][: rng.randrange(3)],
        "volume": f"{i}.00",
        "endDate": "2027-01-01T00:00:00Z",
    }


def _market_mutations(value: dict[str, Any], rng: random.Random) -> Iterator[dict[str, Any]]:
    """Markets with one thing wrong, most often inside an item's outcomes (an array in each item)."""
    bad: list[Any] = [5, 2.5, None, True, [], {}, ["x"], {"a": 1}]
    for _ in range(6):
        mutated = copy.deepcopy(value)
        rows = mutated["markets"]
        kind = rng.randrange(5)
        if rows and kind == 0:
            outcomes = rng.choice(rows)["outcomes"]
            if outcomes:
                rng.choice(outcomes)[rng.choice(["name", "price", "other"])] = rng.choice(bad)
        elif rows and kind == 1:
            rng.choice(rows)["outcomes"] = rng.choice(bad)
        elif rows and kind == 2:
            rng.choice(rows)["outcomes"].append(rng.choice(bad))
        elif rows and kind == 3:
            rng.choice(rows)[rng.choice(["id", "question", "volume", "more"])] = rng.choice(bad)
        else:
            mutated["markets"].append(rng.choice(bad))
        yield mutated
    yield value


@pytest.mark.parametrize("seed", range(8))
def test_markets_with_outcomes_are_vouched_for_exactly_when_the_exact_reading_accepts_them(seed: int) -> None:
    # Each item holds an array of objects, so a "}, {" a chunk's length on is as often between two
    # outcomes as between two markets, and strings hold "}, {", "}]" and lone brackets.
    rng = random.Random(seed)
    reader = Reader(MARKETS_SCHEMA, kept=("chains",), chunk=rng.choice([1, 50, SMALL_CHUNK, 2000]), small=0)
    vouched = refused = 0
    for round_ in range(20):
        value = {"chainId": 137, "q": None, "markets": [market(i, rng) for i in range(rng.choice([0, 1, 5, 80, 400]))]}
        for mutated in _market_mutations(value, rng):
            text = written(mutated, rng)
            fits = exact(text, MARKETS_SCHEMA)
            assert reader.read(text)[0] is fits, text[:300]  # no doubt about a valid answer either
            vouched += fits
            for candidate in _text_mutations(text, rng) if round_ % 4 == 0 else []:
                if reader.read(candidate)[0]:
                    assert exact(candidate, MARKETS_SCHEMA), candidate[:300]
                else:
                    refused += 1
    assert vouched > 20 and refused > 20


def test_markets_are_read_a_chunk_at_a_time_not_item_by_item() -> None:
    # A market holds an array of objects (its outcomes), so half the "}, {" a chunk's length on
    # are inside a market: a chunk cut there does not decode, and the markets up to the next try
    # were read one by one, without a pause (issue 50: most of a 4 MB answer, 68 ms at a stretch).
    # The braces counted find the "}, {" between two markets, so every chunk decodes, and the
    # reader pauses after each.
    rng = random.Random(5)
    rows = [market(i, rng) for i in range(3000)]
    for row in rows:
        row["outcomes"] = [{"name": "Yes", "price": "0.4"}, {"name": "No", "price": "0.6"}]
    text = json.dumps({"chainId": 137, "q": None, "markets": rows}, separators=(",", ":"))
    chunk = 8192
    pauses = [0]

    def count() -> None:
        pauses[0] += 1

    with pause.paced(count):
        assert Reader(MARKETS_SCHEMA, kept=("chains",), chunk=chunk, small=0).read(text)[0]
    longest = max(len(json.dumps(row, separators=(",", ":"))) for row in rows)
    assert pauses[0] >= len(text) // (chunk + longest)


def test_a_schema_violation_deep_in_the_thousandth_item_is_not_vouched_for() -> None:
    value = envelope(1500)
    value["chains"][0]["wagers"][999]["stake"] = 25
    text = json.dumps(value, separators=(",", ":"))
    assert not Reader(WAGERS_SCHEMA, kept=("chains",)).read(text)[0]
    assert schema.check(value, WAGERS_SCHEMA) is not None


def test_a_chunk_split_inside_a_string_or_a_nested_array_is_never_taken_for_items() -> None:
    # "}, {" inside a description, and between objects of an array inside an item: a chunk
    # ending at either does not decode, and the items there are read one by one.
    value = envelope(200)
    for item in value["chains"][0]["wagers"][::7]:
        item["notes"] = [{"a": "}, {"}, {"b": "},{"}]
        item["description"] = 'ends "}, {" here'
    text = json.dumps(value, separators=(",", ":"))
    for chunk in (1, 7, 50, 300, 5000):
        assert Reader(WAGERS_SCHEMA, kept=("chains",), chunk=chunk, small=0).read(text)[0]
    value["chains"][0]["wagers"][150]["notes"] = {"id": 5}
    value["chains"][0]["wagers"][151]["status"] = {"}, {": 1}
    bad = json.dumps(value, separators=(",", ":"))
    for chunk in (1, 7, 50, 300, 5000):
        assert not Reader(WAGERS_SCHEMA, kept=("chains",), chunk=chunk, small=0).read(bad)[0]


# ---- the bulk check against the checker ------------------------------------------------------------


def _random_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    kinds = ["string", "integer", "number", "boolean", "object", "array", "null"]
    node: dict[str, Any] = {}
    if rng.random() < 0.8:
        node["type"] = rng.choice(kinds) if rng.random() < 0.8 else rng.sample(kinds, 2)
    if rng.random() < 0.2:
        node["enum"] = rng.choice([["a", "b"], ["a", 1], [True, None]])
    if rng.random() < 0.1:
        node["const"] = rng.choice(["a", 1, {"a": 1}])
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if rng.random() < 0.15:
            node[key] = rng.choice([0, 1, 2.5])
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if rng.random() < 0.15:
            node[key] = rng.randrange(3)
    if rng.random() < 0.15:
        node["pattern"] = rng.choice(["^a", "b$", "^[a-z]+$"])
    if depth < 2 and rng.random() < 0.4:
        node["properties"] = {name: _random_schema(rng, depth + 1) for name in rng.sample("abcd", 2)}
        if rng.random() < 0.5:
            node["required"] = rng.sample(sorted(node["properties"]), 1)
    if depth < 2 and rng.random() < 0.2:
        node["additionalProperties"] = rng.choice([False, True, {"type": "string"}])
    if depth < 2 and rng.random() < 0.3:
        node["items"] = _random_schema(rng, depth + 1)
    if depth < 2 and rng.random() < 0.15:
        node["anyOf"] = [_random_schema(rng, depth + 1) for _ in range(2)]
    return node


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: rng.choice(["a", "b", "ab", "", "zz", "abc\n"]),
        lambda: rng.choice([0, 1, 2, -1, 3]),
        lambda: rng.choice([0.5, 2.0, 2.5, 1e20]),
        lambda: rng.choice([True, False]),
        lambda: None,
    ]
    if depth < 2:
        choices.append(lambda: {k: _random_value(rng, depth + 1) for k in rng.sample("abcde", rng.randrange(4))})
        choices.append(lambda: [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))])
    return rng.choice(choices)()


@pytest.mark.parametrize("seed", range(8))
def test_the_bulk_check_vouches_only_for_values_the_checker_accepts(seed: int) -> None:
    rng = random.Random(seed)
    vouched = 0
    for _ in range(400):
        node = _random_schema(rng)
        bulk, each = schema.compile_bulk(node), schema.compile_schema(node)
        for _ in range(5):
            values = [_random_value(rng) for _ in range(rng.randrange(1, 6))]
            if rng.random() < 0.5:  # lists of values of one kind, as an array of items mostly is
                values = [copy.deepcopy(values[0]) for _ in values]
            if bulk(values):
                vouched += 1
                assert all(each(v, "") is None for v in values), (node, values)
    assert vouched > 100


@pytest.mark.parametrize("seed", range(6))
def test_the_generated_verdict_agrees_with_the_checker_on_every_value(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        node = _random_schema(rng)
        fits, each = schema.compile_verdict(node), schema.compile_schema(node)
        for _ in range(8):
            value = _random_value(rng)
            assert fits(value) is (each(value, "") is None), (node, value)
    for output_schema in SCHEMAS.values():
        fits, each = schema.compile_verdict(output_schema), schema.compile_schema(output_schema)
        for mutated in _value_mutations(envelope(20), rng):
            assert fits(mutated) is (each(mutated, "") is None), mutated


@pytest.mark.parametrize(
    ("node", "values"),
    [
        ({"type": "integer"}, [1, 2.0]),  # an integral float is an integer: the checker's to say
        ({"type": "number"}, [1, True]),
        ({"type": "object", "required": ["a"]}, [{"a": 1}, {"b": 1}]),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, [{"a": "x"}, {"a": 5}]),
        ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, [{"a": 1, "b": 2}]),
        ({"enum": ["a", 1]}, ["a"]),
        ({"anyOf": [{"type": "string", "minLength": 2}, {"type": "string", "maxLength": 0}]}, ["ab", ""]),
    ],
)
def test_what_the_bulk_check_cannot_settle_it_leaves_to_the_checker(node: dict[str, Any], values: list[Any]) -> None:
    assert schema.compile_bulk(node)(values) is False


# Open but typed, as the relayed routes' answers may be: type unions, items of either kind, and
# names the schema does not list with a type of their own.
OPEN_MARKET: Final = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "outcomes": {
            "type": ["string", "array"],
            "items": {"type": ["string", "object"], "properties": {"price": {"type": ["string", "number"]}}},
        },
        "volume": {"anyOf": [{"type": "string", "pattern": "^[0-9.]+$"}, {"type": "null"}]},
        "liquidity": {"type": ["number", "string"], "minimum": 0},
    },
    "required": ["id"],
    "additionalProperties": {"type": ["string", "number", "boolean", "null", "array", "object"]},
}


def test_the_bulk_check_settles_type_unions_nullables_and_typed_other_names_without_the_checker() -> None:
    values: list[Any] = [
        {"id": "a", "outcomes": "Yes/No", "volume": None, "liquidity": 5, "tags": ["x"]},
        {"id": "b", "outcomes": ["Yes", {"name": "No", "price": 0.4}], "volume": "12.5", "liquidity": "7"},
        {"id": "c", "outcomes": [{"price": "0.6"}], "volume": "3", "extra": {"k": 1}, "live": True},
        {"id": "d", "outcomes": [], "liquidity": 0.5, "note": None},
    ]
    each = schema.compile_schema(OPEN_MARKET)
    assert all(each(v, "") is None for v in values)
    assert schema.compile_bulk(OPEN_MARKET)(values) is True
    for broken in (
        {"id": "e", "outcomes": 5},
        {"id": "e", "outcomes": [5]},
        {"id": "e", "outcomes": [{"price": True}]},
        {"id": "e", "volume": "1e3"},
        {"id": "e", "liquidity": -1},
        {"id": "e", "other": 1.5j},
        {"outcomes": "x"},
    ):
        assert schema.compile_bulk(OPEN_MARKET)([*values, broken]) is False, broken


# ---- the wire --------------------------------------------------------------------------------------


def _decoded(text: str) -> tuple[bool, str]:
    """(whether the decoder reads it, what it reads, written out with its types: 1, 1.0 and true apart)."""
    try:
        return True, repr(jsonrpc.DECODER.decode(text))
    except (ValueError, RecursionError):
        return False, ""


@pytest.mark.parametrize("seed", range(10))
def test_a_text_decoded_a_slice_at_a_time_reads_as_the_decoder_reads_it_or_not_at_all(seed: int) -> None:
    rng = random.Random(seed)
    read = refused = 0
    for _ in range(60):
        value: Any = rng.choice(
            [
                envelope(rng.choice([0, 1, 20, 40]), rng),
                {"chainId": 137, "q": None, "markets": [market(i, rng) for i in range(rng.choice([0, 3, 30]))]},
                [_random_value(rng) for _ in range(rng.choice([0, 5, 40]))],
                _random_value(rng),
            ]
        )
        text = written(value, rng)
        for candidate in [text, *_text_mutations(text, rng), " \n" + text + "\t ", text.replace(",", " , ")]:
            ok, expected = _decoded(candidate)
            try:
                got = repr(jsonrpc._loads_in_slices(candidate))
            except (ValueError, StopIteration, IndexError, RecursionError):
                refused += 1
                continue  # loads then reads it whole and says why
            assert ok and got == expected, candidate[:300]
            read += 1
    assert read > 200 and refused > 50


def test_a_large_text_is_decoded_a_slice_at_a_time_and_its_faults_still_worded_by_the_decoder() -> None:
    value = envelope(4000)
    text = json.dumps(value, separators=(",", ":"))
    assert len(text) > jsonrpc.SLICED_LOADS
    assert jsonrpc.loads(text) == value
    for broken, words in [(text + ",", "Extra data"), (text[:-2] + ",]}", "Expecting value"), (text[:-1], "Expecting")]:
        with pytest.raises(ValueError, match=words):
            jsonrpc.loads(broken)


def test_a_long_text_outside_ascii_is_escaped_a_slice_at_a_time_as_it_is_whole() -> None:
    value = {"a": ['caf\u00e9 \U0001f600 \u2026 "q" \\ ' * 3 + "x" * i for i in range(9000)]}
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert len(text) > 4 * 256 * 1024 and not text.isascii()
    assert verbatim_text(text).data == json.encoder.encode_basestring_ascii(text)
    assert verbatim(text).data == json.dumps(value, separators=(",", ":"))


# Characters whose escapes differ between encodings: Latin-1 (\xe9 to backslashreplace), the BMP,
# astral (a surrogate pair to JSON), lone surrogates, the separators JSON escapes for lines. (DEL is
# ASCII: JSON text may hold it as it is, and the text is left as the gateway wrote it there.)
_ESCAPABLE: Final = ["a", '"', "\\", "\\x", *"\u00e9\u00ff\u0100\u2014\u2028\U0001f600\ud800\uffff"]


@pytest.mark.parametrize("backslash", [False, True])
def test_a_text_outside_ascii_is_escaped_as_json_dumps_escapes_it(backslash: bool) -> None:
    # A text with no backslash of its own is escaped in C (backslashreplace); any other by the search.
    rng = random.Random(int(backslash))
    alphabet = _ESCAPABLE if backslash else [c for c in _ESCAPABLE if "\\" not in c and '"' not in c]
    for _ in range(3000):
        value = {"k": "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30))), "n": [1, "\u00e9"]}
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        assert ("\\" in text) is backslash or backslash  # with none asked for, there is none
        assert verbatim(text).data == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("seed", range(4))
def test_a_value_written_a_slice_at_a_time_is_the_text_json_dumps_writes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        value = rng.choice([_random_value(rng), [_random_value(rng) for _ in range(rng.choice([3, 40, 600]))]])
        for ascii_only in (True, False):
            assert jsonrpc.dumps_in_slices(value, ascii_only) == json.dumps(
                value, ensure_ascii=ascii_only, separators=(",", ":")
            )
    value = envelope(3000)
    assert jsonrpc.dumps_in_slices(value, False) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize(
    "text",
    [
        '{"a":"caf\u00e9 \u2028 \U0001f600","b":[1,2.5,null,true]}',
        '{\n  "a": "x",\r\n  "b": [\n    1\n  ]\n}\n',
        '{"a":"\\ud800 lone, \\u2028 escaped, \\" quoted"}',
        '  {"a":1}  ',
    ],
    ids=["non-ascii", "pretty", "escapes", "spaces"],
)
def test_a_verbatim_answer_is_one_ascii_line_and_reads_back_as_the_gateway_sent_it(text: str) -> None:
    raw = text.encode("utf-8")
    value = jsonrpc.loads(text)
    for structured, escaped in [(verbatim(text, raw), verbatim_text(text, raw)), (verbatim(text), verbatim_text(text))]:
        message = jsonrpc.response(
            7,
            {
                "content": [{"type": "text", "text": escaped}],
                "structuredContent": structured,
                "isError": False,
            },
        )
        line = dumps(message)
        assert b"\n" not in line and b"\r" not in line
        line.decode("ascii")
        read = json.loads(line)
        assert read["result"]["structuredContent"] == value
        assert read["result"]["content"][0]["text"] == text
        assert b"".join(pieces(encode(message))) == line


def test_a_gateway_string_spelling_a_marker_cannot_move_a_verbatim_value() -> None:
    # The marker's random part never leaves the process; even spelled exactly, it is refused, not used.
    marker = f"{jsonrpc._SPLICE}0"
    message = {"a": marker, "b": verbatim('{"x":1}')}
    with pytest.raises(ValueError):
        encode(message)


# ---- the credential prefilter against scrub --------------------------------------------------------

TOKEN_CHARS: Final = string.ascii_letters + string.digits + "-_./+=:~"


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from (k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def scrub_would_change(redactor: Redactor, body: bytes) -> bool:
    """What the exact path finds: a credential in a string of the answer, or in its text as a text block."""
    text = body.decode("utf-8")
    if redactor.scrub_exact(text) is not text:
        return True
    try:
        value = jsonrpc.loads(text)
    except ValueError:
        return False
    return any(redactor.scrub_exact(s) is not s for s in _strings(value))


def _spellings(secret: str, rng: random.Random) -> list[str]:
    """Ways a gateway, a proxy or a log line might write `secret` (or a piece of it) into JSON text."""
    start = rng.randrange(max(1, len(secret) - MIN_RUN))
    piece = secret[start : start + rng.randrange(MIN_RUN - 2, len(secret) + 1)]
    half = len(piece) // 2
    return [
        piece,
        piece.upper(),
        "".join(rng.choice([c.upper(), c.lower()]) for c in piece),
        "".join(f"\\u{ord(c):04x}" if rng.random() < 0.5 else c for c in piece),  # JSON escapes
        "".join(f"\\\\u{ord(c):04X}" if rng.random() < 0.3 else c for c in piece),  # a "\\uXXXX" in the string
        urllib.parse.quote(piece, safe=""),
        "".join(f"%{ord(c):02x}" if rng.random() < 0.5 else c for c in piece),
        piece.replace("k", "\u212a").replace("K", "\u212a"),  # the Kelvin sign, "k" in lower case
        piece.replace("/", "\\/"),  # JSON's escaped slash
        piece.replace("/", "\\\\/"),  # a "\\/" in the string
        piece[:half] + '", "k": "' + piece[half:],  # split across two strings: no run in either
        piece[:7],
    ]


@pytest.mark.parametrize("seed", range(10))
def test_the_prefilter_suspects_every_answer_scrub_would_change(seed: int) -> None:
    rng = random.Random(seed)
    found = 0
    for _ in range(40):
        token = "fw1." + "".join(rng.choice(TOKEN_CHARS) for _ in range(rng.randrange(6, 40)))
        redactor = Redactor(token, None)
        for spelled in _spellings(token, rng):
            items = [wager(i) for i in range(rng.randrange(1, 30))]
            where = rng.randrange(len(items))
            items[where]["description"] = "said SPOT to us"
            text = json.dumps(
                {"chains": [{"chainId": 1, "state": "read", "wagers": items}]}, ensure_ascii=rng.random() < 0.5
            )
            body = text.replace("SPOT", spelled).encode("utf-8")
            if scrub_would_change(redactor, body):
                found += 1
                assert redactor.might_be_in(body), (token, spelled)
    assert found > 100


def test_the_prefilter_suspects_every_echo_of_a_payment_scrub_would_change() -> None:
    for version in (1, 2):
        payload = canary_payment(version)
        header = header_value(payload)
        redactor = Redactor(None, Payment("PAYMENT-SIGNATURE", header))
        found = 0
        for form, write in ECHO_FORMS.items():
            for ascii_only in (True, False):
                body = json.dumps({"chains": [], "echo": write(header, payload)}, ensure_ascii=ascii_only).encode()
                if scrub_would_change(redactor, body):
                    found += 1
                    assert redactor.might_be_in(body), form
        assert found >= 2 * (len(ECHO_FORMS) - 2)  # every form but a piece too short to count, and one more


@pytest.mark.parametrize("seed", range(4))
def test_a_short_text_is_scrubbed_as_the_search_alone_scrubs_it(seed: int) -> None:
    # scrub asks the raw bytes' test first for texts too short to exhaust the search's budget.
    rng = random.Random(seed)
    for _ in range(60):
        token = "fw1." + "".join(rng.choice(TOKEN_CHARS) for _ in range(rng.randrange(6, 40)))
        redactor = Redactor(token, None)
        for spelled in _spellings(token, rng):
            text = f"rejected {spelled} ({rng.choice(['as received', 'x' * 40, ''])})"
            assert redactor.scrub(text) == redactor.scrub_exact(text), (token, text)


@pytest.mark.parametrize("token", ["fw1.benchtoken0000", "fw1.2026-12Usdc", "fw1.w-10000open"])
def test_a_token_sharing_short_pieces_with_ordinary_text_is_not_suspected(token: str) -> None:
    # Pieces of seven characters or fewer, everywhere in the answer: no run a credential is made of.
    body = json.dumps(envelope(2000), separators=(",", ":")).encode()
    redactor = Redactor(token, None)
    assert not scrub_would_change(redactor, body)
    assert not redactor.might_be_in(body)


# ---- through the server ----------------------------------------------------------------------------

BIG: Final = 1500  # wagers: about 260 KB, so every array is read in several chunks


def _texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result["content"]]


def test_a_large_answer_is_passed_on_exactly_as_the_gateway_wrote_it(sandbox: SandboxGateway) -> None:
    text = json.dumps(envelope(BIG), indent=1, ensure_ascii=False)  # pretty, and not ASCII
    sandbox.fault(WAGERS, "status", status=200, body=text.encode("utf-8"))
    ctx = RequestContext(bearer="fw1.benchtoken0000", bearer_source="header")
    result = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)["result"]
    assert result["isError"] is False
    assert _texts(result)[0] == text.strip()  # the gateway's own text, not encoded again
    assert result["structuredContent"] == json.loads(text)
    assert "Chain 8453 could not be read" in _texts(result)[1]


SECRET_TOKEN: Final = "fw1.Zq8v/Kt3R+mXp7:LwYd=2NcB"  # URL encoding changes four of its characters


@pytest.mark.parametrize(
    "spelled",
    [
        lambda t: "".join(f"\\u{ord(c):04x}" for c in t),
        lambda t: urllib.parse.quote(t, safe=""),
        lambda t: t.upper()[4:],
        lambda t: "\\\\u0066" + t[1:],
    ],
    ids=["json-escaped", "url-escaped", "a-run-upper-case", "escaped-twice"],
)
def test_a_large_answer_with_the_bearer_deep_inside_is_searched_and_scrubbed(
    sandbox: SandboxGateway, spelled: Callable[[str], str]
) -> None:
    text = json.dumps(envelope(BIG), separators=(",", ":")).replace("w-101400", "w-101400 SPOT", 1)
    sandbox.fault(WAGERS, "status", status=200, body=text.replace("SPOT", spelled(SECRET_TOKEN)).encode())
    ctx = RequestContext(bearer=SECRET_TOKEN, bearer_source="header")
    message = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
    result = message["result"]
    assert result["isError"] is False
    leaks = exposed([json.dumps(message, ensure_ascii=False), *_texts(result)], bearer_secret(SECRET_TOKEN))
    assert not leaks, leaks[:3]


def test_an_answer_holding_the_bearer_is_encoded_once_its_text_block_the_scrubbed_structured_content(
    sandbox: SandboxGateway,
) -> None:
    text = json.dumps(envelope(BIG), separators=(",", ":")).replace("w-101400", "w-101400 " + SECRET_TOKEN, 1)
    sandbox.fault(WAGERS, "status", status=200, body=text.encode())
    ctx = RequestContext(bearer=SECRET_TOKEN, bearer_source="header")
    message = client_for(sandbox.url).request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
    result = message["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    wagers = result["structuredContent"]["chains"][0]["wagers"]
    assert len(wagers) == BIG and SECRET_TOKEN not in json.dumps(message)
    assert sum(SECRET_TOKEN[-4:] in w["id"] for w in wagers) == 1  # the redacted form, where the bearer was


def test_a_verbatim_value_not_held_to_the_credentials_is_never_passed_on_unsearched() -> None:
    redactor = Redactor(SECRET_TOKEN, None)
    spelled = '{"a":"' + SECRET_TOKEN + '"}'
    with pytest.raises(ValueError):
        redactor.scrub_value({"structuredContent": verbatim(spelled), "content": [{"text": "x " + SECRET_TOKEN}]})
    held = {"structuredContent": verbatim('{"a":"x"}', held=True), "content": [{"text": "x " + SECRET_TOKEN}]}
    scrubbed = redactor.scrub_value(held)
    assert scrubbed["structuredContent"] is held["structuredContent"] and SECRET_TOKEN not in str(scrubbed)


def test_a_large_answer_breaking_its_schema_in_the_thousandth_wager_is_an_undescribed_answer(
    sandbox: SandboxGateway,
) -> None:
    value = envelope(BIG)
    value["chains"][0]["wagers"][999]["deadline"] = None
    sandbox.fault(WAGERS, "status", status=200, body=value)
    result = client_for(sandbox.url).call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert failure_facts(result, "undescribed_answer") == {
        "kind": "undescribed_answer",
        "status": 200,
        "field": "chains[0].wagers[999].deadline",
        "expected": "must be a string",
    }
    assert _texts(result)[0].startswith(
        "The gateway answered with your wagers (HTTP 200), but in a shape this server's contract does not "
        "describe: `chains[0].wagers[999].deadline` must be a string."
    )
    assert json.loads(_texts(result)[1]) == value


def test_invalid_utf8_is_unreadable_and_a_lone_surrogate_is_passed_on_as_u_fffd(sandbox: SandboxGateway) -> None:
    body = json.dumps(envelope(BIG), separators=(",", ":"), ensure_ascii=False).encode()
    assert b"caf\xc3\xa9" in body
    sandbox.fault(WAGERS, "status", status=200, body=body.replace(b"caf\xc3\xa9", b"caf\xe9", 1), times=1)
    result = client_for(sandbox.url).call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert failure_facts(result, "unreadable_answer")
    assert "it was not valid UTF-8" in _texts(result)[0]
    lone = body.replace(b"counterparty", b"counter\\ud800party", 1)
    sandbox.fault(WAGERS, "status", status=200, body=lone, times=1)
    result = client_for(sandbox.url).call_tool("get_wagers", bearer=TOKEN_MEMBER_A)
    assert result["isError"] is False  # JSON, passed on as the gateway wrote it but for half a character
    assert result["structuredContent"] == json.loads(lone.replace(b"\\ud800", b"\\ufffd"))
    assert "counter\\ufffdparty" in _texts(result)[0]


def test_a_large_answer_over_stdio_is_one_line_and_the_same_value(sandbox: SandboxGateway) -> None:
    value = envelope(BIG)
    sandbox.fault(WAGERS, "status", status=200, body=value)
    lines: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_wagers", "arguments": {}}},
    ]
    proc = run_stdio(lines, FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    out = proc.stdout.splitlines()
    assert len(out) == 2 and out[1].isascii()
    result = json.loads(out[1])["result"]
    assert result["structuredContent"] == value and json.loads(result["content"][0]["text"]) == value


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_a_large_answer_over_http_is_one_body_and_the_same_value(sandbox: SandboxGateway, streamed: bool) -> None:
    # With a progressToken the answer is the last event of an SSE stream, written in pieces too.
    value = envelope(BIG, random.Random(3))
    text = json.dumps(value, ensure_ascii=False)  # not ASCII: the text block is escaped as text
    sandbox.fault(WAGERS, "status", status=200, body=text.encode("utf-8"))
    params: dict[str, Any] = {"name": "get_wagers", "arguments": {}}
    if streamed:
        params["_meta"] = {"progressToken": "p"}
    with serving(build_dispatcher(Config(api_url=sandbox.url, timeout=5.0))) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        answer = post(url, call, {"Authorization": f"Bearer {TOKEN_MEMBER_A}"})
    assert answer.status == 200
    assert answer.content_type == ("text/event-stream" if streamed else "application/json")
    assert answer.body.isascii()
    result = answer.result
    assert result["structuredContent"] == value and result["content"][0]["text"] == text


def test_the_official_sdk_client_validates_a_large_verbatim_answer() -> None:
    text = json.dumps(envelope(BIG), indent=2, ensure_ascii=False)
    with SandboxGateway() as gateway:
        gateway.fault(WAGERS, "status", status=200, body=text.encode("utf-8"))
        report = sdk(
            "calls",
            "legacy",
            sys.executable,
            stdin=json.dumps(["get_wagers", {}]) + "\n",
            env=server_env(FAIRWINS_API_URL=gateway.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A),
        )
    (call,) = report["calls"]
    assert "raised" not in call and call["jsonschema"] == []  # the SDK's own check and jsonschema's
    assert call["isError"] is False and call["structuredContent"] == json.loads(text)
