"""Loads and checks the vendored tool table (toolDefs.snapshot.json) once.

An installed package carries the snapshot inside `mcp_server/` (the build copies it there); a
checkout reads the one at the repository root. Both are read as plain files beside this module
(a wheel installs unpacked), so start-up never loads importlib.resources. The server never
imports assistant_contract.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
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
    output_schemas: dict[str, dict[str, Any]]  # by execution target: a route id or a public path

    @property
    def route_paths(self) -> dict[str, str]:
        """ROUTE_PATHS: route id → gateway path."""
        return {rid: r["path"] for rid, r in self.routes.items()}


def _read_text() -> str:
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # mcp_server/, where the wheel puts it
    checkout = os.path.join(os.path.dirname(package), NAME)
    for path in (os.path.join(package, NAME), checkout):
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            continue
    raise SnapshotError(f"{NAME} is missing: neither packaged with mcp_server nor at {checkout}")


def parse(text: str) -> Snapshot:
    data = json.loads(text)
    try:
        tools = tuple(data["tools"])
        for tool in tools:
            for key in ("name", "title", "description", "inputSchema", "auth", "exec", "progress"):
                if key not in tool:
                    raise SnapshotError(f"tool {tool.get('name', '?')} lacks {key!r}")
        wording = data["wording"]
        for key in (
            "unknown",
            "statePhrases",
            "chainUnknown",
            "httpFacts",
            "errorCodePattern",
            "failures",
            "undescribed",
            "undescribedDetail",
        ):
            if key not in wording:
                raise SnapshotError(f"wording lacks {key!r}")
        output_schemas = data["outputSchemas"]
        return Snapshot(
            tools, data["routes"], tuple(data["publicPaths"]), tuple(data["scopes"]), wording, output_schemas
        )
    except (KeyError, TypeError) as exc:
        raise SnapshotError(f"{NAME} is not a tool table this server understands: {exc}") from exc


@functools.cache
def load() -> Snapshot:
    """The snapshot, parsed once per process."""
    return parse(_read_text())
