"""`python -m scripts.add_tool_check [--keep]`: add three throwaway tools to a copy of the tree, and test them.

What CONTRIBUTING.md's "Adding a tool" promises, shown rather than claimed. The tree as git knows
it (tracked files and new ones not ignored, with their working-copy contents) is copied to a
temporary directory. There three tools are added the way a contributor adds them, each by writing
the files its kind lists and no other: a pinned public read, `get_leaderboard` (GET
/v1/leaderboard/{chainId}?period=); a relayed public read, `get_market_history` (GET
/v1/polymarket/{chainId}/markets/{marketId}/history, Polymarket's shape); and a member read drawn
by an existing view, `get_settled_wagers` (GET /v1/member/wagers/settled, scope read:wagers, in
the wagers view). The snapshot is regenerated (`make snapshot`), which names the new version of
the contract; it is written into assistant_contract/versions.py as a contributor writes it; then
the prose is regenerated (`make readme`), and the tool tests, the contract tests, the recipe's
tests, the relayed reads' tests, the sandbox tests, the views' tests and an official-SDK client
session (.venv-sdk) run in the copy, the new tools among everything they walk. Last, the SDK
client calls both public tools, and a client that declares MCP Apps finds the member tool's view
and its answer.

It exits 0 when all of it passed and no file other than the written and the generated ones
changed. The copy is removed unless --keep is given. tests/test_add_tool.py runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Final

from scripts import readme

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT: Final = 900.0

# The contract's version: written once for all three tools here, as one change would bump it once.
VERSIONS: Final = "assistant_contract/versions.py"
# The files a new public read, pinned or relayed, is written in, in the order CONTRIBUTING.md lists
# them. CHANGELOG.md is written when the tree has one.
WRITTEN: Final = (
    "assistant_contract/tools.py",
    "tests/sandbox_gateway.py",
    "tests/samples.py",
    VERSIONS,
    "CHANGELOG.md",
)
WRITTEN_RELAYED: Final = WRITTEN
# The files a new member read without arguments, drawn by an existing view, is written in
# (CONTRIBUTING.md's "A member read (scoped)"; no new scope, so not prompt.py; no arguments, so
# not samples.py; the view is named in its record, so not views.py).
WRITTEN_MEMBER: Final = (
    "assistant_contract/routes.py",
    "assistant_contract/tools.py",
    "tests/sandbox_gateway.py",
    VERSIONS,
    "CHANGELOG.md",
)
# The files the regeneration may change: the snapshot, and the prose `make readme` writes.
GENERATED: Final = ("toolDefs.snapshot.json", *readme.FILES)
# Installed test tools the copy uses where they are (git-ignored: not part of the tree).
_SHARED: Final = (".venv-sdk", ".tools")
TESTS: Final = (
    "tests/test_tools.py",
    "tests/test_contract.py",
    "tests/test_recipe.py",
    "tests/test_relayed_shapes.py",
    "tests/test_contract_package.py",
    "tests/test_parity_server.py",
    "tests/test_sandbox_gateway.py",
    "tests/test_sdk_client.py",
    "tests/test_readme.py::test_every_generated_list_is_what_the_server_serves",
    "tests/test_apps.py",
    "tests/test_doctor.py",
)
TOOL: Final = "get_leaderboard"
ARGUMENTS: Final = {"chainId": 137, "period": "day"}
RELAYED_TOOL: Final = "get_market_history"
RELAYED_ARGUMENTS: Final = {"chainId": 137, "marketId": "pm-101"}
MEMBER_TOOL: Final = "get_settled_wagers"

# --- what a contributor writes ---------------------------------------------------------------

_RECORD: Final = """    {
        "name": "get_leaderboard",
        "title": "Leaderboard",
        "description": (
            "Read the members who won the most on a chain over the last day, the last week or all "
            "time (a week unless another period is given). Public: needs no token." + _WHOLE
        ),
        "inputSchema": _object(
            {
                "chainId": _CHAIN_ID,
                "period": {
                    "type": "string",
                    "enum": ["day", "week", "all"],
                    "minLength": 1,
                    "maxLength": 4,
                    "default": "week",
                    "description": "Over which period: day, week or all.",
                },
            },
            ("chainId",),
        ),
        "auth": "none",
        "exec": {"kind": "public", "path": "/v1/leaderboard/{chainId}", "source": FAIRWINS},
        "progress": "Reading the leaderboard…",
    },
