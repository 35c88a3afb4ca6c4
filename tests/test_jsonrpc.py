"""jsonrpc: bytes in, message values out (never an exception); values in, one safe line of bytes out."""

from __future__ import annotations

import json

import pytest

from mcp_server.wire import jsonrpc
from mcp_server.wire.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Batch,
    ClientResponse,
    Invalid,
    McpError,
    Notification,
    Request,
    parse,
)


def test_a_request_is_read_with_its_id_method_and_params() -> None:
    message = parse(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":null}}')
    assert message == Request(7, "tools/list", {"cursor": None})


@pytest.mark.parametrize("request_id", [0, "", "01", "abc", -5, 2**53])
def test_string_and_integer_ids_are_kept_exactly(request_id: object) -> None:
    message = parse(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode())
    assert isinstance(message, Request)
    assert message.id == request_id and type(message.id) is type(request_id)


@pytest.mark.parametrize("bad_id", [None, 1.5, True, [1], {"a": 1}])
def test_an_id_that_is_not_a_string_or_integer_is_an_invalid_request(bad_id: object) -> None:
    message = parse(json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "ping"}).encode())
    assert isinstance(message, Invalid)
    assert message.error["code"] == INVALID_REQUEST
    assert message.id is None


def test_a_message_without_id_is_a_notification() -> None:
    assert parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == Notification(
        "notifications/initialized", {}
    )


def test_a_notification_with_bad_params_is_still_a_notification_so_it_is_never_answered() -> None:
    assert parse(b'{"jsonrpc":"2.0","method":"x","params":[1,2]}') == Notification("x", {})


def test_a_request_with_params_that_are_not_an_object_is_invalid_params_under_its_id() -> None:
    message = parse(b'{"jsonrpc":"2.0","id":"a","method":"x","params":[1,2]}')
    assert isinstance(message, Invalid)
    assert message.id == "a" and message.error["code"] == INVALID_PARAMS


def test_null_params_are_read_as_no_params() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":null}') == Request(1, "ping", {})


def test_a_client_response_is_recognised_so_it_can_be_dropped() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":3,"result":{}}') == ClientResponse(3)
    assert parse(b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}') == ClientResponse(3)


@pytest.mark.parametrize(
    "data",
    [
        b'{"id":1,"method":"ping"}',
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":2.0,"id":1,"method":"ping"}',
    ],
)
def test_a_message_without_jsonrpc_2_0_is_an_invalid_request_keeping_a_readable_id(data: bytes) -> None:
    message = parse(data)
    assert isinstance(message, Invalid)
    assert message.error["code"] == INVALID_REQUEST and message.id == 1


@pytest.mark.parametrize("data", [b'{"jsonrpc":"2.0","id":1}', b'{"jsonrpc":"2.0","id":1,"method":5}'])
def test_a_request_without_a_string_method_is_an_invalid_request(data: bytes) -> None:
    message = parse(data)
    assert isinstance(message, Invalid) and message.error["code"] == INVALID_REQUEST


@pytest.mark.parametrize("data", [b"42", b'"ping"', b"null", b"true"])
def test_a_json_value_that_is_not_an_object_is_an_invalid_request_with_a_null_id(data: bytes) -> None:
    message = parse(data)
    assert isinstance(message, Invalid)
    assert message.id is None and message.error["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b'{"jsonrpc":"2.0","id":1,"method":"ping"',
        b"",
        b"\xff\xfe{}",  # not UTF-8
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}',
        b"[" * 100_000 + b"]" * 100_000,  # nested too deeply for the parser
    ],
)
def test_unreadable_bytes_are_a_parse_error_with_a_null_id_and_never_raise(data: bytes) -> None:
    message = parse(data)
    assert isinstance(message, Invalid)
    assert message.id is None
    assert message.error["code"] == PARSE_ERROR
    assert message.error["message"].startswith("Parse error")


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1E+999"])
def test_a_number_too_large_for_a_float_is_refused_when_read_not_when_answered(number: bytes) -> None:
    # Read as inf, it could never be written back (dumps refuses inf): refuse it on the way in.
    message = parse(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + number + b"}}")
    assert isinstance(message, Invalid) and message.error["code"] == PARSE_ERROR
    with pytest.raises(ValueError):
        jsonrpc.loads(b'{"x":' + number + b"}")


def test_large_but_finite_numbers_are_read() -> None:
    assert jsonrpc.loads(b'{"x":1e300,"y":123456789012345678901234567890}') == {
        "x": 1e300,
        "y": 123456789012345678901234567890,
    }


def test_a_json_array_is_a_batch_of_classified_items() -> None:
    batch = parse(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"},7]')
    assert isinstance(batch, Batch)
    assert batch.items[0] == Request(1, "ping", {})
    assert batch.items[1] == Notification("n", {})
    assert isinstance(batch.items[2], Invalid)


def test_an_empty_array_is_an_invalid_request_not_an_empty_batch() -> None:
    message = parse(b"[]")
    assert isinstance(message, Invalid) and message.error["code"] == INVALID_REQUEST


def test_dumps_writes_one_compact_ascii_line_even_for_line_separators_and_a_lone_surrogate_as_u_fffd() -> None:
    value = {"text": "a\nb\u2028c\u2029d\x85e\ud800f café"}
    data = jsonrpc.dumps(value)
    assert b"\n" not in data and b"\r" not in data
    data.decode("ascii")  # raises if anything non-ASCII reached the wire
    assert b", " not in data and b": " not in data
    # A lone surrogate is no text a client's reader takes (the official Python SDK's refuses the
    # whole message): it is written as U+FFFD (jsonrpc.well_formed).
    assert json.loads(data) == {"text": "a\nb\u2028c\u2029d\x85e\ufffdf café"}


def test_dumps_refuses_nan_rather_than_writing_invalid_json() -> None:
    with pytest.raises(ValueError):
        jsonrpc.dumps({"x": float("nan")})


def test_response_and_error_shapes_are_json_rpc_2_0() -> None:
    assert jsonrpc.response("a", {"x": 1}) == {"jsonrpc": "2.0", "id": "a", "result": {"x": 1}}
    err = jsonrpc.error_object(-32601, "Method not found: x")
    assert "data" not in err
    assert jsonrpc.error_response(None, err) == {"jsonrpc": "2.0", "id": None, "error": err}
    assert McpError(-32002, "Resource not found", {"uri": "u"}).to_error() == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"uri": "u"},
    }
    assert jsonrpc.notification("notifications/progress", {"progress": 1}) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progress": 1},
    }


def test_an_id_holding_half_a_character_is_echoed_exactly_and_everything_else_is_mended() -> None:
    # JSON-RPC: the response's id "MUST be the same as the value of the id member in the Request Object".
    message = jsonrpc.error_response("id-\ud800", jsonrpc.error_object(-32601, "Method not found: x\ud800"))
    data = jsonrpc.dumps(message)
    assert data.startswith(b'{"jsonrpc":"2.0","id":"id-\\ud800",')
    assert json.loads(data)["error"]["message"] == "Method not found: x\ufffd"
