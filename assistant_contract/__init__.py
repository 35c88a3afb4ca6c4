"""The ONE source of the FairWins assistant's tools, gateway routes, honest wording and prompt.

Standard library only; consumed by the gateway and the in-app assistant, and by the MCP server
through the generated toolDefs.snapshot.json (`assistant_contract.export`), whose format the
`snapshot.schema.json` shipped in this package describes for a consumer in any language.
"""

from __future__ import annotations

from . import answers, results
from .answers import OUTPUT_SCHEMAS, target_of
from .openapi import x_fairwins_tools
from .prompt import SCOPE_MEANINGS, build_system_prompt, surface_note
from .routes import ALL_SCOPES, PUBLIC_PATHS, ROUTES, Route
from .selection import select_tools, tools_for_messages
from .tools import DESCRIPTION_MAX, TOOL_DEFS, ToolDef
from .versions import __version__

__all__ = [
    "ALL_SCOPES",
    "DESCRIPTION_MAX",
    "OUTPUT_SCHEMAS",
    "PUBLIC_PATHS",
    "ROUTES",
    "SCOPE_MEANINGS",
    "TOOL_DEFS",
    "Route",
    "ToolDef",
    "__version__",
    "answers",
    "build_system_prompt",
    "results",
    "select_tools",
    "surface_note",
    "target_of",
    "tools_for_messages",
    "x_fairwins_tools",
]