"""
_ANSWER: Final = """    "get_leaderboard": obj(
        {
            "chainId": CHAIN_ID,
            "period": described(TEXT, "day, week or all, as asked."),
            "asOf": WHEN,
            "leaders": array(
                obj({"rank": {"type": "integer", "minimum": 1}, "account": ADDRESS, "won": DECIMAL}),
                "The members who won the most, best first.",
            ),
        },
        description="The members who won the most on one chain over one period.",
    ),
"""
_SANDBOX: Final = """_LEADERS: Final[Mapping[str, tuple[Json, ...]]] = {
    "day": ({"rank": 1, "account": ACCOUNT_B, "won": "40.00"}, {"rank": 2, "account": ACCOUNT_A, "won": "12.50"}),
    "week": ({"rank": 1, "account": ACCOUNT_A, "won": "310.00"}, {"rank": 2, "account": ACCOUNT_B, "won": "95.25"}),
    "all": ({"rank": 1, "account": ACCOUNT_A, "won": "4120.00"}, {"rank": 2, "account": ACCOUNT_B, "won": "2890.75"}),
}


@_public_read(
    "get_leaderboard",
    "/v1/leaderboard/{chainId}",
    "The members who won the most, per period",
    _Query("period", {"type": "string", "enum": list(_LEADERS)}),
)
def _leaderboard(call: _Call) -> _Answer:
    chain_id = _chain_param(call)
    if isinstance(chain_id, _Answer):
        return chain_id
    period = call.query.get("period", ["week"])[0]
    if period not in _LEADERS:
        return _bad_request(f"period must be one of {', '.join(_LEADERS)}, got {period!r}")
    return _json(200, {"chainId": chain_id, "period": period, "asOf": AS_OF, "leaders": list(_LEADERS[period])})


"""
_SAMPLE: Final = f'    "{TOOL}": {json.dumps(ARGUMENTS)},\n'
_CHANGE: Final = f"- `{TOOL}`: the members who won the most on a chain, per day, week or all time (a public read)."

_RELAYED_RECORD: Final = """    {
        "name": "get_market_history",
        "title": "Market price history",
        "description": (
            "Read how a prediction market's price has moved, as Polymarket publishes it, for a market "
            "id that get_prediction_markets gave. Public: needs no token." + _WHOLE
        ),
        "inputSchema": _object(
            {
                "chainId": {**_CHAIN_ID, "default": 137},
                "marketId": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 100,
                    "pattern": "^[A-Za-z0-9._-]+$",
                    "description": "The market's id, as get_prediction_markets gives it.",
                },
            },
            ("marketId",),
        ),
        "auth": "none",
        "exec": {
            "kind": "public",
            "path": "/v1/polymarket/{chainId}/markets/{marketId}/history",
            "source": "Polymarket",
        },
        "progress": "Reading the market's price history…",
    },
"""
_RELAYED_ANSWER: Final = """    "get_market_history": obj(
        {
            "marketId": _open("string", "integer"),
            "history": array(
                obj(
                    {
                        "t": _open("string", "integer", description="When: RFC 3339, or seconds since 1970."),
                        "p": _open("string", "number", description="The price then, 0 to 1."),
                    }
                ),
                "The price at each point, oldest first.",
            ),
        },
        ("history",),
        "A prediction market's price history, relayed from Polymarket.",
    ),
"""
_RELAYED_SANDBOX: Final = """_HISTORY: Final = (
    ("2026-11-27T00:00:00Z", 1795737600, "0.37"),
    ("2026-11-28T00:00:00Z", 1795824000, "0.39"),
    ("2026-11-29T00:00:00Z", 1795910400, "0.41"),
)


@_public_read("get_market_history", "/v1/polymarket/{chainId}/markets/{marketId}/history", "A market's price history")
def _market_history(call: _Call) -> _Answer:
    chain_id = _chain_param(call)
    if isinstance(chain_id, _Answer):
        return chain_id
    market = call.params["marketId"]
    if chain_id != CHAIN_READ or market not in {m["id"] for m in _MARKETS}:
        return _error(404, "not_found", f"no market {market} on chain {chain_id}")
    if call.relayed == "sandbox":
        return _json(200, {"marketId": market, "history": [{"t": at, "p": p} for at, _, p in _HISTORY]})
    # Polymarket's prices-history as it publishes it: seconds since 1970, the price a number.
    return _json(200, {"history": [{"t": seconds, "p": float(p)} for _, seconds, p in _HISTORY]})


