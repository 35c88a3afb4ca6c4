"""`python -m scripts.readme [--check]`: every list and figure of the prose a program can write.

Each region between `<!-- generated:NAME:start -->` and `<!-- generated:NAME:end -->` markers
(BLOCKS: README.md's catalog of tools, resources and prompts and its list of public tools; the
demo's tool count and the sandbox's routes in docs/development.md; the `check` sample of
docs/configuration.md; the lists of the guide the server serves as fairwins://guide;
docs/gateway.md's tables of the routes, of what each answer pins and what it leaves open, and of
the fields each answer carries) is generated from the vendored snapshot as the shipped server
composes it (mcp_server.setup.server.build_catalog), so no page can drift from what a client sees
in tools/list, and a new tool needs no prose edit. So are the figures: the bundles' sizes as
`make mcpb` builds them (scripts/mcpb.py, whose bytes depend on the sources alone, built here in
memory), the views' page and icon sizes, the deepest answer passed on, the HTTP bounds'
defaults. `--check` changes
nothing: it prints the difference and the command that fixes it, and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcp_server.fairwins.snapshot import load
from mcp_server.fairwins.tools import GatewayTool
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
README: Final = ROOT / "README.md"
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


def _served() -> tuple[list[GatewayTool], list[str]]:
    """The gateway tools the shipped server serves, and every tool name it serves, sorted by name."""
    catalog = build_catalog(Gateway(None), load())
    tools = sorted(catalog.tools, key=lambda t: t.name)
    return [t for t in tools if isinstance(t, GatewayTool)], [t.name for t in tools]


def _names(names: Sequence[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def public_tools(_: str) -> str:
    return _names([t.name for t in _served()[0] if t.public])


def priced_tools(_: str) -> str:
    return _names([t.name for t in _served()[0] if t.priced])


def demo_tools_list(current: str) -> str:
    """`make demo`'s sample output with its tool count as the served table makes it."""
    count = len(_served()[1])
    lines = [f"2. tools/list: {count} tools" if ln.startswith("2. tools/list:") else ln for ln in current.split("\n")]
    if f"2. tools/list: {count} tools" not in lines:
        raise ValueError("the demo sample has no `2. tools/list:` line")
    return "\n".join(lines)


def check_sample(current: str) -> str:
    """`check`'s sample against the sandbox with member A's token (every scope): each line that follows from the
    code or the contract as they make it (the version, the sandbox's gateway version, the scopes, the tools)."""
    from assistant_contract.routes import ALL_SCOPES
    from mcp_server import __version__
    from tests.sandbox_gateway import GATEWAY_VERSION

    gateway_names = [t.name for t in _served()[0]]
    sandbox = "http://127.0.0.1:8787"  # make demo's sandbox, as the sample's command line names it
    wanted = {
        "fairwins-mcp check (": f"fairwins-mcp check ({__version__})",
        "ok    gateway  ": f"ok    gateway  {sandbox} answers /status (status ok, version {GATEWAY_VERSION})",
        "ok    scopes   ": f"ok    scopes   {', '.join(sorted(ALL_SCOPES))}",
        "ok    tools    ": f"ok    tools    all {len(gateway_names)} will work: {', '.join(gateway_names)}",
    }
    lines = current.split("\n")
    for start, line in wanted.items():
        found = [n for n, ln in enumerate(lines) if ln.startswith(start)]
        if len(found) != 1:
            raise ValueError(f"the check sample has no single `{start.strip()}` line")
        lines[found[0]] = line
    return "\n".join(lines)


def sandbox_routes(_: str) -> str:
    """The routes the sandbox gateway (tests/sandbox_gateway.py) answers, by path."""
    from tests.sandbox_gateway import _ROUTES

    return ", ".join(f"`{route.method} {route.path}`" for route in sorted(_ROUTES, key=lambda r: (r.path, r.method)))


