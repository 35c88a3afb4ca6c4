"""Which tools a grant may use, and the Messages-API array built from them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .prompt import RAILS, Rail
from .tools import TOOL_DEFS, ToolDef


def select_tools(scopes: Iterable[str] | None, rail: Rail) -> tuple[ToolDef, ...]:
    """The tools a token holding `scopes` may use on `rail`; `None` means no grant at all.

    Public and local tools need no grant. A grant tool is offered only when the token holds its
    scope, so the model never sees a tool that would answer 403.
    """
    if rail not in RAILS:
        raise ValueError(f"unknown rail {rail!r}; expected one of {', '.join(RAILS)}")
    held = frozenset(scopes or ())
    return tuple(t for t in TOOL_DEFS if t["auth"] != "grant" or t.get("scope") in held)


def tools_for_messages(defs: Sequence[ToolDef]) -> list[dict[str, object]]:
    """The Messages-API `tools` array: sorted by name so its bytes never change within a thread."""
    return [
        {"name": d["name"], "description": d["description"], "input_schema": d["inputSchema"], "strict": True}
        for d in sorted(defs, key=lambda d: d["name"])
    ]
