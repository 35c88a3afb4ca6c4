"""Sans-I/O JSON-RPC 2.0: bytes in, messages out; messages in, bytes out.

Nothing here raises for bad input: an unreadable message is returned as an `Invalid` value that
carries the error to send back, so every transport answers malformed input the same way.

A pass over a large text goes a slice at a time, with a `pause()` between slices: one C call over
megabytes holds the interpreter lock for milliseconds, and the event loop beside the work waits.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from json.encoder import encode_basestring_ascii
from typing import Any, Final

from mcp_server.wire.pause import pause

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002  # legacy revisions only
SERVER_ERROR: Final = -32000  # implementation-defined (JSON-RPC 2.0 §5.1): a bound of this server reached
REQUEST_TIMEOUT: Final = -32001  # as the MCP SDKs name it: the request's time ran out
HEADER_MISMATCH: Final = -32020  # 2026-07-28
MISSING_CAPABILITY: Final = -32021  # 2026-07-28
UNSUPPORTED_VERSION: Final = -32022  # 2026-07-28

Id = str | int
JSONObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    id: Id
    method: str
    params: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClientResponse:
    """A response the client sent us, dropped: the server never asks anything."""

    id: Id | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """Input to answer with `error` under `id` (None: id unreadable)."""

    id: Id | None
    error: JSONObject


Message = Request | Notification | ClientResponse | Invalid


@dataclass(frozen=True, slots=True)
class Batch:
    """A JSON array of messages (2025-03-26 only: the dispatcher decides)."""

    items: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Encoded:
    """A message already encoded by `dumps` (a batch's answers, as they come)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Verbatim:
    """One JSON value kept as the text it arrived in, written as that text.

    Made only by `verbatim` and `verbatim_text`, from text `loads` accepted and `well_formed`
    mended (the caller's part: `encode` never looks inside one): so `data` is ASCII JSON on one
    line (bytes, pieces of bytes, or a str of ASCII), written without encoding the value again.
    """

    data: bytes | str | tuple[bytes, ...]
    # Held whole to a request's credentials where it was made (redaction: nothing in it can spell
    # them), so a search for them leaves it as it is; one not held is read back and searched.
    held: bool = False

    def value(self) -> Any:
        """The value itself, parsed now (for a reader here; the wire never is)."""
        return loads(b"".join(self.data) if isinstance(self.data, tuple) else self.data)


_NON_ASCII: Final = re.compile("[^\\x00-\\x7f]+")
_TEXT_SLICE: Final = 256 * 1024  # characters escaped by one C call


def _escaped_run(run: re.Match[str]) -> str:
    return encode_basestring_ascii(run.group())[1:-1]


def _escaped_runs(text: str) -> str:
    pause()
    if "\\" not in text:
        # With no backslash of its own, each escape in the text's backslashreplace encoding is one
        # that encoding made: \uXXXX as JSON writes it, \xXX (which JSON spells \u00XX), or
        # \UXXXXXXXX (an astral character: JSON's surrogate pair, left to the search below).
        # A few passes in C, where the search calls back into Python once per run.
        escaped = text.encode("ascii", "backslashreplace")
        if b"\\U" not in escaped:
            return escaped.replace(b"\\x", b"\\u00").decode("ascii")
    return _NON_ASCII.sub(_escaped_run, text)


def _escaped_slice(text: str) -> str:
    pause()
    return encode_basestring_ascii(text)[1:-1]


def verbatim(text: str, raw: bytes | None = None, held: bool = False) -> Verbatim:
    """`text`, JSON `loads` accepted (from `raw` if given), for a line wire.

    JSON holds a line break only as whitespace between tokens (a string must escape it), so it
    becomes a space; characters outside ASCII occur only inside strings, and become the
    `\\uXXXX` escapes `dumps` writes. Text already so is used as it is, without a copy.
    """
    if raw is not None and raw.isascii():
        data = raw.strip(b" \t\r\n")
        if b"\n" in data or b"\r" in data:
            data = data.replace(b"\r", b" ").replace(b"\n", b" ")
        return Verbatim(data, held)
    text = text.strip(" \t\r\n")
    if not text.isascii():
        text = "".join(_escaped_runs(text[at : at + _TEXT_SLICE]) for at in range(0, len(text), _TEXT_SLICE))
    if "\n" in text or "\r" in text:
        text = text.replace("\r", " ").replace("\n", " ")
    return Verbatim(text, held)


def verbatim_text(text: str, raw: bytes | None = None, held: bool = False) -> Verbatim:
    """`text` as a JSON string, escaped now (ASCII, one line).

    A large string escaped inside the whole message costs that escape again in copies as the
    encoder's buffer grows; escaped alone, it is one pass, and the message around it is small.
    Given `raw`, the text's bytes, and both JSON that `loads` accepted: when they are ASCII they
    are escaped as bytes, in half the work of escaping the text, since the only characters JSON
    text holds that a string must escape are then `\\`, `"` and the whitespace between tokens.
    """
    if raw is None or not raw.isascii():
        if len(text) <= _TEXT_SLICE:
            return Verbatim(encode_basestring_ascii(text), held)
        # Each character's escape is its own, so the slices join exactly.
        slices = (_escaped_slice(text[at : at + _TEXT_SLICE]) for at in range(0, len(text), _TEXT_SLICE))
        return Verbatim('"' + "".join(slices) + '"', held)
    # Each byte's escape is its own; the slices are kept apart: joined, they would be copied once more.
    return Verbatim(
        (b'"', *(_escaped_bytes(raw[at : at + _TEXT_SLICE]) for at in range(0, len(raw), _TEXT_SLICE)), b'"'), held
    )


def _escaped_bytes(data: bytes) -> bytes:
    pause()
    data = data.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    for space, escaped in _SPACES:
        if space in data:
            data = data.replace(space, escaped)
    return data


_SPACES: Final = ((b"\n", b"\\n"), (b"\r", b"\\r"), (b"\t", b"\\t"))

_ITEMS: Final = 256  # items of a long array written by one json.dumps call
_FEW: Final = 16  # an array of at most this many items is looked into (an envelope's chains)


def dumps_in_slices(value: Any, ensure_ascii: bool = True, default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, separators=(",", ":"))`, written a slice at a time.

    A long array is written _ITEMS items per call, and the objects and short arrays around such
    arrays (an answer's envelope) member by member, so no call writes more than a slice of a long
    list (or one long string).
    """
    dump = functools.partial(
        json.dumps, ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False, default=default
    )
    out: list[str] = []
    # (what, how): _RAW text as it is, _SLICE_OF items written together, else a value at that depth.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, how = stack.pop()
        if how == _RAW:
            out.append(item)
        elif how == _SLICE_OF:
            out.append(dump(item)[1:-1])
            pause()
        elif how < _DEEPEST and isinstance(item, list) and len(item) > _FEW:
            slices = [[(item[at : at + _ITEMS], _SLICE_OF)] for at in range(0, len(item), _ITEMS)]
            stack += reversed(_between("[", slices, "]"))
        elif how < _DEEPEST and isinstance(item, list) and item:
            stack += reversed(_between("[", [[(value, how + 1)] for value in item], "]"))
        elif how < _DEEPEST and isinstance(item, dict) and item:
            members = [[(dump(name) + ":", _RAW), (value, how + 1)] for name, value in item.items()]
            stack += reversed(_between("{", members, "}"))
        else:
            out.append(dump(item))
    return "".join(out)


def _between(opening: str, members: list[list[tuple[Any, int]]], closing: str) -> list[tuple[Any, int]]:
    """A container's entries in writing order: its members between commas."""
    entries: list[tuple[Any, int]] = [(opening, _RAW)]
    for index, member in enumerate(members):
        if index:
            entries.append((",", _RAW))
        entries += member
    entries.append((closing, _RAW))
    return entries


_RAW: Final = -1
_SLICE_OF: Final = -2
_DEEPEST: Final = 6  # levels looked into; deeper values are written whole


# ---- what the official SDKs read -----------------------------------------------------------------
#
# The official MCP Python SDK reads every line and body with pydantic-core's JSON parser (jiter),
# which refuses two things the json module accepts, and drops the whole message when it meets
# one (the call is then never answered): a lone UTF-16 surrogate escape ("unexpected end of hex
# escape", "lone leading surrogate in hex escape"), and nesting deeper than its recursion limit of
# 200 ("recursion limit exceeded": it reads a message 201 levels deep, not 202; tests/test_readable.py
# asks the SDK itself). The TypeScript SDK (JSON.parse) reads both. So nothing we write holds either.

READABLE_DEPTH: Final = 201  # the deepest message the official Python SDK reads (mcp 2.3.0, pydantic-core 2.50)
# Levels a gateway value sits below: a batch's array, the message, its result, then `_meta` (a
# receipt) or structuredContent (an answer, an offer).
ENVELOPE_DEPTH: Final = 4
MAX_DEPTH: Final = READABLE_DEPTH - ENVELOPE_DEPTH  # how deep a gateway value may be (197)

# JSON text up to the next lone surrogate escape: every other character, every other escape, and
# each surrogate pair whole. An escaped backslash is consumed as a pair, so "\\ud83c" is text.
_UP_TO_LONE: Final = re.compile(
    r"(?:[^\\]++|\\[^u]|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})*+"
)
_LONE: Final = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
REPLACEMENT: Final = "\\ufffd"  # U+FFFD REPLACEMENT CHARACTER, as a JSON escape


def well_formed(text: str) -> str:
    """JSON `text` with each lone surrogate escape written as U+FFFD.

    Why U+FFFD rather than refusing the answer: a wager description cut inside an emoji by its
    writer must not make the member's whole answer unreadable, and it is what a UTF-8 reader
    makes of the same half character (TextEncoder, `bytes.decode(errors="replace")`). A search in
    C when the text holds no `\\ud` at all (nearly always); else one regex match to each lone one.
    """
    if "\\" not in text or ("\\ud" not in text and "\\uD" not in text):
        return text
    out: list[str] = []
    at = 0
    while True:
        end = _UP_TO_LONE.match(text, at).end()  # type: ignore[union-attr]
        if not _LONE.match(text, end):  # the end of the text (or, in text that is not JSON, a stray backslash)
            break
        out += (text[at:end], REPLACEMENT)
        at = end + 6
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)


_NOT_STRUCTURE: Final = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_ONE_KIND: Final = bytes.maketrans(b"{}", b"[]")  # for depth, an object is as deep as an array
_STRING: Final = re.compile(rb'"[^"]*"')
_BLOCK: Final = 64 * 1024
_STEP: Final = tuple(1 if byte == ord("[") else -1 for byte in range(256))  # by byte, for the brackets left


def _structure(data: bytes) -> bytes:
    pause()
    return data.translate(_ONE_KIND, _NOT_STRUCTURE)


def too_deep(text: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON `text` nests more than `limit` levels deep (`[]` is one).

    Each step is one pass in C over what is left of the text. Every escaped backslash and escaped
    quote is taken out; then all but quotes and brackets (an object's as an array's); then each
    two quotes side by side (an empty string, or two strings made one: what was inside a string
    stays inside), then any string left (one that held a bracket). Each round of taking out the
    "[]" left then removes exactly one level (the deepest are always empty by then), while the
    rest shrinks by half or more; the last levels are counted, one small int per bracket.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(data) <= 2 * limit + 1:
        return False
    if b"\\" in data:  # left to right, as JSON reads escapes: "\\\\" is one backslash, "\\"" a quote
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Quotes and brackets alone, a slice at a time (each byte is kept or dropped on its own): what
    # is left is a fraction of the text.
    step = _BLOCK * 4
    if len(data) <= step:
        data = _structure(data)  # an answer of one slice (most are): no generator, no join
    else:
        data = b"".join(_structure(data[at : at + step]) for at in range(0, len(data), step))
    data = data.replace(b'""', b"")
    if b'"' in data:
        data = _STRING.sub(b"", data)
    levels = 0
    while data and levels + len(data) // 2 > limit:
        rest = data.replace(b"[]", b"")
        levels += 1
        if len(rest) * 2 > len(data):
            data = rest
            break
        data = rest
    if levels + len(data) // 2 <= limit:
        return False
    if not data:
        return True  # every level taken out, and more of them than the limit
    level = levels  # the count, a block at a time: a text far too deep ends at its first block
    for at in range(0, len(data), _BLOCK):
        block = data[at : at + _BLOCK]
        if max(accumulate(map(_STEP.__getitem__, block), initial=level)) > limit:
            return True
        level += 2 * block.count(b"[") - len(block)
    return False


class McpError(Exception):
    """A protocol error, sent as a JSON-RPC error (a tool failure is a result)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> JSONObject:
        return error_object(self.code, self.message, self.data)


def error_object(code: int, message: str, data: Any = None) -> JSONObject:
    err: JSONObject = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return err


class NumberTooLong(ValueError):
    """A JSON integer longer than sys.get_int_max_str_digits (4,300) allows."""


LONE_SURROGATE: Final = re.compile("[\\ud800-\\udfff]")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON (RFC 8259), whatever Python's json module accepts by default.
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # 1e400 is JSON syntax but no float: Python reads it as inf, which dumps() then refuses, so a
    # result carrying it could never be sent (the request went unanswered). Refuse it when read.
    value = float(text)
    if math.isinf(value):
        raise ValueError("a number too large to represent")
    return value


def _valid_id(value: Any) -> bool:
    # MCP: "Request ID must be a string or integer" (never null, never a float, never a bool).
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# Made once: json.loads with any option builds a new decoder (and its scanner) on every call.
DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def loads(data: bytes | str) -> Any:
    """Strict JSON (UTF-8, no NaN/Infinity); else ValueError, depth included."""
    try:
        if isinstance(data, str):
            if data.startswith("\ufeff"):  # as json.loads: a text that kept its BOM was decoded wrongly
                raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        else:
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        if len(data) > SLICED_LOADS:
            try:
                return _loads_in_slices(data)
            except (ValueError, StopIteration, IndexError, RecursionError):
                pass  # not JSON after all (or too deep): the decoder's own reading says why
        return DECODER.decode(data)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # int()'s own refusal, raised inside json
            raise NumberTooLong(f"a number over {sys.get_int_max_str_digits()} digits long") from None
        raise


SLICED_LOADS: Final = 256 * 1024  # characters from which a text is decoded a slice at a time
# The C scanner DECODER.decode runs on, one value at a time, and its string reader (typeshed names
# neither): public for answers.py, which reads a gateway answer in pieces with them.
SCAN: Final[Callable[[str, int], tuple[Any, int]]] = getattr(DECODER, "scan_once")  # noqa: B009
SCAN_STRING: Final[Callable[[str, int, bool], tuple[str, int]]] = getattr(json.decoder, "scanstring")  # noqa: B009
SPACE: Final = re.compile(r"[ \t\n\r]*")


def _loads_in_slices(s: str) -> Any:
    """`DECODER.decode(s)`, the same value, decoded a slice at a time.

    The objects and the first _FEW items of each array, down to _DEEPEST levels (an answer's
    envelope), are walked member by member, and every other value decoded by the same C scanner on
    its own: each call decodes one member or one item of a long array. Whatever does not read as
    JSON here (a trailing comma, extra data) raises, and the caller's decoder reads it again, to
    say why.
    """
    i = SPACE.match(s, 0).end()  # type: ignore[union-attr]
    value, i = _walk_value(s, i, 0)
    if SPACE.match(s, i).end() != len(s):  # type: ignore[union-attr]
        raise ValueError("extra data")
    return value


def _walk_value(s: str, i: int, depth: int) -> tuple[Any, int]:
    opening = s[i]
    if depth >= _DEEPEST or (opening != "{" and opening != "["):
        return SCAN(s, i)
    space = SPACE.match
    i = space(s, i + 1).end()  # type: ignore[union-attr]
    if opening == "{":
        members: dict[str, Any] = {}
        if s[i] == "}":
            return members, i + 1
        while True:
            if s[i] != '"':
                raise ValueError("a name was expected")
            name, i = SCAN_STRING(s, i + 1, True)
            i = space(s, i).end()  # type: ignore[union-attr]
            if s[i] != ":":
                raise ValueError("a colon was expected")
            i = space(s, i + 1).end()  # type: ignore[union-attr]
            members[name], i = _walk_value(s, i, depth + 1)
            i = space(s, i).end()  # type: ignore[union-attr]
            if s[i] == "}":
                return members, i + 1
            if s[i] != ",":
                raise ValueError("a comma was expected")
            i = space(s, i + 1).end()  # type: ignore[union-attr]
    items: list[Any] = []
    if s[i] == "]":
        return items, i + 1
    while True:
        item, i = _walk_value(s, i, depth + 1) if len(items) < _FEW else SCAN(s, i)
        items.append(item)
        i = space(s, i).end()  # type: ignore[union-attr]
        if s[i] == "]":
            return items, i + 1
        if s[i] != ",":
            raise ValueError("a comma was expected")
        i = space(s, i + 1).end()  # type: ignore[union-attr]


def lone_surrogate(value: Any, root: tuple[str | int, ...] = ()) -> str | None:
    """Where in a decoded JSON value (a string or key) a lone surrogate sits.

    JSON's `\\ud800` escape decodes to a code point that is not Unicode text: it cannot be encoded
    as UTF-8, so it can go nowhere (RFC 8259 §8.2: "unpredictable"; I-JSON, RFC 7493 §2.1: MUST
    NOT). Iterative, so JSON nested to the parser's limit cannot exhaust the stack here. `root` is
    where `value` itself sits, for the path returned.
    """
    if not _holds_lone_surrogate(value):
        return None  # the usual case, found without building a path for every value on the way
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, root)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and LONE_SURROGATE.search(item):
                return _path(path)
        elif isinstance(item, dict):
            for key in reversed(item):  # reversed: the first in document order is found first
                if isinstance(key, str) and not key.isascii() and LONE_SURROGATE.search(key):
                    return f"a key of {_path(path)}" if path else "a key"
                stack.append((item[key], (*path, key)))
        elif isinstance(item, list):
            stack.extend((item[i], (*path, i)) for i in range(len(item) - 1, -1, -1))
    return None


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether any string or key in `value` holds a lone surrogate."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and not key.isascii() and LONE_SURROGATE.search(key):
                    return True
            items: Any = item.values()
        elif isinstance(item, list):
            items = item
        else:
            items = (item,)
        for child in items:
            if isinstance(child, str):
                if not child.isascii() and LONE_SURROGATE.search(child):
                    return True
            elif isinstance(child, (dict, list)):
                stack.append(child)
    return False


def _path(path: tuple[str | int, ...]) -> str:
    """A JSON path a person can read: `_meta["x402/payment"].payload`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part[:64])}]"  # ASCII-escaped: a surrogate in a key shows as \\udXXX
    return out


def classify(obj: Any) -> Message:
    """One decoded JSON value → the message it is (or the error it earns)."""
    if not isinstance(obj, dict):
        return Invalid(None, error_object(INVALID_REQUEST, "Invalid Request: a message must be a JSON object"))
    raw_id = obj.get("id")
    has_id = "id" in obj
    msg_id: Id | None = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(msg_id, error_object(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
    method = obj.get("method")
    if method is None and ("result" in obj or "error" in obj):
        return ClientResponse(msg_id)
    if not isinstance(method, str):
        return Invalid(msg_id, error_object(INVALID_REQUEST, 'Invalid Request: "method" must be a string'))
    params = obj.get("params", {})
    if has_id and not _valid_id(raw_id):
        return Invalid(None, error_object(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        if not has_id:
            return Notification(method, {})  # a malformed notification is ignored, never answered
        return Invalid(msg_id, error_object(INVALID_PARAMS, 'Invalid params: "params" must be an object'))
    if not has_id:
        return Notification(method, params)
    assert msg_id is not None
    return Request(msg_id, method, params)


def parse(data: bytes) -> Message | Batch:
    """One framed message's bytes → a message, a batch, or the error to send."""
    try:
        text = data.decode("utf-8")
        obj = loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        reason = "not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc).split(":")[0]
        return Invalid(None, error_object(PARSE_ERROR, f"Parse error: {reason}"))
    if isinstance(obj, list):
        if not obj:
            return Invalid(None, error_object(INVALID_REQUEST, "Invalid Request: an empty batch"))
        return Batch(tuple(classify(item) for item in obj))
    return classify(obj)


def response(msg_id: Id | None, result: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def error_response(msg_id: Id | None, error: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def notification(method: str, params: JSONObject) -> JSONObject:
    return {"jsonrpc": "2.0", "method": method, "params": params}


# Where a Verbatim value goes in the encoded message, until its bytes are put there. Random per
# process, so no string a gateway writes can pose as one (and each is looked for where it must be).
# (os.urandom, not secrets: that module imports hashlib, hmac and OpenSSL's libcrypto at start.)
_SPLICE: Final = f"fairwins-mcp-verbatim-{os.urandom(16).hex()}-"

Part = bytes | memoryview | str  # a str part is ASCII (a Verbatim's text): see `pieces`
_SLICE: Final = 64 * 1024


def pieces(parts: Sequence[Part]) -> Iterator[bytes | memoryview]:
    """`parts` as bytes to write in turn; a text part a slice at a time."""
    for part in parts:
        if isinstance(part, str):
            for at in range(0, len(part), _SLICE):
                yield part[at : at + _SLICE].encode("ascii")
        else:
            yield part


def dumps(message: Any) -> bytes:
    """Compact ASCII JSON, with no raw newline, U+2028 or lone surrogate."""
    if isinstance(message, Encoded):
        return message.data
    parts = encode(message)
    if len(parts) == 1 and isinstance(parts[0], bytes):
        return parts[0]
    return b"".join(pieces(parts))


def _mended(text: str, message: Any) -> str:
    """The encoded `message`, its lone surrogates as U+FFFD but for its id.

    An id is the client's own, and JSON-RPC has it echoed exactly ("MUST be the same as the value
    of the id member in the Request Object"); the official SDKs never send one holding half a
    character, so they never read one back. Responses put "jsonrpc" then "id" first (`response`).
    """
    msg_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(msg_id, str) and not msg_id.isascii():
        head = f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},'
        if text.startswith(head):
            return head + well_formed(text[len(head) :])
    return well_formed(text)


def encode(message: Any) -> list[Part]:
    """`dumps` as the parts to write one after another (`pieces`).

    Each Verbatim value's text is a part of its own; the rest is encoded once, with a marker where
    each goes: the message is never held as one piece, so a large answer is not copied to be sent.
    """
    if isinstance(message, Encoded):
        return [message.data]
    found: list[Verbatim] = []

    def mark(value: object) -> str:
        if isinstance(value, Verbatim):
            found.append(value)
            return f"{_SPLICE}{len(found) - 1}"
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    text = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=mark)
    data = _mended(text, message).encode("ascii")
    del text
    if not found:
        return [data]
    view = memoryview(data)
    parts: list[Part] = []
    at = 0
    for index, value in enumerate(found):
        marker = f'"{_SPLICE}{index}"'.encode("ascii")
        place = data.find(marker, at)
        # Exactly once: a gateway string spelling a marker (it would need this process's random
        # part) could not move a value.
        if place < 0 or data.find(marker, place + 1) >= 0:
            raise ValueError("a verbatim value's place is not unique")
        parts.append(view[at:place])
        if isinstance(value.data, tuple):
            parts.extend(value.data)
        else:
            parts.append(value.data)
        at = place + len(marker)
    parts.append(view[at:])
    return [part for part in parts if len(part)]