def view_rows(_: str) -> str:
    """docs/apps.md's table of which tools have a view: fairwins/views.py's VIEWS."""
    from mcp_server.fairwins.views import VIEWS

    rows = ["", "| tool | view (`ui://`) | the view |", "|---|---|---|"]
    for view in VIEWS:
        rows += [f"| `{tool}` | `{view.uri}` | {view.title}: {view.description} |" for tool in view.tools]
    return "\n".join([*rows, ""])


def scope_rows(_: str) -> str:
    """The guide's table of what each scope allows: the served tools that need it."""
    snap = load()
    by_scope: dict[str, list[str]] = {scope: [] for scope in snap.scopes}
    for tool in _served()[0]:
        scope = tool.entry.get("scope")
        if scope:
            by_scope.setdefault(scope, []).append(f"`{tool.name}`: {_first_sentence(tool.definition()['description'])}")
    rows = ["", "| scope | allows |", "|---|---|"]
    for scope, tools in by_scope.items():
        rows.append(f"| `{scope}` | {', '.join(tools) if tools else 'no tool here needs it'} |")
    return "\n".join([*rows, ""])


def _route_tools() -> dict[str, dict[str, Any]]:
    """Each served gateway tool's snapshot entry (build_intent's own), by what it executes."""
    by_target: dict[str, dict[str, Any]] = {}
    for tool in _served()[0]:
        execution = tool.entry["exec"]
        by_target[execution.get("route") or execution["path"]] = tool.entry
    return by_target


def _query(entry: dict[str, Any] | None, path: str, method: str) -> str:
    """The arguments a GET sends as its query: its tool's properties that fill no path segment."""
    if entry is None or method != "GET":
        return "—"
    schema = entry["inputSchema"]
    names = [n for n in schema.get("properties", {}) if f"{{{n}}}" not in path]
    required = schema.get("required", [])
    return ", ".join(f"`{n}`" + ("" if n in required else " (optional)") for n in names) or "—"


def member_routes(_: str) -> str:
    """docs/gateway.md's table of the member routes, from the snapshot's route table."""
    snap, tools = load(), _route_tools()
    rows = [
        "",
        "| route id | method | path | query | scope | can be priced (x402) | tool |",
        "|---|---|---|---|---|---|---|",
    ]
    for rid, route in snap.routes.items():
        entry = tools.get(rid)
        scope = f"`{route['scope']}`" if route["scope"] else "none (public)"
        tool = f"`{entry['name']}`" if entry else "—"
        query = _query(entry, route["path"], route["method"])
        rows.append(
            f"| `{rid}` | {route['method']} | `{route['path']}` | {query} | {scope} | "
            f"{'yes' if route['priced'] else 'no'} | {tool} |"
        )
    return "\n".join([*rows, ""])


def public_routes(_: str) -> str:
    """docs/gateway.md's table of the public reads, from the public tools' paths and arguments."""
    rows = ["", "| path | query | what | tool |", "|---|---|---|---|"]
    for tool in _served()[0]:
        if tool.public:
            path = tool.entry["exec"]["path"]
            properties = tool.entry["inputSchema"].get("properties", {})
            defaults = [
                f"`{n}` defaults to {properties[n]['default']}" for n in properties if "default" in properties[n]
            ]
            what = _cell(tool.entry["title"]) + (f" ({', '.join(defaults)})" if defaults else "")
            rows.append(f"| `GET {path}` | {_query(tool.entry, path, 'GET')} | {what} | `{tool.name}` |")
    return "\n".join([*rows, ""])


