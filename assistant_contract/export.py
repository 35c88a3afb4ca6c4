"""Write or verify toolDefs.snapshot.json: `python -m assistant_contract.export [--check] [--output PATH]`.

`--check` also holds the snapshot to the fingerprint versions.py records for the contract's
version, so a table that changed without a new version fails, naming the line to add.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from . import versions
from .answers import OUTPUT_SCHEMAS
from .results import (
    CHAIN_UNKNOWN,
    ERROR_CODE_PATTERN,
    FAILURE_SENTENCES,
    HTTP_FACTS,
    SIGNED_IN_SENTENCES,
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
            "failuresSignedIn": SIGNED_IN_SENTENCES,
            "undescribed": UNDESCRIBED_ANSWER,
            "undescribedDetail": UNDESCRIBED_DETAIL,
        },
    }


def render() -> str:
    """The snapshot's exact text: byte-canonical (docs/style.md, habit 10), so a diff is a real change."""
    return json.dumps(snapshot(), indent=2, ensure_ascii=False) + "\n"


def fingerprint(table: dict[str, Any]) -> str:
    """The sha256 of a snapshot's content: everything but `generatedBy`, keys sorted, so only a change counts."""
    content = {key: value for key, value in table.items() if key != "generatedBy"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _next(version: str) -> tuple[str, str, str]:
    major, minor, patch = (int(part) for part in version.split("."))
    return f"{major + 1}.0.0", f"{major}.{minor + 1}.0", f"{major}.{minor}.{patch + 1}"


def unrecorded(table: dict[str, Any]) -> str | None:
    """None when `table` is the one versions.py records for its version; else what to write there, and why."""
    version, now = versions.__version__, fingerprint(table)
    newest = list(versions.FINGERPRINTS)[-1]
    if version != newest:
        return f"assistant_contract/versions.py: __version__ is {version}, but FINGERPRINTS' newest line is {newest}."
    if versions.FINGERPRINTS[version] == now:
        return None
    major, minor, patch = _next(version)
    return (
        f"The contract's table is not the one assistant_contract {version} published. In "
        "assistant_contract/versions.py, set __version__ to the next version and add its line to FINGERPRINTS: "
        f'a tool, route or optional field added is minor ("{minor}": "{now}"); one removed, renamed or narrowed '
        f'is major ("{major}": "{now}"); wording alone is a patch ("{patch}": "{now}"). docs/contract.md, '
        '"Versions", says more.'
    )


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
            problem = unrecorded(snapshot())
            if problem:
                print(problem)
                return 1
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), wanted.splitlines(keepends=True), str(path), "assistant_contract"
        )
        sys.stdout.writelines(diff)
        print(f"\n{path} differs from assistant_contract. Regenerate it with: {FIX_COMMAND}")
        return 1
    path.write_text(wanted, encoding="utf-8")
    print(f"wrote {path}")
    problem = unrecorded(snapshot())
    if problem:
        print(problem)  # written all the same: the snapshot is current, its version is the contributor's to choose
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
