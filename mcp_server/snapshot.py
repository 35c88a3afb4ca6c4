"""Loads and checks the vendored tool table (toolDefs.snapshot.json), once per process.

An installed package carries the snapshot inside `mcp_server/` (the build copies it there); a
checkout reads the one at the repository root. The server never imports assistant_contract.
"""

from __future__ import annotations

import functools
import json
import pathlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

NAME = "toolDefs.snapshot.json"


class SnapshotError(RuntimeError):
    """The snapshot is missing or not the shape this server serves."""


@dataclass(frozen=True)
class Snapshot:
    tools: tuple[dict[str, Any], ...]
    routes: dict[str, dict[str, Any]]
    public_paths: tuple[str, ...]
    scopes: tuple[str, ...]
    wording: dict[str, Any]

    @property
    def route_paths(self) -> dict[str, str]:
        """ROUTE_PATHS: route id → gateway path."""
        return {rid: r["path"] for rid, r in self.routes.items()}


def _read_text() -> str:
    packaged = resources.files("mcp_server") / NAME
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    checkout = pathlib.Path(__file__).resolve().parent.parent / NAME
    try:
        return checkout.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{NAME} is missing: neither packaged with mcp_server nor at {checkout}") from None


def parse(text: str) -> Snapshot:
    data = json.loads(text)
    try:
        tools = tuple(data["tools"])
        for tool in tools:
            for key in ("name", "title", "description", "inputSchema", "auth", "exec", "progress"):
                if key not in tool:
                    raise SnapshotError(f"tool {tool.get('name', '?')} lacks {key!r}")
        wording = data["wording"]
        for key in ("unknown", "statePhrases", "chainUnknown", "failures"):
            if key not in wording:
                raise SnapshotError(f"wording lacks {key!r}")
        return Snapshot(tools, data["routes"], tuple(data["publicPaths"]), tuple(data["scopes"]), wording)
    except (KeyError, TypeError) as exc:
        raise SnapshotError(f"{NAME} is not a tool table this server understands: {exc}") from exc


@functools.cache
def load() -> Snapshot:
    """The snapshot, parsed once per process."""
    return parse(_read_text())
