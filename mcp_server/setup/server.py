"""Composition: the shipped tools, resources and prompts over one gateway."""

from __future__ import annotations

from typing import Final

from mcp_server.core.batches import BatchLimits
from mcp_server.core.catalog import Catalog
from mcp_server.core.protocol import Dispatcher
from mcp_server.fairwins import payments, views
from mcp_server.fairwins.outcomes import Wording
from mcp_server.fairwins.prompts import PortfolioBriefing, WagerReview
from mcp_server.fairwins.resources import build_resources
from mcp_server.fairwins.snapshot import Snapshot, load
from mcp_server.fairwins.tools import build_tools
from mcp_server.setup.config import Config
from mcp_server.upstream.gateway import Gateway

INSTRUCTIONS: Final = (
    "FairWins tools read a member's own data through the FairWins gateway with the member's own "
    "token, plus public market data. This server holds no key: it never signs, never submits and "
    "never pays; build_intent returns typed data for the member to sign elsewhere. A source "
    "reported as unreadable or not-configured, or a failed call, is an UNKNOWN, never none or zero. "
    "Read fairwins://guide for keys, scopes and the custody model."
)


def build_catalog(gateway: Gateway, snap: Snapshot | None = None) -> Catalog:
    snap = snap or load()
    wording = Wording.from_snapshot(snap.wording)
    tools = build_tools(snap, gateway, wording)
    return Catalog(
        tools=tools,
        resources=build_resources(gateway, wording, snap.route_paths),
        prompts=[WagerReview(gateway, wording), PortfolioBriefing()],
        instructions=INSTRUCTIONS,
        payments=payments,
        views=views.for_tools(t.entry for t in tools),
        icons=views.server_icons(),
        tool_icons=views.tool_icons(),
    )


def build_gateway(config: Config) -> Gateway:
    return Gateway(
        config.api_url,
        timeout=config.timeout,
        max_body=config.max_response_bytes,
        send_token_in_clear=config.send_token_in_clear,
    )


def build_dispatcher(config: Config, gateway: Gateway | None = None) -> Dispatcher:
    # A batch, as a whole, gets the time one call gets; its other bounds are BatchLimits' defaults.
    return Dispatcher(
        build_catalog(gateway or build_gateway(config)),
        batch_limits=BatchLimits(deadline=config.timeout),
        sign_in=config.oauth is not None,
    )
