"""The gateway's member-API route table, its public paths and its scopes (docs/gateway.md)."""

from __future__ import annotations

from typing import Final, TypedDict

from .tools import TOOL_DEFS


class Route(TypedDict):
    """One member-API route: how it is called and what it needs."""

    method: str
    path: str
    scope: str | None  # None: public, no credential
    priced: bool  # can the gateway answer it with an x402 price (402)?


ROUTES: Final[dict[str, Route]] = {
    "member.me": {"method": "GET", "path": "/v1/member/me", "scope": "read:profile", "priced": False},
    "member.membership": {
        "method": "GET",
        "path": "/v1/member/membership",
        "scope": "read:membership",
        "priced": False,
    },
    "member.wagers": {"method": "GET", "path": "/v1/member/wagers", "scope": "read:wagers", "priced": True},
    "member.fees": {"method": "GET", "path": "/v1/member/fees", "scope": "read:fees", "priced": True},
    "member.intents.build": {
        "method": "POST",
        "path": "/v1/member/intents/build",
        "scope": "build:intents",
        "priced": True,
    },
    "member.assistant.chat": {
        "method": "POST",
        "path": "/v1/member/assistant/chat",
        "scope": "assistant:chat",
        "priced": False,
    },
    "member.openapi": {"method": "GET", "path": "/v1/member/openapi.json", "scope": None, "priced": False},
}

# The public GET paths, as the public tools name them (a public read is written once, in its tool);
# `{name}` segments are filled from tool arguments, one segment each.
PUBLIC_PATHS: Final[tuple[str, ...]] = tuple(t["exec"]["path"] for t in TOOL_DEFS if t["exec"]["kind"] == "public")

# The scopes a token can hold: exactly the scopes of the routes above, derived so that a route's new
# scope needs no second edit (its meaning goes in prompt.py's SCOPE_MEANINGS; a test holds both).
ALL_SCOPES: Final[tuple[str, ...]] = tuple(sorted({r["scope"] for r in ROUTES.values() if r["scope"] is not None}))
