"""The MCP Apps views (`ui://fairwins/…`) and the icon, read when asked.

One HTML file (ui/app.html) holds the shared page: the postMessage bridge, the theme, the
price and the failure. Each view is that page with its name set on `<html data-view>`, a
constant of this module, never anything a client or the gateway sent. The page draws gateway
data only as text (docs/style.md, habit 13) and declares no domains, so hosts apply the spec's
restrictive default CSP: no network at all.

Which tools a view draws is not written here: each tool's entry names its view (the contract's
`view`, in the snapshot; build_intent's own entry), and `for_tools` gives each view its tools.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp_server.core.apps import UI_MIME_TYPE
from mcp_server.core.context import RequestContext
from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import BUILD_INTENT
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
    tools: tuple[str, ...] = ()  # the tools whose entry names this view (for_tools)
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


# The views the page draws: a new one is a View here, and in ui/app.html a drawing function named
# after it with its entry in the dispatch map of show() (tests/test_recipe.py names what is missing).
DRAWN: Final = (
    View(
        "ui://fairwins/wagers.html",
        "wagers",
        "Your wagers",
        "The member's wagers, one section per chain, with unreadable chains shown as unknown.",
    ),
    View(
        "ui://fairwins/intent.html",
        "intent",
        "What you would sign",
        "The unsigned EIP-712 typed data build_intent prepared, field by field; this server cannot sign it.",
    ),
    View(
        "ui://fairwins/markets.html",
        "markets",
        "Prediction markets",
        "Each market's question with its outcome prices as bars, and a search through the host.",
    ),
    View(
        "ui://fairwins/fees.html",
        "fees",
        "Your fee rates",
        "The member's fee rates per chain, or the price of reading them.",
    ),
)


def for_tools(entries: Iterable[Mapping[str, Any]]) -> tuple[View, ...]:
    """Each view of DRAWN with the names of the entries whose `view` it is."""
    named = [(entry["name"], entry.get("view")) for entry in entries]
    # A view this page does not draw is left out: tests/test_recipe.py fails on it, a server serves on.
    return tuple(dataclasses.replace(view, tools=tuple(n for n, v in named if v == view.name)) for view in DRAWN)


@functools.cache
def _shipped() -> tuple[View, ...]:
    return for_tools((*load().tools, BUILD_INTENT))


def __getattr__(name: str) -> tuple[View, ...]:
    """VIEWS: the views with the shipped snapshot's tools, read on first use."""
    if name == "VIEWS":
        return _shipped()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def server_icons() -> list[JSONObject]:
    """2025-11-25 Icons: the PNG as a data: URI, with its MIME type and size."""
    with open(ICON, "rb") as fh:
        data = base64.b64encode(fh.read()).decode("ascii")
    return [{"src": f"data:image/png;base64,{data}", "mimeType": "image/png", "sizes": [ICON_SIZE]}]


tool_icons = server_icons  # every tool shows the server's icon
