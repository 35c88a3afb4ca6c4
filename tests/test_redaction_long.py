"""A long bearer's search (an OAuth access token's, 800 bytes) held to the simple definition.

A bearer with more than a few dozen probes is searched by its 4-byte windows
(`Redactor._sampled_in`): the text's stretches of token bytes found first where the text is no
more than a few times the bearer's length, then whichever side is shorter windowed at every byte
(or, for a few stretches, their windows every 5 bytes looked for in the bearer itself).
Each way is held here to the definition written the simple way (a run of MIN_RUN characters of
the folded bearer in the folded text, `reference_holds`): for texts with no escape, where the
raw bytes' test is exact, `might_be_in` says exactly that; with escapes it says what a search
of the definition's views says, and suspects whatever the reference decoder reads. Bearers are
drawn from the alphabets the stretches are found by (base64url with dots, every base64) and from
outside them (printable ASCII); texts are shorter than the bearer, longer, and longer than the
stretches are looked for in, with pieces of the bearer of every length up to past MIN_RUN, in
either case, next to token bytes or apart from them. Deterministic (derandomized, no example
database) and bounded.
"""

from __future__ import annotations

import random
import string
from typing import Final

from hypothesis import given
from hypothesis import strategies as st

from mcp_server.core import redaction
from mcp_server.core.redaction import MIN_RUN, Redactor, decoded, escape_in
from tests.test_credential_properties import profile
from tests.test_credential_spellings import reference_holds

BASE64URL: Final = string.ascii_letters + string.digits + "-_"
BASE64: Final = string.ascii_letters + string.digits + "+/="
PRINTABLE: Final = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%\\")
# What an answer is made of around an echo: words, numbers, dates, ids, addresses, a URL, JSON.
WORDS: Final = [
    "description",
    "deadline",
    "2026-12-01T00:00:00Z",
    "w-100000",
    "0x000000000000000000000000000000000000dead",
    "https://x.example/a/b?c=d",
    "Lakers beat the Celtics",
    "café crème",
    "USDC",
    "25.00",
    "eyJhbGciOiJSUzI1NiJ9",
    "open",
    "\u212aelvin",
]
SEPARATORS: Final = ["", " ", '"', '","', ":", ",", "\n", "{", "}", "[", "]", "."]


def _jwt(parts: list[str]) -> str:
    return ".".join(parts)


long_bearers = st.one_of(
    st.builds(_jwt, st.lists(st.text(BASE64URL, min_size=20, max_size=500), min_size=3, max_size=3)),
    st.text(BASE64URL, min_size=250, max_size=1200),
    st.text(BASE64, min_size=250, max_size=900),
    st.text(PRINTABLE, min_size=250, max_size=700),
    st.text(BASE64URL, min_size=MIN_RUN, max_size=250),  # probes, not windows: the same answers
).filter(lambda bearer: escape_in(bearer) is None)


