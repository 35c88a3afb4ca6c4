"""The credential definition as properties (docs/style.md, habit 12): spellings, prefilter and scrub held to it.

Hypothesis builds the hostile inputs: a run of the bearer (or all of it) with every character
written plain, in either case, as `%XX` or `\\uXXXX` (either case of hex), `/` as `\\/`; the
escape characters of that spelling spelled again (`\\u0025` for `%`, `%5C` or `\\u005c` for `\\`,
`\\u003X` or `%3X` for a hex digit, a doubled backslash), up to twice; the result spliced into
the answer's JSON as it is (its escapes are the answer's own), as a string's characters
(escaped once more), or as JSON text nested in strings; in a key or a value; in a small answer
or one of about 80 KB with the spelling near its 64 KB mark (where the reader's chunks and the
prefilter's large-text search begin).

The oracle is the reference decoder of tests/test_credential_spellings.py, written apart from
the server's code. Asserted: (a) the prefilter is sound: whenever what a client would read of
the answer passed on verbatim spells the bearer, `might_be_in` suspects it; (b) whatever path
the real tool takes (the fast, verbatim one or the exact one), and the exact path forced, nothing
a client reads spells it; (c) the scrub of any text leaves nothing that spells it.

Deterministic (derandomized, no example database) and bounded, so CI runs it the same each time.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.core.context import RequestContext
from mcp_server.core.redaction import MIN_RUN, Redactor
from mcp_server.fairwins import tools
from mcp_server.ops.logs import request_bound
from mcp_server.upstream.gateway import GatewayResponse
from mcp_server.wire.jsonrpc import dumps
from tests.conftest import McpClient, client_for
from tests.sandbox_gateway import SandboxGateway
from tests.test_answers import envelope
from tests.test_credential_spellings import client_reads, reference_holds

WAGERS: Final = "/v1/member/wagers"
LARGE_WAGERS: Final = 480  # about 80 KB of answer
MARK_AT: Final = 64 * 1024


def profile(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# ---- generated spellings -------------------------------------------------------------------------

PRINTABLE: Final = "".join(chr(c) for c in range(0x21, 0x7F))
TOKEN_CHARS: Final = string.ascii_letters + string.digits + "-_./+=:~"

bearers = st.one_of(
    st.builds(lambda tail: "fw1." + tail, st.text(TOKEN_CHARS, min_size=MIN_RUN, max_size=36)),
    st.text(PRINTABLE, min_size=MIN_RUN, max_size=40),
)


def _hex(code: int, width: int, upper: bool) -> str:
    text = f"{code:0{width}x}"
    return text.upper() if upper else text


@st.composite
def _char(draw: st.DrawFn, ch: str) -> str:
    form = draw(st.sampled_from(["plain", "swap", "pct", "u", "slash"]))
    upper = draw(st.booleans())
    if form == "swap":
        return ch.swapcase()
    if form == "pct":
        return "".join("%" + _hex(b, 2, upper) for b in ch.encode())
    if form == "u":
        return "\\u" + _hex(ord(ch), 4, upper)
    if form == "slash" and ch == "/":
        return "\\/"
    return ch


@st.composite
def _again(draw: st.DrawFn, ch: str) -> str:
    """An escape character of a spelling, spelled once more (or left as it is)."""
    if ch not in "%\\" and ch not in string.hexdigits:
        return ch
    form = draw(st.sampled_from(["plain", "plain", "u", "pct"] + (["double"] if ch == "\\" else [])))
    upper = draw(st.booleans())
    if form == "u":
        return "\\u" + _hex(ord(ch), 4, upper)
    if form == "pct":
        return "%" + _hex(ord(ch), 2, upper)
    if form == "double":
        return "\\\\"
    return ch


@st.composite
def spellings(draw: st.DrawFn, bearer: str) -> str:
    """A run of `bearer` (MIN_RUN characters or more, or all of it) as some writer might spell it."""
    start = draw(st.integers(0, len(bearer) - MIN_RUN))
    end = draw(st.integers(start + MIN_RUN, len(bearer)))
    text = "".join(draw(_char(ch)) for ch in bearer[start:end])
    for _ in range(draw(st.integers(0, 2))):
        text = "".join(draw(_again(ch)) for ch in text)
    return text


@st.composite
def answers(draw: st.DrawFn, bearer: str) -> bytes:
    """A get_wagers answer holding a spelling of `bearer`, in one of the ways a gateway could write it."""
    spelled = draw(spellings(bearer))
    how = draw(st.sampled_from(["raw", "string", "nested", "nested-twice"]))
    if how == "raw":
        content = spelled  # its escapes are the answer's own (the answer may not even be JSON)
    else:
        text = spelled
        for _ in range({"string": 0, "nested": 1, "nested-twice": 2}[how]):
            text = json.dumps({"t": text}, ensure_ascii=draw(st.booleans()))
        content = json.dumps(text, ensure_ascii=draw(st.booleans()))[1:-1]
    around = draw(st.sampled_from(["", "took ", "x"])), draw(st.sampled_from(["", " then", "y"]))
    spot = around[0] + "SPOT" + around[1]
    in_key = draw(st.booleans())
    ascii_only = draw(st.booleans())
    if draw(st.booleans()):
        value: dict[str, Any] = envelope(LARGE_WAGERS)
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)
        # The description nearest the 64 KB mark, moved by up to a few hundred characters.
        target = MARK_AT + draw(st.integers(-400, 400))
        places = [i for i in _find_all(text, '"description":"')]
        place = min(places, key=lambda i: abs(i - target)) + len('"description":"')
        if in_key:
            text = text[: place - len('"description":"')] + '"' + spot + '":0,' + text[place - len('"description":"') :]
        else:
            text = text[:place] + spot + text[place:]
    else:
        text = '{"chains":[],' + ('"SPOT":"x"}' if in_key else '"message":"SPOT"}').replace("SPOT", spot)
    return text.replace("SPOT", content, 1).encode("utf-8", "surrogatepass")


def _find_all(text: str, piece: str) -> Iterator[int]:
    at = text.find(piece)
    while at >= 0:
        yield at
        at = text.find(piece, at + 1)


def verbatim_reads(body: bytes) -> list[str]:
    """What a client reads of an answer passed on verbatim: its text (the text block), and its strings."""
    text = body.decode("utf-8", "surrogatepass")
    return [text, *client_reads({"result": {"content": [{"type": "text", "text": text}]}})]


# ---- (a) the prefilter is sound ------------------------------------------------------------------------


@profile(200)
@given(st.data())
def test_the_prefilter_suspects_every_answer_a_client_would_read_the_bearer_in(data: st.DataObject) -> None:
    bearer = data.draw(bearers)
    body = data.draw(answers(bearer))
    if any(reference_holds(text, bearer) for text in verbatim_reads(body)):
        assert Redactor(bearer, None).might_be_in(body)


@profile(300)
@given(st.data())
def test_the_prefilter_suspects_every_text_in_which_a_spelling_of_the_bearer_is_read(data: st.DataObject) -> None:
    bearer = data.draw(bearers)
    text = data.draw(st.sampled_from(["", "took ", "a%", "\\"])) + data.draw(spellings(bearer))
    text += data.draw(st.sampled_from(["", " then", "%4", "\\"]))
    if reference_holds(text, bearer):
        assert Redactor(bearer, None).might_be_in(text.encode("utf-8", "surrogatepass"))


# ---- (b) nothing a client reads spells it, on either path ------------------------------------------------


@pytest.fixture(scope="module")
def gateway() -> Iterator[SandboxGateway]:
    with SandboxGateway() as started:
        yield started


@pytest.fixture(scope="module")
def client(gateway: SandboxGateway) -> McpClient:
    return client_for(gateway.url)


@profile(80)
@given(data=st.data())
def test_nothing_a_client_reads_of_a_tool_result_spells_the_bearer_on_the_path_taken(
    gateway: SandboxGateway, client: McpClient, data: st.DataObject
) -> None:
    bearer = data.draw(bearers)
    body = data.draw(answers(bearer))
    gateway.fault(WAGERS, "status", status=200, body=body, times=1)
    ctx = RequestContext(bearer=bearer, bearer_source="header")
    message = client.request("tools/call", {"name": "get_wagers", "arguments": {}}, ctx=ctx)
    assert "result" in message
    leaked = [text[:200] for text in client_reads(message) if reference_holds(text, bearer)]
    assert not leaked


@profile(80)
@given(data=st.data())
def test_nothing_a_client_reads_of_a_tool_result_spells_the_bearer_on_the_exact_path(
    client: McpClient, data: st.DataObject
) -> None:
    bearer = data.draw(bearers)
    body = data.draw(answers(bearer))
    tool = client.dispatcher._tools["get_wagers"]
    assert isinstance(tool, tools.GatewayTool)
    ctx = RequestContext(bearer=bearer, bearer_source="header")
    request = tool.build_request({}, ctx)
    with request_bound(ctx):
        result = tools._without_credentials(tool.render(GatewayResponse(200, (), body), request, ctx), ctx)
    message = json.loads(dumps({"jsonrpc": "2.0", "id": 1, "result": result}))
    leaked = [text[:200] for text in client_reads(message) if reference_holds(text, bearer)]
    assert not leaked


# ---- (c) the scrub of any text --------------------------------------------------------------------------


@profile(200)
@given(st.data())
def test_a_scrubbed_text_never_spells_the_bearer(data: st.DataObject) -> None:
    bearer = data.draw(bearers)
    parts = data.draw(st.lists(st.one_of(spellings(bearer), st.text(PRINTABLE, max_size=12)), min_size=1, max_size=4))
    text = "".join(parts)
    redactor = Redactor(bearer, None)
    scrubbed = redactor.scrub(text)
    assert not reference_holds(scrubbed, bearer), (text, scrubbed)
    assert redactor.scrub_exact(text) == scrubbed
    if not reference_holds(text, bearer) and "\\" not in text:
        assert scrubbed is text  # nothing there: nothing changed
