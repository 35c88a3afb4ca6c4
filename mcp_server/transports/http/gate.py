"""The HTTP gate: a pure function of method, path and headers.

Applied before any body is read. Order matters: who may ask (Host, Origin) is settled before what
they ask (method, media types, size, protocol version), so a refused browser page learns nothing
else about the server. The request's framing was decided before the gate ran (head.py): a head whose
framing is ambiguous never reaches it. Total: any header value, however malformed, is a decision,
never an exception.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from mcp_server.transports.http.head import content_length
from mcp_server.upstream.exchange import is_loopback_host
from mcp_server.wire.jsonrpc import UNSUPPORTED_VERSION
from mcp_server.wire.versions import SUPPORTED_VERSIONS

MCP_PATH: Final = "/mcp"
HEALTH_PATH: Final = "/healthz"
METRICS_PATH: Final = "/metrics"
# Paths besides /mcp: path → (route, the methods it answers). Read-only routes that take no body
# and no Origin rules (a health check is not a browser API). /metrics is served on the MCP port
# only with --metrics-on-mcp-port; the metrics listener (--metrics) serves it and nothing else.
PLAIN_ROUTES: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    HEALTH_PATH: ("health", ("GET", "HEAD")),
    METRICS_PATH: ("metrics", ("GET", "HEAD")),
}


@dataclass(frozen=True, slots=True)
class Policy:
    loopback_bind: bool  # bound to a loopback address: only loopback Host headers are served
    allowed_origins: frozenset[str] = frozenset()  # normalised "scheme://host[:port]"
    max_body: int = 1024 * 1024
    metrics: bool = False  # serve GET /metrics
    metrics_only: bool = False  # the metrics listener: GET /metrics, and every other path is 404
    # OAuth mode: the paths of the protected resource's metadata (RFC 9728), read by anyone, CORS `*`.
    resource_metadata: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Admit:
    """Serve it: `route` names a routes.ROUTES entry, `cors` an origin to echo."""

    route: str
    cors: str | None = None
    chunked: bool = False
    length: int = 0


@dataclass(frozen=True, slots=True)
class Refuse:
    status: int
    error: str  # a short machine-readable code, e.g. "origin_not_allowed"
    message: str
    allow: str | None = None
    jsonrpc_code: int | None = None  # when the refusal is also a JSON-RPC error (version)
    data: object = None
    cors: str | None = None


def normalise_origin(origin: str) -> str | None:
    """`scheme://host[:port]`, lower-cased, default ports dropped, or None.

    Whatever the value ("http://[::1", "http://]", a port out of range), the answer is None, not
    an exception: urlsplit raises ValueError for some of them, and so may reading .port.
    """
    value = origin.strip()
    if not value.isascii() or any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    try:
        parts = urllib.parse.urlsplit(value)
        hostname, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not hostname or parts.path not in ("", "/"):
        return None
    if parts.username or parts.password or parts.query or parts.fragment:
        return None
    host = hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def _is_loopback_name(host: str) -> bool:
    """Whether a Host header's host ("[::1]", "localhost") is this machine."""
    return is_loopback_host(host.strip("[]"))


def _host_name(host_header: str) -> str | None:
    """The host of a Host header ("[::1]:1" → "[::1]"); None if malformed."""
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        return value[: end + 1]
    name, _, port = value.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        return None
    return name or None


def origin_allowed(origin: str, policy: Policy) -> str | None:
    """The origin to echo in CORS headers when it may be served, else None."""
    norm = normalise_origin(origin)
    if norm is None:
        return None  # "null", file:// pages, garbage: a present origin that is not allowed
    host = urllib.parse.urlsplit(norm).hostname or ""
    if norm.startswith("http://") and _is_loopback_name(host):
        return origin.strip()
    if norm in policy.allowed_origins:
        return origin.strip()
    return None


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def accepts(accept: str | None, media: str) -> bool:
    """Whether an Accept header admits `media`: by name, wildcard, or absence."""
    if accept is None or not accept.strip():
        return True  # no Accept header means anything is acceptable (RFC 9110 §12.5.1)
    major = media.split("/", 1)[0]
    for item in accept.split(","):
        kind, _, params = item.partition(";")
        kind = kind.strip().lower()
        if "q=0" in params.replace(" ", "") and not any(ch in params for ch in "123456789"):
            continue  # q=0 means "not acceptable"
        if kind in (media, "*/*", f"{major}/*"):
            return True
    return False


