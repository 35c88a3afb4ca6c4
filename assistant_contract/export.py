"""Write or verify toolDefs.snapshot.json: `python -m assistant_contract.export [--check] [--output PATH]`."""

from __future__ import annotations

import argparse
import difflib
import json
import pathlib
import sys
from collections.abc import Sequence

from .results import CHAIN_UNKNOWN, FAILURE_SENTENCES, STATE_PHRASES, UNKNOWN_SENTENCE
from .routes import ALL_SCOPES, PUBLIC_PATHS, ROUTES
from .tools import TOOL_DEFS

SNAPSHOT_NAME = "toolDefs.snapshot.json"
DEFAULT_PATH = pathlib.Path(__file__).resolve().parent.parent / SNAPSHOT_NAME
FIX_COMMAND = "python -m assistant_contract.export"


def render() -> str:
    """The snapshot's exact text: byte-canonical (STYLE.md rule 10), so a diff is a real change."""
    snapshot = {
        "generatedBy": FIX_COMMAND + " (never edit this file by hand)",
        "tools": sorted(TOOL_DEFS, key=lambda t: t["name"]),
        "routes": ROUTES,
        "publicPaths": list(PUBLIC_PATHS),
        "scopes": list(ALL_SCOPES),
        "wording": {
            "unknown": UNKNOWN_SENTENCE,
            "statePhrases": STATE_PHRASES,
            "chainUnknown": CHAIN_UNKNOWN,
            "failures": FAILURE_SENTENCES,
        },
    }
    return json.dumps(snapshot, indent=2, ensure_ascii=False) + "\n"


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
