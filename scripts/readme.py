"""`python -m scripts.readme [--check]`: README.md's table of tools, resources and prompts, from what is served.

The table between the catalog markers is generated from the vendored snapshot as the shipped
server composes it (mcp_server.setup.server.build_catalog), so the README cannot drift from what a
client sees in tools/list, resources/list and prompts/list. `--check` changes nothing: it prints
the difference and the command that fixes it, and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import re
import sys
from collections.abc import Sequence
from typing import Any, Final

from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import GatewayTool
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
README: Final = ROOT / "README.md"
START: Final = "<!-- generated:catalog:start -->"
END: Final = "<!-- generated:catalog:end -->"
FIX: Final = "make readme   (python -m scripts.readme)"
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s")


def _first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _needs(tool: GatewayTool) -> str:
    if tool.public:
        return "nothing: public"
    scope = tool.entry.get("scope", "")
    return f"token with `{scope}`" + (", or an x402 payment" if tool.priced else "")


def catalog_markdown() -> str:
    """The generated region: three tables and the one contract tool this server does not serve."""
    snap = load()
    catalog = build_catalog(Gateway(None), snap)
    lines = [
        "<!-- written by `python -m scripts.readme` from the snapshot and mcp_server; do not edit by hand -->",
        "",
        "| tool | what it does | needs |",
        "|---|---|---|",
    ]
    tools = sorted(catalog.tools, key=lambda t: t.name)
    for tool in tools:
        definition: dict[str, Any] = tool.definition()
        needs = _needs(tool) if isinstance(tool, GatewayTool) else ""
        what = f"**{_cell(definition['title'])}.** {_cell(_first_sentence(definition['description']))}"
        lines.append(f"| `{tool.name}` | {what} | {needs} |")
    lines += ["", "| resource | what it holds |", "|---|---|"]
    for resource in catalog.resources:
        d = resource.definition()
        lines.append(f"| `{d['uri']}` | **{_cell(d['title'])}.** {_cell(d['description'])} |")
    lines += ["", "| prompt | what it asks for | arguments |", "|---|---|---|"]
    for prompt in sorted(catalog.prompts, key=lambda p: p.name):
        d = prompt.definition()
        args = ", ".join(
            f"`{a['name']}`" + ("" if a.get("required") else " (optional)") for a in d.get("arguments", [])
        )
        lines.append(f"| `{d['name']}` | **{_cell(d['title'])}.** {_cell(d['description'])} | {args or 'none'} |")
    local = sorted(t["name"] for t in snap.tools if t["exec"]["kind"] == "local")
    if local:
        names = ", ".join(f"`{n}`" for n in local)
        lines += ["", f"Not served here: {names}, which the shared tool table runs inside the FairWins app itself."]
    return "\n".join(lines)


def render(readme: str) -> str:
    """`readme` with the generated region replaced; ValueError when the markers are missing or out of order."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md needs {START} followed by {END}")
    return readme[: start + len(START)] + "\n" + catalog_markdown() + "\n" + readme[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.readme", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 and print the diff if stale")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    try:
        wanted = render(current)
    except ValueError as exc:
        sys.stderr.write(f"scripts.readme: {exc}\n")
        return 2
    if wanted == current:
        return 0
    if args.check:
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), wanted.splitlines(keepends=True), "README.md", "README.md (generated)"
        )
        sys.stderr.write("".join(diff))
        sys.stderr.write(f"\nREADME.md's catalog is out of date; fix it with: {FIX}\n")
        return 1
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