def _type(schema: dict[str, Any]) -> str:
    """A schema's values, in words: "string", "list of object", "integer or null", "one of a, b"."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        inner = _type(schema.get("items", {}))
        return "list of " + (f"({inner})" if " or " in inner else inner)
    if isinstance(kind, str):
        return kind
    branches = [b for b in schema.get("anyOf", []) if "type" in b or "enum" in b]
    return " or ".join(_type(b) for b in branches) or "any"


def _fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    required = schema.get("required", [])
    for name, sub in schema.get("properties", {}).items():
        description = _cell(sub.get("description", ""))
        mark = " (always)" if name in required else ""
        rows.append(f"| `{prefix}{name}` | {_type(sub)}{mark} | {description} |")
        if sub.get("type") == "object":
            rows += _fields(sub, f"{prefix}{name}.")
            if isinstance(sub.get("additionalProperties"), dict):
                rows += _fields(sub["additionalProperties"], f"{prefix}{name}.<key>.")
        elif sub.get("type") == "array" and sub.get("items", {}).get("type") == "object":
            rows += _fields(sub["items"], f"{prefix}{name}[].")
    return rows


def answer_fields(_: str) -> str:
    """docs/gateway.md's fields of each 2xx answer, from the answer branch of each outputSchema."""
    snap = load()
    tools = _route_tools()
    out = [""]
    for target, schema in snap.output_schemas.items():
        answer = schema["anyOf"][0]
        route = snap.routes.get(target)
        where = f"{route['method']} {route['path']}" if route else f"GET {target}"
        tool = tools.get(target)
        out += [f"#### `{where}`" + (f" (`{tool['name']}`)" if tool else ""), ""]
        out += [_cell(answer.get("description", "")), "", "| field | type | what |", "|---|---|---|"]
        out += [*_fields(answer), ""]
    return "\n".join(out)


def _is_envelope(answer: dict[str, Any]) -> bool:
    """The answer is the per-chain envelope (assistant_contract.schemas.envelope): `chains`, each with a `state`."""
    return "state" in answer.get("properties", {}).get("chains", {}).get("items", {}).get("properties", {})


def per_chain_reads(_: str) -> str:
    """The served tools whose answer is the per-chain envelope."""
    return _names([t.name for t in _served()[0] if _is_envelope(t.output_schema["anyOf"][0])])


def reads(_: str) -> str:
    """The guide's custody list of reads: every served gateway tool that is a GET."""
    return _names([t.name for t in _served()[0] if t.method == "GET"])


def _paths(schema: dict[str, Any], prefix: str = "", always: bool = True) -> list[tuple[str, str, bool]]:
    """(field, its type in words, whether it is always there) of each field of an answer, outermost first."""
    found = []
    required = schema.get("required", [])
    for name, sub in schema.get("properties", {}).items():
        kept = always and name in required
        found.append((f"{prefix}{name}", _type(sub), kept))
        if sub.get("type") == "array" and sub.get("items", {}).get("type") == "object":
            found += _paths(sub["items"], f"{prefix}{name}[].", kept)
        elif sub.get("type") == "object":
            found += _paths(sub, f"{prefix}{name}.", kept)
    return found


def pinned_rows(_: str) -> str:
    """docs/gateway.md's "Pinned and relayed" table: whose shape each answer is, what the contract pins and what it
    leaves open. Each public read's row follows from its record (exec.source) and its answer's schema."""
    from assistant_contract.tools import FAIRWINS

    rows = [
        "",
        "| route | whose shape | pinned | open |",
        "|---|---|---|---|",
        "| the member routes (`/v1/member/…`) | FairWins' | the per-chain envelope and its three states; "
        "every field marked (always); each field's type | fields a gateway adds |",
    ]
    snap = load()
    for tool in _served()[0]:
        if not tool.public:
            continue
        source = tool.entry["exec"]["source"]
        fields = _paths(snap.output_schemas[tool.entry["exec"]["path"]]["anyOf"][0])
        always = [f"`{name}` ({kind})" for name, kind, kept in fields if kept]
        if source == FAIRWINS:
            pinned = "each field's type" + (f"; always {', '.join(always)}" if always else " (none is guaranteed)")
            rows.append(f"| `GET {tool.path_template}` | FairWins' | {pinned} | fields a gateway adds |")
            continue
        rest = ", ".join(f"`{name}`" for name, _, kept in fields if not kept)
        rows.append(
            f"| `GET {tool.path_template}` | relayed from {_cell(source)} | {', '.join(always) or 'nothing'} | "
            f"the rest ({rest}), each a union of the types the source is seen to write, null among them |"
        )
    rows += [
        "| an x402 offer (402) | x402's | `accepts` is read, nothing else "
        "| passed on verbatim ([payments](payments.md)) |",
        "| an error (4xx, 5xx) | FairWins' | `error` is quoted only as an identifier, `message` only cleaned and cut "
        "| [Errors](#errors) |",
    ]
    return "\n".join([*rows, ""])