"""
_RELAYED_SAMPLE: Final = f'    "{RELAYED_TOOL}": {json.dumps(RELAYED_ARGUMENTS)},\n'
_RELAYED_CHANGE: Final = (
    f"- `{RELAYED_TOOL}`: how a prediction market's price moved, relayed from Polymarket (a public read)."
)

_MEMBER_ROUTE: Final = """    "member.wagers.settled": {
        "method": "GET",
        "path": "/v1/member/wagers/settled",
        "scope": "read:wagers",
        "priced": False,
    },
"""
_MEMBER_RECORD: Final = """    {
        "name": "get_settled_wagers",
        "title": "Your settled wagers",
        "description": "Read the member's settled wagers, per chain." + _ENVELOPE + _OTHERS_TEXT,
        "inputSchema": _object({}),
        "auth": "grant",
        "scope": "read:wagers",
        "exec": {"kind": "route", "route": "member.wagers.settled"},
        "progress": "Reading your settled wagers…",
        "view": "wagers",
    },
"""
_MEMBER_ANSWER: Final = '    "get_settled_wagers": envelope("wagers", array(_WAGER), "the member\'s settled wagers"),\n'
_MEMBER_HANDLER: Final = """def _settled_wagers(call: _Call) -> _Answer:
    settled = [w for w in _WAGERS.get(call.account, ()) if isinstance(w, dict) and w.get("status") == "settled"]
    return _json(200, _envelope("wagers", settled))


"""
_MEMBER_SANDBOX_ROUTE: Final = """    _Route(
        "member.wagers.settled",
        "GET",
        "/v1/member/wagers/settled",
        "read:wagers",
        None,
        _settled_wagers,
        "Settled wagers, per chain",
        envelope=True,
    ),
"""
_MEMBER_CHANGE: Final = (
    f"- `{MEMBER_TOOL}`: the member's settled wagers, per chain, in the wagers view (a member read)."
)


def _insert(text: str, anchor: str, new: str, *, last: bool = False) -> str:
    """`text` with `new` written just before `anchor` (its last occurrence when `last`)."""
    at = text.rfind(anchor) if last else text.find(anchor)
    if at < 0:
        raise SystemExit(f"add_tool_check: the anchor {anchor!r} is gone; update scripts/add_tool_check.py")
    return text[:at] + new + text[at:]


def _changelog(text: str, change: str = _CHANGE) -> str:
    """CHANGELOG.md with the new tool under ## [Unreleased], in its ### Added list (made when missing)."""
    head = "## [Unreleased]"
    start = text.find(head)
    if start < 0:
        raise SystemExit("add_tool_check: CHANGELOG.md has no ## [Unreleased] section")
    body = start + len(head)
    end = text.find("\n## ", body)
    section = text[body : end if end >= 0 else len(text)]
    added = section.find("\n### Added\n")
    if added >= 0:
        at = body + added + len("\n### Added\n")
        while text.startswith("\n", at):  # a blank line after the heading stays
            at += 1
        return text[:at] + change + "\n" + text[at:]
    return text[:body] + "\n\n### Added\n\n" + change + "\n" + text[body:]


def _tool_and_answer(record: str, answer: str) -> Callable[[str], str]:
    """assistant_contract/tools.py with `record` last in TOOL_DEFS and `answer` last in ANSWERS."""
    return lambda t: _insert(
        _insert(t, "\n)\n\n# --- what each tool answers", "\n" + record.rstrip("\n")), "}\n", answer, last=True
    )


def write_tool(tree: pathlib.Path) -> list[str]:
    """Add the throwaway pinned public read to `tree` by writing WRITTEN's files (but the version); the paths."""
    edits = {
        "assistant_contract/tools.py": _tool_and_answer(_RECORD, _ANSWER),
        "tests/sandbox_gateway.py": lambda t: _insert(t, "# --- the route table ---", _SANDBOX),
        "tests/samples.py": lambda t: _insert(t, "}\n", _SAMPLE, last=True),
        "CHANGELOG.md": _changelog,
    }
    return _write(tree, WRITTEN, edits)


