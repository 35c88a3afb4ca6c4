"""`python -m scripts.mcpb [--out DIR]`: the MCP Bundles Claude Desktop installs in one click (dist/*.mcpb).

An MCP Bundle is a zip holding a `manifest.json` (spec: github.com/modelcontextprotocol/mcpb,
MANIFEST.md) and the server. Two are built, the same server in each, told apart by how the host
gets a Python (KINDS below):

    fairwins-mcp-<version>.mcpb         server.type "uv": the host runs the bundle with its own uv,
                                        which provides a Python; the member installs nothing
    fairwins-mcp-<version>-python.mcpb  server.type "python": the host runs the member's own python3

Each holds exactly:

    manifest.json              generated here: the tool and prompt lists from what the server serves
    pyproject.toml             the uv bundle only, generated here: requires-python, no dependencies,
                               nothing to build (uv makes an environment and runs server/main.py in it)
    icon.png                   mcpb/icon.png (drawn by scripts/icon.py)
    server/main.py             mcpb/main.py: checks the Python version, then runs the bundled package
    server/mcp_server/...      the package's modules and package data, as the wheel carries them,
                               with the one snapshot copied in from the repository root (as setup.py does)

The server needs nothing outside the standard library, so nothing is vendored. Entries are
sorted, stamped with one fixed time and fixed permissions, so the same sources always give the
same bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import pathlib
import sys
import tomllib
import zipfile
from collections.abc import Sequence
from typing import Any, Final, Literal

from mcp_server import __version__
from mcp_server.core.context import RequestContext
from mcp_server.core.protocol import Dispatcher, Session
from mcp_server.fairwins.snapshot import NAME as SNAPSHOT
from mcp_server.fairwins.tools import GatewayTool
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from mcp_server.wire.jsonrpc import Request

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
PACKAGE: Final = "mcp_server"
# The newest manifest version the pinned `mcpb` CLI validates (tests/test_mcpb.py holds this equal
# to the CLI's own LATEST_MANIFEST_VERSION, so bumping the CLI pin shows when a newer one exists).
MANIFEST_VERSION: Final = "0.4"
PUBLIC_RELAY: Final = "https://relay.fairwins.app"
PYTHON_REQUIRED: Final = ">=3.11"
INITIALIZE: Final = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "scripts.mcpb", "version": __version__},
}
# Zip's own epoch: every entry gets it, so the bundle's bytes depend only on its contents.
FIXED_TIME: Final = (1980, 1, 1, 0, 0, 0)
FILE_MODE: Final = 0o644
ENTRY_POINT: Final = "server/main.py"

Kind = Literal["uv", "python"]
# Every bundle built, in the order they are written: server.type → the bundle's file-name suffix,
# how the host starts it, and what the member needs (the last line of the long description).
# MANIFEST.md (modelcontextprotocol/mcpb): a "uv" server is a "Python server using UV runtime"; its bundle "must include
# pyproject.toml" and the host manages execution. The pinned CLI (2.1.2) requires mcp_config for
# every type, and Desktop starts its own uv with mcp_config's args as given (its logs, quoted in
# github.com/oogunbiyi21/stats-compass-mcp/issues/2). `uv run --directory <bundle> server/main.py`
# is the pattern of the spec's hello-world-uv example (whose README runs `uv run src/server.py`):
# uv reads <bundle>/pyproject.toml, finds or fetches a Python that meets requires-python, makes
# <bundle>/.venv and runs `.venv/bin/python server/main.py` in <bundle>.
KINDS: Final[dict[Kind, dict[str, Any]]] = {
    "uv": {
        "suffix": "",
        "mcp_config": {"command": "uv", "args": ["run", "--directory", "${__dirname}", ENTRY_POINT]},
        "needs": "Claude Desktop runs it with its own uv, which provides the Python: nothing needs installing.",
    },
    "python": {
        "suffix": "-python",
        "mcp_config": {
            # The host's own Python, isolated (-I) from the member's Python settings; main.py
            # puts the bundle's server/ first on sys.path and checks the version.
            "command": "python3",
            "args": ["-I", f"${{__dirname}}/{ENTRY_POINT}"],
            # python.org's Windows installer puts `python` on PATH; `python3` there is often
            # the Microsoft Store's placeholder.
            "platform_overrides": {"win32": {"command": "python"}},
        },
        "needs": "It needs Python 3.11 or newer (`python3`, or `python` on Windows) and nothing else.",
    },
}
ENV: Final = {
    "FAIRWINS_API_URL": "${user_config.gateway_url}",
    "FAIRWINS_API_TOKEN": "${user_config.member_token}",
}

# The long description's opening names what the served tools read, so a new tool needs no edit here.
LONG_DESCRIPTION: Final = """\
FairWins for Claude: read {member} with your own token, and {public} with none, and prepare \
unsigned wager transactions for you to review and sign in your own wallet.

