"""Sans-I/O JSON-RPC 2.0: bytes in, message values out; message values in, bytes out.

Nothing here raises for bad input: an unreadable message is returned as an `Invalid` value that
carries the error to send back, so every transport answers malformed input the same way.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Final

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
    """A response the client sent us. The server never asks the client anything, so it is dropped."""

    id: Id | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """Input that must be answered with `error` under `id` (None when the id could not be read)."""

    id: Id | None
    error: JSONObject


Message = Request | Notification | ClientResponse | Invalid


@dataclass(frozen=True, slots=True)
class Batch:
    """A JSON array of messages (2025-03-26 only; the dispatcher decides whether to accept it)."""

    items: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Encoded:
    """A message already encoded by `dumps` (a batch's answers are encoded as they are made, to bound memory)."""

    data: bytes


class McpError(Exception):
    """A protocol error to send as a JSON-RPC error object (never a tool failure: those are results)."""

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
    """A JSON integer with more digits than Python converts (sys.get_int_max_str_digits, 4,300 by default)."""


_LONE_SURROGATE: Final = re.compile("[\\ud800-\\udfff]")
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
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def loads(data: bytes | str) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity; raises ValueError (depth included) on anything else."""
    try:
        if isinstance(data, str):
            if data.startswith("\ufeff"):  # as json.loads: a text that kept its BOM was decoded wrongly
                raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        else:
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        return _DECODER.decode(data)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # int()'s own refusal, raised inside json
            raise NumberTooLong(f"a number over {sys.get_int_max_str_digits()} digits long") from None
        raise


def lone_surrogate(value: Any, root: tuple[str | int, ...] = ()) -> str | None:
    """Where in a decoded JSON value a string or key holds a lone UTF-16 surrogate; None when all is text.

    JSON's `\\ud800` escape decodes to a code point that is not Unicode text: it cannot be encoded
    as UTF-8, so it can go nowhere (RFC 8259 §8.2: "unpredictable"; I-JSON, RFC 7493 §2.1: MUST
    NOT). Iterative, so JSON nested to the parser's limit cannot exhaust the stack here. `root` is
    where `value` itself sits, for the path returned.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, root)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _LONE_SURROGATE.search(item):
                return _path(path)
        elif isinstance(item, dict):
            for key in reversed(item):  # reversed: the first in document order is found first
                if isinstance(key, str) and not key.isascii() and _LONE_SURROGATE.search(key):
                    return f"a key of {_path(path)}" if path else "a key"
                stack.append((item[key], (*path, key)))
        elif isinstance(item, list):
            stack.extend((item[i], (*path, i)) for i in range(len(item) - 1, -1, -1))
    return None


def _path(path: tuple[str | int, ...]) -> str:
    """`arguments.params.memo[1]`, `_meta["x402/payment"].payload`: a JSON path a person can read."""
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
    """Bytes of one framed message → a message, a batch, or the error to answer with."""
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


def dumps(message: Any) -> bytes:
    """Compact, ASCII-only JSON: no raw newline, U+2028 or lone surrogate can reach a line-framed wire."""
    if isinstance(message, Encoded):
        return message.data
    return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
