"""The MCP Apps views (`ui://fairwins/…`) and the icon: package data, read only when a client asks.

One HTML file (ui/app.html) holds the shared page: the postMessage bridge, the theme, the
price and the failure. Each view is that page with its name set on `<html data-view>`, a
constant of this module, never anything a client or the gateway sent. The page draws gateway
data only as text (docs/style.md, habit 13) and declares no domains, so hosts apply the spec's
restrictive default CSP: no network at all.
"""

from __future__ import annotations

import base64
import functools
import os
import re
from dataclasses import dataclass
from typing import Final

from mcp_server.core.apps import UI_MIME_TYPE
from mcp_server.core.context import RequestContext
from mcp_server.wire.jsonrpc import JSONObject

HERE: Final = os.path.dirname(os.path.realpath(__file__))
PAGE: Final = os.path.join(HERE, "ui", "app.html")
# mcpb/icon.png's drawing at 64 px (scripts/icon.py writes both): 1.1 KB, 1.5 KB as a data: URI, so
# `initialize` stays under 3 KB; the 512 px file is the bundles' and the registry's (server.json).
ICON: Final = os.path.join(HERE, "ui", "icon-64.png")
ICON_SIZE: Final = "64x64"
VIEW_MARK: Final = 'data-view="answer"'


@functools.cache
def _page() -> str:
    with open(PAGE, encoding="utf-8") as fh:
        return fh.read()


@dataclass(frozen=True)
class View:
    uri: str
    name: str
    title: str
    description: str
    tools: tuple[str, ...]
    ttl_ms: int = 3_600_000
    cache_scope: str = "public"

    def __post_init__(self) -> None:
        # Written into an HTML attribute as they are: names only, never anything to escape.
        for word in (self.name, *self.tools):
            if not re.fullmatch(r"[a-z][a-z0-9_]*", word):
                raise ValueError(f"{word!r} is not a view or tool name")

    def definition(self) -> JSONObject:
        return {
            "uri": self.uri,
            "name": f"view-{self.name}",
            "title": self.title,
            "description": self.description,
            "mimeType": UI_MIME_TYPE,
        }

    def html(self) -> str:
        page = _page()
        if VIEW_MARK not in page:
            raise RuntimeError(f"{PAGE} lost its {VIEW_MARK} mark")
        # The page names what it waits for and what failed from data-tools: no tool list of its own.
        return page.replace(VIEW_MARK, f'data-view="{self.name}" data-tools="{" ".join(self.tools)}"', 1)

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        # No csp (restrictive default: no network), no permissions but clipboard-write, which only
        # the build_intent view uses, and only where the host grants it.
        ui: JSONObject = {"prefersBorder": True}
        if self.name == "intent":
            ui["permissions"] = {"clipboardWrite": {}}
        return [{"uri": self.uri, "mimeType": UI_MIME_TYPE, "text": self.html(), "_meta": {"ui": ui}}]


VIEWS: Final = (
    View(
        "ui://fairwins/wagers.html",
        "wagers",
        "Your wagers",
        "The member's wagers, one section per chain, with unreadable chains shown as unknown.",
        ("get_wagers",),
    ),
    View(
        "ui://fairwins/intent.html",
        "intent",
        "What you would sign",
        "The unsigned EIP-712 typed data build_intent prepared, field by field; this server cannot sign it.",
        ("build_intent",),
    ),
    View(
        "ui://fairwins/markets.html",
        "markets",
        "Prediction markets",
        "Each market's question with its outcome prices as bars, and a search through the host.",
        ("get_prediction_markets",),
    ),
    View(
        "ui://fairwins/fees.html",
        "fees",
        "Your fee rates",
        "The member's fee rates per chain, or the price of reading them.",
        ("get_fees",),
    ),
)


def _icon() -> JSONObject:
    """A 2025-11-25 Icon: the PNG as a data: URI, with its MIME type and size."""
    with open(ICON, "rb") as fh:
        data = base64.b64encode(fh.read()).decode("ascii")
    return {"src": f"data:image/png;base64,{data}", "mimeType": "image/png", "sizes": [ICON_SIZE]}


def server_icons() -> list[JSONObject]:
    return [_icon()]


def tool_icons() -> list[JSONObject]:
    return [_icon()]
