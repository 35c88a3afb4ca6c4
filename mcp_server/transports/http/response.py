"""What goes back: a status line and headers (always with Content-Length or chunked), and the JSON error body."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from http import HTTPStatus
from typing import Final

from mcp_server import __version__

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
    """The status line and header section. `length` None: the body is chunked (an SSE stream)."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, '')}", f"Server: {SERVER_HEADER}", f"Date: {http_date()}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    if extra:
        lines.extend(f"{name}: {value}" for name, value in extra.items())
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": code, "message": message}, separators=(",", ":")).encode("utf-8")


def error_code(body: bytes) -> str | None:
    """The `error` of a body error_body made; None for any other body (a JSON-RPC error, say)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    code = value.get("error") if isinstance(value, dict) else None
    return code if isinstance(code, str) else None
