"""Resources: the gateway's documents read live, the guide embedded.

fairwins://openapi and fairwins://status are read from the gateway on every request;
fairwins://guide ships with the server.
"""

from __future__ import annotations

import os
from typing import Final

from mcp_server.core import steps
from mcp_server.core.context import RequestContext
from mcp_server.core.steps import Steps
from mcp_server.fairwins.outcomes import Wording, read_public
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import JSONObject

GUIDE_URI: Final = "fairwins://guide"


class GuideResource:
    """The custody guide, embedded: readable before any working token."""

    uri = GUIDE_URI
    ttl_ms = 3_600_000
    cache_scope = "public"

    def __init__(self) -> None:
        # Beside this module, as the wheel installs it (importlib.resources is not worth its start-up cost).
        with open(os.path.join(os.path.dirname(os.path.realpath(__file__)), "guide.md"), encoding="utf-8") as fh:
            self.text = fh.read()

    def definition(self) -> JSONObject:
        return {
            "uri": self.uri,
            "name": "guide",
            "title": "Keys, scopes and custody",
            "description": "How members create tokens, what each scope allows, and what this server will never do.",
            "mimeType": "text/markdown",
            "size": len(self.text.encode("utf-8")),
        }

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        return [{"uri": self.uri, "mimeType": "text/markdown", "text": self.text}]


class GatewayResource:
    """A public gateway document, read live; unreadable is an error, not empty."""

    ttl_ms = 0  # live: never serve a stale copy as if it were current
    cache_scope = "public"

    def __init__(
        self, uri: str, path: str, name: str, title: str, description: str, gateway: Gateway, wording: Wording
    ) -> None:
        self.uri, self.path, self.name, self.title, self.description = uri, path, name, title, description
        self.gateway, self.wording = gateway, wording

    def definition(self) -> JSONObject:
        return {
            "uri": self.uri,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": "application/json",
        }

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        return steps.run(self.read_steps(ctx))

    def read_steps(self, ctx: RequestContext) -> Steps[list[JSONObject]]:
        what = f"{self.uri} ({self.title})"  # as written: lower() would make "OpenAPI" "openapi"
        _, body = yield from read_public(self.gateway, self.wording, self.path, what, ctx, {"uri": self.uri})
        return [{"uri": self.uri, "mimeType": "application/json", "text": body.decode("utf-8")}]


def build_resources(
    gateway: Gateway, wording: Wording, route_paths: dict[str, str]
) -> list[GuideResource | GatewayResource]:
    """The server's resources; the OpenAPI path from the snapshot's routes."""
    return [
        GatewayResource(
            "fairwins://openapi",
            route_paths["member.openapi"],
            "openapi",
            "Member API OpenAPI document",
            "The gateway's OpenAPI description of the Member API, read live.",
            gateway,
            wording,
        ),
        GatewayResource(
            "fairwins://status",
            "/status",
            "status",
            "Gateway status",
            "Health, version, chains and rails that are on, and x402 prices, read live.",
            gateway,
            wording,
        ),
        GuideResource(),
    ]
