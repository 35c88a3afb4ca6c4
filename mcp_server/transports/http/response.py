"""The bytes of an HTTP answer: its head and a refusal's body.

A head always says its framing: Content-Length, or chunked; a refusal's body is a JSON-RPC error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Final

from mcp_server import __version__
from mcp_server.wire.jsonrpc import (
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    SERVER_ERROR,
    Id,
    dumps,
    error_object,
    error_response,
)

SERVER_HEADER: Final = f"fairwins-mcp/{__version__}"
REASONS: Final[dict[int, str]] = {status.value: status.phrase for status in HTTPStatus}
_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """IMF-fixdate for the Date header (RFC 9110 §5.6.7), made once a second."""
    global _date_cache
    now = int(time.time())
    second, text = _date_cache
    if second != now:
        t = time.gmtime(now)
        text = (
            f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
        )
        _date_cache = (now, text)
    return text


def head(
    status: int,
    length: int | None,
    *,
    content_type: str | None = "application/json",
    extra: Mapping[str, str] | None = None,
    close: bool = False,
) -> bytes:
    """An answer's status line and headers; `length` None: chunked (SSE)."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, '')}", f"Server: {SERVER_HEADER}", f"Date: {http_date()}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    if extra:
        lines.extend(f"{name}: {value}" for name, value in extra.items())
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# A refusal's body is a JSON-RPC error response, as the Streamable HTTP transport allows for the
# answer to a POST ("the HTTP response body MAY comprise a JSON-RPC error response"), so an MCP
# client shows the member its sentence. Its JSON-RPC code, by the refusal's own code (kept in
# `error.data.error`): the request as sent cannot be taken (-32600) unless it is one of these.
UNAUTHORIZED: Final = -32010  # the bearer cannot be used as sent (400 escaped_bearer), or is missing or refused (401)
FORBIDDEN: Final = -32011  # the Host or Origin is not one this server answers, or a token's scopes fall short (403)
REFUSAL_CODES: Final[dict[str, int]] = {
    "busy": SERVER_ERROR,  # a bound of this server reached (503; 429 for one address): retry later
    "too_many_connections": SERVER_ERROR,
    "too_many_unfinished_requests": SERVER_ERROR,
    "request_timeout": REQUEST_TIMEOUT,  # the request did not arrive within the read timeout (408)
    "escaped_bearer": UNAUTHORIZED,
    "sign_in_required": UNAUTHORIZED,  # OAuth mode (door.py): 401, a call that needs the member
    "invalid_token": UNAUTHORIZED,  # 401, a token refused
    "insufficient_scope": FORBIDDEN,  # 403, a token without the call's scopes
    "authorization_server_unreachable": SERVER_ERROR,  # 503, its keys could not be read
    "host_not_allowed": FORBIDDEN,
    "origin_not_allowed": FORBIDDEN,
}


def error_body(code: str, message: str, request_id: Id | None = None) -> bytes:
    """A refusal as the body of a JSON-RPC error response.

    `message` is the sentence, `data.error` the refusal's code, and `request_id` the request's id
    when its body was read before it was refused (else null).
    """
    error = error_object(REFUSAL_CODES.get(code, INVALID_REQUEST), message, {"error": code})
    return dumps(error_response(request_id, error))


def error_code(body: bytes) -> str | None:
    """The refusal's code in a body error_body made; None for any other body."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None
