"""The MCP Apps extension (`io.modelcontextprotocol/ui`): pure values.

The stable 2026-01-26 extension, as negotiated, with no I/O. "MCP Apps is optional and must be
explicitly negotiated between clients and servers through the extension capabilities mechanism." A
client declares it in `capabilities.extensions` (the 2025-11-25 `initialize`) or in the request's
client capabilities (`_meta`, 2026-07-28); one that does not is served no views.
"""

from __future__ import annotations

import re
from typing import Final

from mcp_server.wire.jsonrpc import JSONObject

UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
UI_MIME_TYPE: Final = "text/html;profile=mcp-app"
# Stateless HTTP cannot carry a 2025-11-25 handshake to the POSTs after it, so the one fact views
# need from it (the client declared them) travels in the session id the server issues at that
# `initialize`, which the client MUST send on every later request. Nothing is stored: any worker
# or instance reads it, and an id of any other form is a request without a session.
VIEWS_SESSION_PREFIX: Final = "fw-ui-"
_VIEWS_SESSION: Final = re.compile(r"fw-ui-[0-9a-f]{32}")
# 2025-11-25 added `icons` to Implementation and Tool; the modern revision keeps them.
ICON_VERSIONS: Final = frozenset({"2025-11-25", "2026-07-28"})


def wants_ui(capabilities: object) -> bool:
    """Whether client capabilities list the UI extension's HTML profile."""
    if not isinstance(capabilities, dict):
        return False
    extensions = capabilities.get("extensions")
    ui = extensions.get(UI_EXTENSION) if isinstance(extensions, dict) else None
    mime_types = ui.get("mimeTypes") if isinstance(ui, dict) else None
    return isinstance(mime_types, list) and UI_MIME_TYPE in mime_types


def with_extension(capabilities: JSONObject) -> JSONObject:
    """Server capabilities advertising the extension (SEP-1724: `extensions`)."""
    extensions = dict(capabilities.get("extensions") or {})
    extensions[UI_EXTENSION] = {}
    return {**capabilities, "extensions": extensions}


def with_view(definition: JSONObject, uri: str) -> JSONObject:
    """A tool definition naming its view in `_meta.ui`, not the deprecated key."""
    meta = dict(definition.get("_meta") or {})
    meta["ui"] = {"resourceUri": uri}
    return {**definition, "_meta": meta}


def with_icons(definition: JSONObject, icons: list[JSONObject]) -> JSONObject:
    return {**definition, "icons": icons} if icons else definition


def views_session_id() -> str:
    """A session id saying its client declared the views.

    The specification asks for one "globally unique and cryptographically secure".
    """
    import secrets  # only an HTTP handshake that declares the views needs it: not on the stdio start path

    return VIEWS_SESSION_PREFIX + secrets.token_hex(16)


def session_capabilities(session_id: str | None) -> JSONObject:
    """The client capabilities a session id vouches for: the views', or none."""
    if session_id is None or _VIEWS_SESSION.fullmatch(session_id.strip()) is None:
        return {}
    return {"extensions": {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}}