def write_relayed_tool(tree: pathlib.Path) -> list[str]:
    """Add the throwaway relayed public read by writing WRITTEN_RELAYED's files (but the version); the paths."""
    edits = {
        "assistant_contract/tools.py": _tool_and_answer(_RELAYED_RECORD, _RELAYED_ANSWER),
        "tests/sandbox_gateway.py": lambda t: _insert(t, "# --- the route table ---", _RELAYED_SANDBOX),
        "tests/samples.py": lambda t: _insert(t, "}\n", _RELAYED_SAMPLE, last=True),
        "CHANGELOG.md": lambda t: _changelog(t, _RELAYED_CHANGE),
    }
    return _write(tree, WRITTEN_RELAYED, edits)


def write_member_tool(tree: pathlib.Path) -> list[str]:
    """Add the throwaway member tool, in the wagers view, by writing WRITTEN_MEMBER's files (but the version)."""
    edits = {
        "assistant_contract/routes.py": lambda t: _insert(t, '    "member.fees": ', _MEMBER_ROUTE),
        # Its record names its view: which tools a view draws follows from the records.
        "assistant_contract/tools.py": _tool_and_answer(_MEMBER_RECORD, _MEMBER_ANSWER),
        "tests/sandbox_gateway.py": lambda t: _insert(
            _insert(t, "# --- the route table ---", _MEMBER_HANDLER), '    _Route("member.fees"', _MEMBER_SANDBOX_ROUTE
        ),
        "CHANGELOG.md": lambda t: _changelog(t, _MEMBER_CHANGE),
    }
    return _write(tree, WRITTEN_MEMBER, edits)


def write_version(tree: pathlib.Path, line: str) -> str:
    """assistant_contract/versions.py with the version and fingerprint `line` (`"1.2.0": "<sha256>"`) that
    `make snapshot` printed for a tool added (minor) as its newest line, as a contributor copies it."""
    version = line.split('"')[1]
    file = tree / VERSIONS
    text = re.sub(
        r'^__version__ = "[^"]*"$', f'__version__ = "{version}"', file.read_text(encoding="utf-8"), count=1, flags=re.M
    )
    file.write_text(_insert(text, "}\n", f"    {line},\n", last=True), encoding="utf-8")
    return VERSIONS


def _write(tree: pathlib.Path, paths: Sequence[str], edits: dict[str, Callable[[str], str]]) -> list[str]:
    """Each of `paths` edited; the paths, in order. The version is listed but written once, by write_version."""
    written = []
    for path in paths:
        file = tree / path
        if not file.exists() and path == "CHANGELOG.md":
            continue
        if path != VERSIONS:
            file.write_text(edits[path](file.read_text(encoding="utf-8")), encoding="utf-8")
        written.append(path)
    return written


# --- the copy, and what runs in it -----------------------------------------------------------