The public tools work without a token. For your own data, create a token in the FairWins app \
under **Tools ▸ Assistant ▸ API access** and paste it into this extension's settings: Claude \
Desktop keeps it in your operating system's keychain, and the server sends it only to the \
FairWins gateway you configure.

This server holds no key: it never signs, never submits and never pays. Anything a chain could \
not be read for is reported as unknown, never as none or zero.
"""


def _listed(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def long_description() -> str:
    """LONG_DESCRIPTION with what the served tools read, from their progress labels ("Reading your wagers…")."""
    reads = [
        (t.public, str(t.entry["progress"]).removeprefix("Reading ").rstrip("…"))
        for t in build_catalog(Gateway(None)).tools
        if isinstance(t, GatewayTool) and str(t.entry["progress"]).startswith("Reading ")
    ]
    member = sorted(what for public, what in reads if not public)
    public = sorted(what for public, what in reads if public)
    return LONG_DESCRIPTION.format(member=_listed(member), public=_listed(public))


def _server_json() -> dict[str, Any]:
    value: dict[str, Any] = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    return value


def _served(dispatcher: Dispatcher, session: Session, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = dispatcher.handle(Request(1, method, params), session, RequestContext())
    message = reply.message
    if not isinstance(message, dict) or "result" not in message:
        raise ValueError(f"the server answered {method} with {message}")
    result: dict[str, Any] = message["result"]
    return result


def served_tools_and_prompts() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The manifest's `tools` and `prompts`: the shipped server's answers to tools/list, prompts/list, prompts/get."""
    dispatcher, session = Dispatcher(build_catalog(Gateway(None))), Session()
    _served(dispatcher, session, "initialize", INITIALIZE)
    tools = [
        {"name": t["name"], "description": t["description"]}
        for t in _served(dispatcher, session, "tools/list", {})["tools"]
    ]
    prompts = []
    for prompt in _served(dispatcher, session, "prompts/list", {})["prompts"]:
        arguments = prompt.get("arguments", [])
        if any(a.get("required") for a in arguments):
            # A manifest prompt carries one text; one with a required argument has none to show
            # without inventing a value, so the generator refuses rather than guess.
            raise ValueError(f"prompt {prompt['name']} has a required argument: give the manifest a text for it")
        got = _served(dispatcher, session, "prompts/get", {"name": prompt["name"], "arguments": {}})
        text = "\n\n".join(m["content"]["text"] for m in got["messages"])
        entry: dict[str, Any] = {"name": prompt["name"], "description": prompt["description"]}
        if arguments:
            entry["arguments"] = [a["name"] for a in arguments]
        entry["text"] = text
        prompts.append(entry)
    return tools, prompts


def _mcp_config(kind: Kind) -> dict[str, Any]:
    config = KINDS[kind]["mcp_config"]
    overrides = config.get("platform_overrides")
    return {
        "command": config["command"],
        "args": list(config["args"]),
        "env": dict(ENV),
        **({"platform_overrides": overrides} if overrides else {}),
    }


def manifest(kind: Kind = "uv") -> dict[str, Any]:
    registry = _server_json()
    tools, prompts = served_tools_and_prompts()
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "fairwins-mcp",
        "display_name": registry["title"],
        "version": __version__,
        "description": registry["description"],
        "long_description": f"{long_description()}\n{KINDS[kind]['needs']}\n",
        "author": {"name": "FairWins"},
        "icon": "icon.png",
        "server": {"type": kind, "entry_point": ENTRY_POINT, "mcp_config": _mcp_config(kind)},
        "tools": tools,
        "tools_generated": False,
        "prompts": prompts,
        "prompts_generated": False,
        "keywords": ["fairwins", "wagers", "prediction markets", "x402", "web3"],
        "license": "MIT",
        "compatibility": {
            "platforms": ["darwin", "win32", "linux"],
            "runtimes": {"python": PYTHON_REQUIRED},
        },
        "user_config": {
            "gateway_url": {
                "type": "string",
                "title": "Gateway URL",
                "description": "The FairWins gateway to talk to. Keep the public relay unless you run your own.",
                "default": PUBLIC_RELAY,
                "required": False,
            },
            "member_token": {
                "type": "string",
                "title": "Member token",
                "description": (
                    "Your own fw1.… token, from the FairWins app under Tools > Assistant > API access. "
                    "Optional: the public tools work without it. Kept in your operating system's keychain."
                ),
                "sensitive": True,
                "required": False,
                # Without a default a host that is given no value leaves the text
                # `${user_config.member_token}` in the environment (mcpb issue 251); empty means none.
                "default": "",
            },
        },
    }