def _kb(size: float, step: float) -> str:
    """`size` bytes in KB (1,024 bytes, as the pages count them), to the nearest `step`."""
    return f"{round(size / 1024 / step) * step:g}"


# The bundles' sizes are stated to the nearest 50 KB: deflate's output differs a little between zlib
# builds (a platform's, zlib-ng), and every machine that checks the pages must round them alike.
BUNDLE_STEP: Final = 50


def bundle_size(_: str) -> str:
    """The uv bundle's size (the one to hand out), as `make mcpb` builds it, to the nearest BUNDLE_STEP KB."""
    from scripts import mcpb

    return f"about {_kb(len(mcpb.bundle_bytes('uv')), BUNDLE_STEP)} KB"


def bundle_sizes(_: str) -> str:
    """Both bundles' sizes as `make mcpb` builds them, to the nearest BUNDLE_STEP KB: one figure when alike."""
    from scripts import mcpb

    uv, python = (_kb(len(mcpb.bundle_bytes(kind)), BUNDLE_STEP) for kind in ("uv", "python"))
    return f"about {uv} KB each" if uv == python else f"about {uv} and {python} KB"


def max_depth(_: str) -> str:
    """How deeply a gateway answer may nest and still be passed on (wire/jsonrpc.py's MAX_DEPTH)."""
    from mcp_server.wire.jsonrpc import MAX_DEPTH

    return str(MAX_DEPTH)


def _ui_file_kb(name: str, step: float) -> str:
    return _kb((ROOT / "mcp_server" / "fairwins" / "ui" / name).stat().st_size, step)


def view_page_size(_: str) -> str:
    """The views' one HTML page (fairwins/ui/app.html), to the nearest KB."""
    return f"about {_ui_file_kb('app.html', 1)} KB"


def icon_size(_: str) -> str:
    """The 64 px icon served inline (fairwins/ui/icon-64.png), to a tenth of a KB."""
    return f"{_ui_file_kb('icon-64.png', 0.1)} KB"


def concurrency(_: str) -> str:
    """HTTP requests in flight per process by default (FAIRWINS_MCP_MAX_CONCURRENCY)."""
    from mcp_server.transports.http.server import DEFAULT_MAX_CONCURRENCY

    return f"{DEFAULT_MAX_CONCURRENCY:,}"


def connections(_: str) -> str:
    """The connection bound the default concurrency makes."""
    from mcp_server.transports.http.server import DEFAULT_MAX_CONCURRENCY, connection_bound

    return f"{connection_bound(DEFAULT_MAX_CONCURRENCY):,}"


def peer_connections(_: str) -> str:
    """One client address's share of the connection bound by default: half of it."""
    from mcp_server.transports.http.server import DEFAULT_MAX_CONCURRENCY, connection_bound

    return f"{max(1, connection_bound(DEFAULT_MAX_CONCURRENCY) // 2):,}"


def health_reserve(_: str) -> str:
    """The connections beyond the bound kept for health checks."""
    from mcp_server.transports.http.admission import HEALTH_RESERVE

    return str(HEALTH_RESERVE)


