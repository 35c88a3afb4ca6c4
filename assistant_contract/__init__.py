"""The ONE source of the FairWins assistant's tools, gateway routes, honest wording and prompt.

Standard library only; consumed by the gateway and the in-app assistant, and by the MCP server
through the generated toolDefs.snapshot.json.
"""

from __future__ import annotations

from . import results
from .prompt import SCOPE_MEANINGS, build_system_prompt, surface_note
from .routes import ALL_SCOPES, PUBLIC_PATHS, ROUTES, Route
from .selection import select_tools, tools_for_messages
from .tools import TOOL_DEFS, ToolDef

__all__ = [
    "ALL_SCOPES",
    "PUBLIC_PATHS",
    "ROUTES",
    "SCOPE_MEANINGS",
    "TOOL_DEFS",
    "Route",
    "ToolDef",
    "build_system_prompt",
    "results",
    "select_tools",
    "surface_note",
    "tools_for_messages",
]