def check(
    method: str, path: str, headers: Mapping[str, str], policy: Policy, host: str | None = None
) -> Admit | Refuse:
    """Decide a request from its request line and headers (names lower-cased).

    `host` is the request's host when it came from elsewhere than the Host header (an
    absolute-form request target, RFC 9112 §3.2.2).
    """
    route_path = path.split("?", 1)[0]
    if policy.loopback_bind:
        # DNS rebinding: an attacker's page resolves its own name to 127.0.0.1 but keeps its
        # own Host header; only loopback names may reach a loopback-bound server.
        name = _host_name(host if host is not None else headers.get("host", ""))
        if name is None or not _is_loopback_name(name):
            return Refuse(403, "host_not_allowed", "This server only answers requests addressed to localhost")
    if policy.metrics_only and route_path != METRICS_PATH:
        return Refuse(404, "not_found", "Not found: this port serves GET /metrics only")
    other = _other_route(method, route_path, policy)
    if other is not None:
        return other
    if route_path != MCP_PATH:
        return Refuse(404, "not_found", "Not found: the MCP endpoint is POST /mcp")
    return _mcp(method, headers, policy)


def _other_route(method: str, route_path: str, policy: Policy) -> Admit | Refuse | None:
    """The decision for a path besides /mcp that this server answers, or None."""
    plain = PLAIN_ROUTES.get(route_path)
    if plain is not None and (plain[0] != "metrics" or policy.metrics):
        route, methods = plain
        if method in methods:
            return Admit(route)
        allow = ", ".join(methods)
        return Refuse(405, "method_not_allowed", f"Use {methods[0]} for {route_path}", allow=allow)
    if route_path in policy.resource_metadata:
        if method in ("GET", "HEAD"):
            return Admit("resource-metadata", "*")
        if method == "OPTIONS":
            return Admit("preflight", "*")
        return Refuse(405, "method_not_allowed", f"Use GET for {route_path}", allow="GET, HEAD, OPTIONS")
    return None


def _mcp(method: str, headers: Mapping[str, str], policy: Policy) -> Admit | Refuse:
    """The decision for a request to /mcp: who may ask (Origin) before what."""
    cors: str | None = None
    origin = headers.get("origin")
    if origin is not None:
        # "Servers MUST validate the Origin header ... If the Origin header is present and
        # invalid, servers MUST respond with HTTP 403 Forbidden." CORS alone never protected
        # anything: a text/plain POST is sent without a preflight.
        cors = origin_allowed(origin, policy)
        if cors is None:
            return Refuse(403, "origin_not_allowed", "This origin is not allowed to use this server")
    if method == "OPTIONS":
        return Admit("preflight", cors)
    if method != "POST":
        return Refuse(
            405,
            "method_not_allowed",
            "This endpoint takes POST only (no sessions, no GET stream)",
            allow="POST",
            cors=cors,
        )
    if _media_type(headers.get("content-type", "")) != "application/json":
        return Refuse(415, "unsupported_media_type", "Content-Type must be application/json", cors=cors)
    accept = headers.get("accept")
    if not accepts(accept, "application/json") and not accepts(accept, "text/event-stream"):
        return Refuse(406, "not_acceptable", "Accept must admit application/json or text/event-stream", cors=cors)
    framing = _framing(headers, policy, cors)
    if isinstance(framing, Refuse):
        return framing
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in SUPPORTED_VERSIONS:
        return Refuse(
            400,
            "unsupported_protocol_version",
            f"Unsupported protocol version: {version}",
            jsonrpc_code=UNSUPPORTED_VERSION,
            data={"supported": list(SUPPORTED_VERSIONS), "requested": version},
            cors=cors,
        )
    chunked, length = framing
    return Admit("mcp", cors, chunked, length)


def _framing(headers: Mapping[str, str], policy: Policy, cors: str | None) -> tuple[bool, int] | Refuse:
    """The body's framing (chunked, Content-Length), or why it is refused."""
    encoding = headers.get("transfer-encoding")
    if encoding is not None:
        if encoding.strip().lower() != "chunked" or "content-length" in headers:
            # Both framings at once is how requests are smuggled past a proxy (RFC 9112 §6.3).
            return Refuse(400, "bad_framing", "Use either Content-Length or Transfer-Encoding: chunked", cors=cors)
        return True, 0
    raw = headers.get("content-length")
    if raw is None:
        return Refuse(411, "length_required", "Content-Length is required", cors=cors)
    length = content_length(raw.strip())
    if length is None:
        return Refuse(400, "bad_content_length", "Content-Length must be a non-negative integer", cors=cors)
    if length > policy.max_body:
        return Refuse(413, "body_too_large", f"The body is over the {policy.max_body} byte limit", cors=cors)
    return False, length
