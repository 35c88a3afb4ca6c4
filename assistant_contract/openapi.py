"""The `x-fairwins-tools` fragment the gateway publishes in its OpenAPI document (openapi.json).

The same table the assistant is given, in the Messages-API shape (what `tools_for_messages`
sends the model), plus how each tool is authorised: `auth` (grant / none / local) and, for a
grant tool, the `scope` its token must hold. A generic client can discover the tools from it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .selection import tools_for_messages
from .tools import TOOL_DEFS, ToolDef

EXTENSION = "x-fairwins-tools"


def x_fairwins_tools(defs: Sequence[ToolDef] = TOOL_DEFS) -> dict[str, list[dict[str, object]]]:
    """`{"x-fairwins-tools": [...]}`, sorted by name: merge it into the top level of openapi.json."""
    by_name = {d["name"]: d for d in defs}
    entries = []
    for tool in tools_for_messages(defs):
        definition = by_name[str(tool["name"])]
        entry = {**tool, "auth": definition["auth"]}
        if "scope" in definition:
            entry["scope"] = definition["scope"]
        entries.append(entry)
    return {EXTENSION: entries}