@dataclass(frozen=True)
class Block:
    """One generated region: the file it is in, its marker name, and what writes it from its current text."""

    path: str
    name: str
    write: Callable[[str], str]

    @property
    def start(self) -> str:
        return f"<!-- generated:{self.name}:start -->"

    @property
    def end(self) -> str:
        return f"<!-- generated:{self.name}:end -->"


BLOCKS: Final = (
    Block("README.md", "bundle-size", bundle_size),
    Block("README.md", "public-tools", public_tools),
    Block("README.md", "max-depth", max_depth),
    Block("README.md", "catalog", lambda _: "\n" + catalog_markdown() + "\n"),
    Block("docs/development.md", "tool-count", demo_tools_list),
    Block("docs/development.md", "sandbox-routes", sandbox_routes),
    Block("docs/install.md", "bundle-sizes", bundle_sizes),
    Block("docs/configuration.md", "check-sample", check_sample),
    Block("docs/configuration.md", "peer-connections", peer_connections),
    Block("docs/security.md", "concurrency", concurrency),
    Block("docs/security.md", "connections", connections),
    Block("docs/security.md", "peer-connections", peer_connections),
    Block("docs/security.md", "health-reserve", health_reserve),
    Block("docs/apps.md", "views", view_rows),
    Block("docs/apps.md", "page-size", view_page_size),
    Block("docs/apps.md", "icon-size", icon_size),
    Block("mcp_server/fairwins/guide.md", "scopes", scope_rows),
    Block("mcp_server/fairwins/guide.md", "public-tools", public_tools),
    Block("mcp_server/fairwins/guide.md", "priced-tools", priced_tools),
    Block("mcp_server/fairwins/guide.md", "reads", reads),
    Block("docs/payments.md", "priced-tools", priced_tools),
    Block("docs/gateway.md", "member-routes", member_routes),
    Block("docs/gateway.md", "public-routes", public_routes),
    Block("docs/gateway.md", "per-chain-reads", per_chain_reads),
    Block("docs/gateway.md", "pinned", pinned_rows),
    Block("docs/gateway.md", "answer-fields", answer_fields),
)
FILES: Final = tuple(dict.fromkeys(block.path for block in BLOCKS))


def render(text: str, path: str = "README.md") -> str:
    """`text` (the file `path`) with each of its generated regions rewritten; ValueError when markers are missing.

    A figure stated in several places has a region at each, all written alike.
    """
    for block in BLOCKS:
        if block.path != path:
            continue
        start = text.find(block.start)
        if start < 0:
            raise ValueError(f"{path} needs {block.start} followed by {block.end}")
        while start >= 0:
            inner = start + len(block.start)
            end = text.find(block.end, inner)
            if end < 0 or 0 <= text.find(block.start, inner) < end:
                raise ValueError(f"{path} needs {block.start} followed by {block.end}")
            written = block.write(text[inner:end])
            text = text[:inner] + written + text[end:]
            start = text.find(block.start, inner + len(written) + len(block.end))
    return text


def lines_outside(text: str, name: str) -> int:
    """How many lines `text` has, the generated region `name` left out."""
    start, end = f"<!-- generated:{name}:start -->", f"<!-- generated:{name}:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    return len((head + tail).splitlines())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.readme", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 and print the diff if stale")
    args = parser.parse_args(argv)
    stale = 0
    for path in FILES:
        file = README if path == "README.md" else ROOT / path
        current = file.read_text(encoding="utf-8")
        try:
            wanted = render(current, path)
        except ValueError as exc:
            sys.stderr.write(f"scripts.readme: {exc}\n")
            return 2
        if wanted == current:
            continue
        if args.check:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), wanted.splitlines(keepends=True), path, f"{path} (generated)"
            )
            sys.stderr.write("".join(diff))
            sys.stderr.write(f"\n{path}'s generated lists or figures are out of date; fix them with: {FIX}\n")
            stale = 1
        else:
            file.write_text(wanted, encoding="utf-8")
    return stale


if __name__ == "__main__":
    raise SystemExit(main())
