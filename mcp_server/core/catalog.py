"""The shapes of tools, resources, resource templates and prompts.

They are what a server offers. The dispatcher serves whatever `Catalog` it is given; the shipped
server composes one from the snapshot and the gateway, and the conformance tests compose another
from their fixtures.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mcp_server.core.context import RequestContext
from mcp_server.core.steps import Steps
from mcp_server.wire.jsonrpc import JSONObject


class Tool(Protocol):
    name: str

    def definition(self) -> JSONObject: ...

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        """A CallToolResult.

        Tool failures are results with isError; only protocol errors raise McpError.
        """
        ...


class Resource(Protocol):
    uri: str
    ttl_ms: int
    cache_scope: str  # "public" or "private" (2026-07-28 caching hints)

    def definition(self) -> JSONObject: ...

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        """The `contents` list.

        Raises McpError naming why when a live source cannot be read.
        """
        ...


class ResourceTemplate(Protocol):
    ttl_ms: int
    cache_scope: str

    def definition(self) -> JSONObject: ...

    def read(self, uri: str, ctx: RequestContext) -> list[JSONObject] | None:
        """Contents for a matching `uri`; None when the URI is not this template's."""
        ...

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]: ...


class View(Protocol):
    """An MCP Apps view (`ui://`).

    Served only to a client that declared the UI extension (core/apps.py).
    """

    # Read-only, so a frozen dataclass is one.
    @property
    def uri(self) -> str: ...

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools whose results it renders."""
        ...

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
        """`{"description"?, "messages"}`.

        Raises McpError(-32602) for bad arguments.
        """
        ...

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]: ...


class Payments(Protocol):
    """How a catalogue words and guards calls that bring an x402 payment.

    See fairwins.payments.

    The dispatcher decides whether a payment may be forwarded (one per inbound message, only to a
    tool that can be priced); the catalogue owns the sentences a caller reads about it.
    """

    def refused(self, reason: str) -> JSONObject: ...

    def refused_unpriced(self, tool: str) -> JSONObject: ...

    def guarded(self, call: Callable[[], JSONObject], ctx: RequestContext) -> JSONObject: ...

    def guarded_steps(self, call: Steps[JSONObject], ctx: RequestContext) -> Steps[JSONObject]:
        """`guarded` for a call made of steps (core/steps.py)."""
        ...


@dataclass(frozen=True)
class Catalog:
    tools: Sequence[Tool] = ()
    resources: Sequence[Resource] = ()
    templates: Sequence[ResourceTemplate] = ()
    prompts: Sequence[Prompt] = ()
    instructions: str = ""
    list_ttl_ms: int = 300_000  # lists never vary per caller here, so clients may cache them
    extra: dict[str, object] = field(default_factory=dict)
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
    """A content block carrying a resource's contents inline.

    Its `type` is `"resource"`.
    """
    return {"type": "resource", "resource": contents}
