"""Write or verify toolDefs.snapshot.json: `python -m assistant_contract.export [--check] [--output PATH]`."""

from __future__ import annotations

import argparse
import difflib
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from .answers import OUTPUT_SCHEMAS
from .results import (
    CHAIN_UNKNOWN,
    ERROR_CODE_PATTERN,
    FAILURE_SENTENCES,
    HTTP_FACTS,
    STATE_PHRASES,
    UNDESCRIBED_ANSWER,
    UNDESCRIBED_DETAIL,
    UNKNOWN_SENTENCE,
)
from .routes import ALL_SCOPES, PUBLIC_PATHS, ROUTES
from .tools import TOOL_DEFS

SNAPSHOT_NAME = "toolDefs.snapshot.json"
# The snapshot's format as a JSON Schema (2020-12), shipped in the package: a consumer in any
# language validates the snapshot it loads against it.
SNAPSHOT_SCHEMA_PATH = pathlib.Path(__file__).resolve().parent / "snapshot.schema.json"
# In the fairwins-mcp repository the package sits in assistant_contract/ and the snapshot at the root, beside
# mcp_server/; installed anywhere else there is no checkout, so it goes to the current directory.
_CHECKOUT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_PATH = _CHECKOUT / SNAPSHOT_NAME if (_CHECKOUT / "mcp_server").is_dir() else pathlib.Path(SNAPSHOT_NAME)
FIX_COMMAND = "python -m assistant_contract.export"


def snapshot() -> dict[str, Any]:
    """The snapshot as a value: the tool table, the routes, what each route's tool answers, the wording."""
    return {
        "generatedBy": FIX_COMMAND + " (never edit this file by hand)",
        "tools": sorted(TOOL_DEFS, key=lambda t: t["name"]),
        "routes": ROUTES,
        "publicPaths": list(PUBLIC_PATHS),
        "scopes": list(ALL_SCOPES),
        # The outputSchema of a tool, by what it executes: a route id or a public path.
        "outputSchemas": OUTPUT_SCHEMAS,
        "wording": {
            "unknown": UNKNOWN_SENTENCE,
            "statePhrases": STATE_PHRASES,
            "chainUnknown": CHAIN_UNKNOWN,
            "httpFacts": HTTP_FACTS,
            "errorCodePattern": ERROR_CODE_PATTERN,
            "failures": FAILURE_SENTENCES,
            "undescribed": UNDESCRIBED_ANSWER,
            "undescribedDetail": UNDESCRIBED_DETAIL,
        },
    }


def render() -> str:
    """The snapshot's exact text: byte-canonical (docs/style.md, habit 10), so a diff is a real change."""
    return json.dumps(snapshot(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assistant_contract.export", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if the file is stale")
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_PATH, help="snapshot path")
    args = parser.parse_args(argv)
    wanted = render()
    path: pathlib.Path = args.output
    if args.check:
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        if current == wanted:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), wanted.splitlines(keepends=True), str(path), "assistant_contract"
        )
        sys.stdout.writelines(diff)
        print(f"\n{path} differs from assistant_contract. Regenerate it with: {FIX_COMMAND}")
        return 1
    path.write_text(wanted, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