def manifest_bytes(kind: Kind = "uv") -> bytes:
    return (json.dumps(manifest(kind), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _project() -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project


def bundle_pyproject() -> bytes:
    """The uv bundle's pyproject.toml: the Python it needs, no dependencies and nothing to build.

    No [build-system] and `package = false`: uv installs nothing from the project itself, so it
    never fetches a build backend; it makes the environment and runs server/main.py in it, and
    main.py imports the bundled package from beside itself.
    """
    project = _project()
    if project["dependencies"] or project["requires-python"] != PYTHON_REQUIRED:
        # Nothing is vendored, and requires-python is written once, here and in the manifest.
        raise ValueError("pyproject.toml's dependencies or requires-python changed: scripts/mcpb.py must follow")
    return (
        "# The uv bundle's project (scripts/mcpb.py). The host's uv reads it to pick a Python and make\n"
        "# the environment; the server (server/) needs nothing but the standard library.\n"
        "[project]\n"
        f'name = "{project["name"]}"\n'
        f'version = "{__version__}"\n'
        f"requires-python = {json.dumps(PYTHON_REQUIRED)}\n"
        "dependencies = []\n"
        "\n"
        "[tool.uv]\n"
        "package = false\n"
    ).encode()


def package_files() -> dict[str, pathlib.Path]:
    """Bundle path → source file for the package: every module, and the package data pyproject.toml names."""
    source = ROOT / PACKAGE
    files = {
        f"server/{path.relative_to(ROOT).as_posix()}": path
        for path in source.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for package, names in pyproject["tool"]["setuptools"]["package-data"].items():
        directory = ROOT.joinpath(*package.split("."))
        for name in names:
            # The snapshot lives once, at the root; the build copies it in (setup.py does the same).
            path = ROOT / SNAPSHOT if name == SNAPSHOT else directory / name
            files[f"server/{package.replace('.', '/')}/{name}"] = path
    return files


def entries(kind: Kind = "uv") -> dict[str, bytes]:
    """Every file of the bundle: path inside the zip → bytes."""
    found = {path: source.read_bytes() for path, source in package_files().items()}
    found[ENTRY_POINT] = (ROOT / "mcpb" / "main.py").read_bytes()
    found["icon.png"] = (ROOT / "mcpb" / "icon.png").read_bytes()
    found["manifest.json"] = manifest_bytes(kind)
    if kind == "uv":
        found["pyproject.toml"] = bundle_pyproject()
    return found


def bundle_bytes(kind: Kind = "uv") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in sorted(entries(kind).items()):
            info = zipfile.ZipInfo(path, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so the mode below is read (mcpb unpack restores it)
            info.external_attr = (0o100000 | FILE_MODE) << 16
            archive.writestr(info, data, compresslevel=9)
    return buffer.getvalue()


def bundle_name(kind: Kind = "uv") -> str:
    return f"fairwins-mcp-{__version__}{KINDS[kind]['suffix']}.mcpb"


def main(argv: Sequence[str] | None = None) -> int:
    """Write every bundle; one line each on stdout: its path, then its size and server.type."""
    parser = argparse.ArgumentParser(prog="python -m scripts.mcpb", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "dist", help="directory to write into (dist/)")
    args = parser.parse_args(argv)
    try:
        built = {kind: bundle_bytes(kind) for kind in KINDS}
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"scripts.mcpb: {exc}\n")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for kind, data in built.items():
        target = args.out / bundle_name(kind)
        target.write_bytes(data)
        sys.stdout.write(f"{target}\t{len(data)} bytes\tserver.type {kind}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
