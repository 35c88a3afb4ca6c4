"""What the shipped server serves, from the snapshot as the server composes it (build_catalog).

Every count and list of tools a test needs comes from here, so a new tool in the contract needs
no edit to a test: its arguments go in tests/samples.py, and every test that walks the tools
walks it too.
"""

from __future__ import annotations

from typing import Any, Final

from mcp_server.fairwins.tools import GatewayTool
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway

_TOOLS: Final = sorted(build_catalog(Gateway(None)).tools, key=lambda t: t.name)
_GATEWAY: Final = [t for t in _TOOLS if isinstance(t, GatewayTool)]

TITLE: Final[dict[str, str]] = {t.name: str(t.definition()["title"]) for t in _TOOLS}  # as tools/list titles it
REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    t.name: tuple(t.definition()["inputSchema"].get("required", ())) for t in _TOOLS
}
SERVED: Final[tuple[str, ...]] = tuple(t.name for t in _TOOLS)  # every tool tools/list names, sorted
PUBLIC: Final[tuple[str, ...]] = tuple(t.name for t in _GATEWAY if t.public)  # need no credential
MEMBER: Final[tuple[str, ...]] = tuple(t.name for t in _GATEWAY if not t.public)  # need a scoped token
PRICED: Final[tuple[str, ...]] = tuple(t.name for t in _GATEWAY if t.priced)  # the gateway may price them
UNPRICED_MEMBER: Final[tuple[str, ...]] = tuple(n for n in MEMBER if n not in PRICED)  # a token or nothing
READS: Final[tuple[str, ...]] = tuple(t.name for t in _GATEWAY if t.method == "GET")  # every gateway read


def _is_envelope(schema: dict[str, Any]) -> bool:
    """The answer is the per-chain envelope (assistant_contract.schemas.envelope): `chains`, each with a `state`."""
    return any(
        "state" in branch.get("properties", {}).get("chains", {}).get("items", {}).get("properties", {})
        for branch in schema.get("anyOf", [schema])  # a priced tool's answer, or the gateway's price
    )


ENVELOPE: Final[tuple[str, ...]] = tuple(t.name for t in _GATEWAY if _is_envelope(t.output_schema))  # per chain
SCOPE: Final[dict[str, str]] = {t.name: str(t.entry["scope"]) for t in _GATEWAY if not t.public}