def copy_tree(to: pathlib.Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    for name in _SHARED:
        if (ROOT / name).exists():
            (to / name).symlink_to((ROOT / name).resolve())


def _digests(tree: pathlib.Path) -> dict[str, str]:
    return {
        p.relative_to(tree).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in tree.rglob("*")
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts
    }


def _run(tree: pathlib.Path, *args: str, label: str = "", capture: bool = False) -> str:
    """Run `args` in the copy, on its own code; what it printed when `capture` (printed here too)."""
    print("$", label or " ".join(args), flush=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(args, cwd=tree, env=env, timeout=TIMEOUT, capture_output=capture, text=True)
    if capture:
        print(done.stdout, end="", flush=True)
        sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"add_tool_check: `{' '.join(args)}` failed (exit {done.returncode}) in {tree}")
    return done.stdout if capture else ""


_SDK_CALL: Final = """
import json, sys
from tests.conftest import server_env
from tests.sandbox_gateway import SandboxGateway
from tests.test_sdk_client import sdk
name, arguments, key = json.loads(sys.argv[1])
with SandboxGateway() as gateway:
    stdin = json.dumps([name, arguments]) + "\\n"
    report = sdk("calls", "legacy", sys.executable, stdin=stdin, env=server_env(FAIRWINS_API_URL=gateway.url))
(call,) = report["calls"]
assert "raised" not in call and call["jsonschema"] == [] and call["isError"] is False, call
assert call["structuredContent"][key], call
assert report["schemas"][name]["anyOf"][0]["properties"][key], report["schemas"][name]
print("the official SDK client called", name, "and read", len(call["structuredContent"][key]), key)
"""


_VIEW_CHECK: Final = """
import sys
from mcp_server.fairwins import views
from tests.conftest import client_for
from tests.sandbox_gateway import TOKEN_MEMBER_A, SandboxGateway
from tests.test_apps import UI_CAPS, legacy
name = sys.argv[1]
(view,) = [v for v in views.VIEWS if name in v.tools]
with SandboxGateway() as gateway:
    mcp = client_for(gateway.url)
    legacy(mcp, UI_CAPS)
    tools = {t["name"]: t for t in mcp.request("tools/list")["result"]["tools"]}
    assert tools[name]["_meta"]["ui"]["resourceUri"] == view.uri, tools[name]
    (page,) = mcp.request("resources/read", {"uri": view.uri})["result"]["contents"]
    tools_attribute = " ".join(view.tools)
    assert f'data-view="{view.name}" data-tools="{tools_attribute}"' in page["text"]
    result = mcp.call_tool(name, bearer=TOKEN_MEMBER_A)
    (read,) = [c for c in result["structuredContent"]["chains"] if c["state"] == "read"]
    assert result["isError"] is False and [w["id"] for w in read["wagers"]] == ["w-a-3"], result
print("a client with MCP Apps finds", name, "in the", view.name, "view, and reads", len(read["wagers"]), "wager")
"""


# `make snapshot`'s line for a new version of the contract when a tool, route or field was added.
_MINOR: Final = re.compile(r'is minor \(("\d+\.\d+\.\d+": "[0-9a-f]{64}")\)')


def check(tree: pathlib.Path) -> dict[str, list[str]]:
    """Write the tools into `tree`, regenerate, run the tests; the files written for each tool. Exits non-zero on
    any failure."""
    python = sys.executable
    before = _digests(tree)
    written = {TOOL: write_tool(tree), RELAYED_TOOL: write_relayed_tool(tree), MEMBER_TOOL: write_member_tool(tree)}
    for name, paths in written.items():
        print(f"written for {name}:", ", ".join(paths), flush=True)
    # The copy's own code runs, not the checkout's editable install.
    where = f"import mcp_server, tests; assert mcp_server.__file__.startswith({str(tree)!r}), mcp_server.__file__"
    _run(tree, python, "-c", where, label="the copy imports its own mcp_server")
    said = _run(tree, python, "-m", "assistant_contract.export", capture=True)
    line = _MINOR.search(said)
    if line is None:
        raise SystemExit(f"add_tool_check: `make snapshot` named no new minor version of the contract:\n{said}")
    print("the new version, as `make snapshot` named it:", write_version(tree, line.group(1)), line.group(1))
    _run(tree, python, "-m", "assistant_contract.export", "--check")
    _run(tree, python, "-m", "scripts.readme")
    changed = sorted(path for path, digest in _digests(tree).items() if before.get(path) != digest)
    hand = {path for paths in written.values() for path in paths}
    others = [path for path in changed if path not in hand and path not in GENERATED]
    if others:
        raise SystemExit(f"add_tool_check: files changed that a contributor should not have to touch: {others}")
    print("regenerated:", ", ".join(path for path in changed if path in GENERATED), flush=True)
    _run(tree, python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS)
    for name, arguments, key in ((TOOL, ARGUMENTS, "leaders"), (RELAYED_TOOL, RELAYED_ARGUMENTS, "history")):
        _run(
            tree,
            python,
            "-c",
            _SDK_CALL,
            json.dumps([name, arguments, key]),
            label=f"the official SDK client calls {name}",
        )
    _run(tree, python, "-c", _VIEW_CHECK, MEMBER_TOOL, label=f"a client with MCP Apps calls {MEMBER_TOOL}")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.add_tool_check", description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the copy and print where it is")
    args = parser.parse_args(argv)
    tree = pathlib.Path(tempfile.mkdtemp(prefix="fairwins-add-tool-"))
    try:
        copy_tree(tree)
        check(tree)
    finally:
        if args.keep:
            print("the copy:", tree)
        else:
            shutil.rmtree(tree, ignore_errors=True)
    print(
        f"ok: {TOOL} (pinned) and {RELAYED_TOOL} (relayed) added in {len(WRITTEN)} hand-written files at most, "
        f"{MEMBER_TOOL} with its view in {len(WRITTEN_MEMBER)}, everything else generated"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