@st.composite
def texts(draw: st.DrawFn, bearer: str) -> str:
    """An answer-like text around pieces of `bearer` (or none), shorter or longer than the bearer."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    pieces: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        start = rng.randrange(len(bearer))
        piece = bearer[start : start + draw(st.sampled_from([1, 3, 4, 5, MIN_RUN - 1, MIN_RUN, MIN_RUN + 1, 20]))]
        pieces.append(draw(st.sampled_from([str.lower, str.upper, str.swapcase, lambda s: s]))(piece))
    filler = [rng.choice(WORDS) for _ in range(draw(st.integers(0, 40)))]
    filler += ["".join(rng.choice(BASE64URL) for _ in range(rng.randrange(1, 30))) for _ in range(rng.randrange(4))]
    parts = filler + pieces
    rng.shuffle(parts)
    text = "".join(part + rng.choice(SEPARATORS) for part in parts)
    size = draw(st.sampled_from(["as drawn", "past the bearer", "past the stretches"]))
    if size != "as drawn":
        times = 2 if size == "past the bearer" else redaction._STRETCHED + 1
        block = "".join(rng.choice(WORDS) + rng.choice(SEPARATORS) for _ in range(20))
        pad = block * (times * len(bearer) // len(block) + 1)
        at = rng.randrange(len(pad) + 1)
        text = pad[:at] + text + pad[at:]
    return text


def simple_search(data: bytes, bearer: str) -> bool:
    """Whether a view of `data`, as `decoded` reads it, holds a run of MIN_RUN of the folded bearer."""
    views = decoded(data)
    if views is None:
        return True
    folded = bearer.lower().encode()
    runs = {folded[i : i + MIN_RUN] for i in range(len(folded) - MIN_RUN + 1)}
    return any(view[i : i + MIN_RUN] in runs for view in views for i in range(len(view) - MIN_RUN + 1))


@profile(400)
@given(st.data())
def test_a_long_bearer_is_found_in_a_text_with_no_escape_exactly_when_the_definition_finds_it(
    data: st.DataObject,
) -> None:
    bearer = data.draw(long_bearers)
    text = data.draw(texts(bearer))
    assert "%" not in text and "\\" not in text
    expected = reference_holds(text, bearer)
    redactor = Redactor(bearer, None)
    assert redactor.might_be_in(text.encode()) is expected
    scrubbed = redactor.scrub(text)
    assert (scrubbed is not text) is expected
    assert not reference_holds(scrubbed, bearer)


@profile(150)
@given(st.data())
def test_a_long_bearer_is_found_through_escapes_as_a_search_of_the_definitions_views_finds_it(
    data: st.DataObject,
) -> None:
    bearer = data.draw(long_bearers)
    text = data.draw(texts(bearer))
    # Some characters escaped: a gateway writing JSON with \\u escapes, or a URL-encoded echo.
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    how = data.draw(st.sampled_from(["\\u00{:02x}", "%{:02X}", "\\\\u00{:02x}"]))
    escaped = "".join(how.format(ord(c)) if c.isascii() and rng.random() < 0.2 else c for c in text)
    body = escaped.encode("utf-8")
    found = Redactor(bearer, None).might_be_in(body)
    assert found is simple_search(body, bearer)
    if reference_holds(escaped, bearer):
        assert found


def test_each_way_of_searching_finds_a_run_of_eight_and_passes_a_run_of_seven() -> None:
    rng = random.Random(60)
    for alphabet, length in ((BASE64URL, 852), (BASE64, 600), (PRINTABLE, 400)):
        bearer = "".join(rng.choice(alphabet) for _ in range(length))
        while escape_in(bearer) is not None:
            bearer = "".join(rng.choice(alphabet) for _ in range(length))
        redactor = Redactor(bearer, None)
        for around in (
            "",  # the text shorter than the bearer
            "deadline description " * (length // 10),  # longer
            "deadline description " * (length * (redaction._STRETCHED + 1) // 20),  # past the stretches
            "w-abcdefgh01234567" * (length // 8),  # a text made of token bytes
        ):
            for where in (0, len(around) // 2, len(around)):
                for start in (0, 1, 4, length // 2, length - MIN_RUN):
                    for neighbour in ("", " ", "a", "_"):
                        run = bearer[start : start + MIN_RUN]
                        text = around[:where] + neighbour + run + neighbour + around[where:]
                        assert redactor.might_be_in(text.encode()), (alphabet, len(around), where, start)
                        short = neighbour + run[: MIN_RUN - 1] + neighbour
                        text = around[:where] + short + around[where:]
                        assert redactor.might_be_in(text.encode()) is reference_holds(text, bearer)


def test_a_run_of_eight_is_found_at_every_offset_of_a_stretch_of_token_bytes() -> None:
    # Token bytes the bearer lacks before and after the run: the stretch holding it is windowed
    # every _STEP bytes from its own start, so each offset of the run within it is a way of its own.
    rng = random.Random(8)
    bearer = ".".join("".join(rng.choice("0123456789abcdefABCDEF-_") for _ in range(n)) for n in (36, 470, 342))
    redactor = Redactor(bearer, None)
    for around in ("", "deadline description " * 60):  # a few stretches (looked for in the bearer), more
        for start in (0, 3, 37, 500, len(bearer) - MIN_RUN):
            for before in range(2 * redaction._STEP):
                for after in (0, 1, redaction._STEP):
                    for size in (MIN_RUN, MIN_RUN - 1):
                        run = "g" * before + bearer[start : start + size] + "z" * after
                        text = around + '"' + run + '",' + around
                        assert redactor.might_be_in(text.encode()) is (size == MIN_RUN), (len(around), start, before)
                        assert reference_holds(text, bearer) is (size == MIN_RUN)


def test_the_sampled_windows_of_a_text_are_its_windows_every_step_bytes() -> None:
    rng = random.Random(5)
    for length in [*range(0, 700), 4 * 1024, 64 * 1024 + 3]:
        data = rng.randbytes(length)
        expected = {int.from_bytes(data[i : i + 4], "little") for i in range(0, length - 3, redaction._STEP)}
        assert redaction._sampled_windows(data) == expected, length


@profile(300)
@given(st.text(PRINTABLE + "%\\", min_size=1, max_size=60), st.text(BASE64URL, max_size=900))
def test_the_escape_a_bearer_holds_is_found_as_the_definitions_pattern_finds_it(head: str, tail: str) -> None:
    # escape_in looks for a `%` or `\\` first (an access token has none): what it names is the pattern's.
    for bearer in (head + tail, tail + head, tail):
        raw = bearer.encode()
        found = redaction._ESCAPE.search(raw) or redaction._ESCAPE.search(raw.lower())
        assert escape_in(bearer) == (None if found is None else raw[found.start() : found.end()].decode())
