"""The shapes of what a server offers: tools, resources, prompts, views.

The dispatcher serves whatever `Catalog` it is given; the shipped server composes one from the
snapshot and the gateway, and the conformance tests another from their fixtures.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mcp_server.core.context import RequestContext
from mcp_server.core.steps import Steps
from mcp_server.wire.jsonrpc import JSONObject


class Tool(Protocol):
    name: str

    def definition(self) -> JSONObject: ...

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        """A CallToolResult (a failure has isError; only McpError raises)."""


class Resource(Protocol):
    uri: str
    ttl_ms: int
    cache_scope: str  # "public" or "private" (2026-07-28 caching hints)

    def definition(self) -> JSONObject: ...

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        """The `contents` list; McpError naming why a live source is unreadable."""


class ResourceTemplate(Protocol):
    ttl_ms: int
    cache_scope: str

    def definition(self) -> JSONObject: ...

    def read(self, uri: str, ctx: RequestContext) -> list[JSONObject] | None:
        """Contents for a matching `uri`; None when the URI is not this template's."""

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]: ...


class View(Protocol):
    """An MCP Apps view (`ui://`), for clients declaring the extension."""

    # Read-only, so a frozen dataclass is one.
    @property
    def uri(self) -> str: ...

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools whose results it renders."""

    @property
    def ttl_ms(self) -> int: ...

    @property
    def cache_scope(self) -> str: ...

    def definition(self) -> JSONObject: ...

    def read(self, ctx: RequestContext) -> list[JSONObject]: ...


class Prompt(Protocol):
    name: str

    def definition(self) -> JSONObject: ...

    def get(self, arguments: dict[str, str], ctx: RequestContext) -> JSONObject:
        """`{"description"?, "messages"}`; McpError(-32602) for bad arguments."""

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]: ...


class Payments(Protocol):
    """How a catalogue words and guards calls that bring an x402 payment.

    The dispatcher decides whether a payment may be forwarded (one per inbound message, only to a
    tool that can be priced); the catalogue owns the sentences a caller reads about it.
    """

    def refused(self, reason: str) -> JSONObject: ...

    def refused_unpriced(self, tool: str) -> JSONObject: ...

    def guarded_steps(self, call: Steps[JSONObject], ctx: RequestContext) -> Steps[JSONObject]:
        """The call's steps; its result always says what became of the payment."""


@dataclass(frozen=True)
class Catalog:
    tools: Sequence[Tool] = ()
    resources: Sequence[Resource] = ()
    templates: Sequence[ResourceTemplate] = ()
    prompts: Sequence[Prompt] = ()
    instructions: str = ""
    list_ttl_ms: int = 300_000  # lists never vary per caller here, so clients may cache them
    payments: Payments | None = None  # None: a catalogue that takes no payment refuses every one
    views: Sequence[View] = ()  # MCP Apps views, offered only to clients that declare the extension
    icons: Sequence[JSONObject] = ()  # 2025-11-25 Icon objects for the server and for each tool (tool_icons)
    tool_icons: Sequence[JSONObject] = ()


# ---- content blocks and resource contents (spec: ContentBlock, TextResourceContents, BlobResourceContents) ----
# Binary payloads travel as base64 ("Servers MUST ... properly encode binary data"), so callers
# hand over bytes and never build the encoding themselves.


def text_content(text: str) -> JSONObject:
    return {"type": "text", "text": text}


def image_content(data: bytes, mime_type: str) -> JSONObject:
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def audio_content(data: bytes, mime_type: str) -> JSONObject:
    return {"type": "audio", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def text_contents(uri: str, mime_type: str, text: str) -> JSONObject:
    """One `resources/read` entry (or embedded resource) holding text."""
    return {"uri": uri, "mimeType": mime_type, "text": text}


def blob_contents(uri: str, mime_type: str, data: bytes) -> JSONObject:
    """One `resources/read` entry (or embedded resource) holding bytes."""
    return {"uri": uri, "mimeType": mime_type, "blob": base64.b64encode(data).decode("ascii")}


def embedded_resource(contents: JSONObject) -> JSONObject:
    """A content block (`"resource"`) carrying a resource's contents inline."""
    return {"type": "resource", "resource": contents}
