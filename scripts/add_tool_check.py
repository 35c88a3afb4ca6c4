"""`python -m scripts.add_tool_check [--keep]`: add two throwaway tools to a copy of the tree, and test them.

What CONTRIBUTING.md's "Adding a tool" promises, shown rather than claimed. The tree as git knows
it (tracked files and new ones not ignored, with their working-copy contents) is copied to a
temporary directory. There two tools are added the way a contributor adds them, each by writing
the files its kind lists and no other: a public read, `get_leaderboard` (GET
/v1/leaderboard/{chainId}?period=), and a member read drawn by an existing view,
`get_settled_wagers` (GET /v1/member/wagers/settled, scope read:wagers, in the wagers view). Then
the generated files are regenerated (`make snapshot`, `make readme`), and the tool tests, the
contract tests, the sandbox tests, the views' tests and an official-SDK client session (.venv-sdk)
run in the copy, the new tools among everything they walk. Last, the SDK client calls the public
tool, and a client that declares MCP Apps finds the member tool's view and its answer.

It exits 0 when all of it passed and no file other than the written and the generated ones
changed. The copy is removed unless --keep is given. tests/test_add_tool.py runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Final

from scripts import readme

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT: Final = 900.0

# The files a new public read is written in, in the order CONTRIBUTING.md lists them. CHANGELOG.md
# is written when the tree has one.
WRITTEN: Final = ("assistant_contract/tools.py", "tests/sandbox_gateway.py", "tests/samples.py", "CHANGELOG.md")
# The files a new member read without arguments, in a family that has a view, is written in
# (CONTRIBUTING.md's "A member read (scoped)"; no new scope, so not prompt.py).
WRITTEN_MEMBER: Final = (
    "assistant_contract/routes.py",
    "assistant_contract/tools.py",
    "tests/sandbox_gateway.py",
    "mcp_server/fairwins/views.py",
    "CHANGELOG.md",
)
# The files the regeneration may change: the snapshot, and the prose `make readme` writes.
GENERATED: Final = ("toolDefs.snapshot.json", *readme.FILES)
# Installed test tools the copy uses where they are (git-ignored: not part of the tree).
_SHARED: Final = (".venv-sdk", ".tools")
TESTS: Final = (
    "tests/test_tools.py",
    "tests/test_contract.py",
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
        "exec": {"kind": "public", "path": "/v1/leaderboard/{chainId}"},
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


def write_tool(tree: pathlib.Path) -> list[str]:
    """Add the throwaway tool to `tree` by writing WRITTEN's files; the paths written, as WRITTEN lists them."""
    edits = {
        "assistant_contract/tools.py": lambda t: _insert(
            _insert(t, "\n)\n\n# --- what each tool answers", "\n" + _RECORD.rstrip("\n")),
            "}\n",
            _ANSWER,
            last=True,
        ),
        "tests/sandbox_gateway.py": lambda t: _insert(t, "# --- the route table ---", _SANDBOX),
        "tests/samples.py": lambda t: _insert(t, "}\n", _SAMPLE, last=True),
        "CHANGELOG.md": _changelog,
    }
    return _write(tree, WRITTEN, edits)


def write_member_tool(tree: pathlib.Path) -> list[str]:
    """Add the throwaway member tool, in the wagers view, by writing WRITTEN_MEMBER's files; the paths written."""
    edits = {
        "assistant_contract/routes.py": lambda t: _insert(t, '    "member.fees": ', _MEMBER_ROUTE),
        "assistant_contract/tools.py": lambda t: _insert(
            _insert(t, "\n)\n\n# --- what each tool answers", "\n" + _MEMBER_RECORD.rstrip("\n")),
            "}\n",
            _MEMBER_ANSWER,
            last=True,
        ),
        "tests/sandbox_gateway.py": lambda t: _insert(
            _insert(t, "# --- the route table ---", _MEMBER_HANDLER), '    _Route("member.fees"', _MEMBER_SANDBOX_ROUTE
        ),
        # Which tools have a view is the view's tool list.
        "mcp_server/fairwins/views.py": lambda t: _replace(t, '("get_wagers",),', f'("get_wagers", "{MEMBER_TOOL}"),'),
        "CHANGELOG.md": lambda t: _changelog(t, _MEMBER_CHANGE),
    }
    return _write(tree, WRITTEN_MEMBER, edits)


def _replace(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise SystemExit(f"add_tool_check: {old!r} is not in the file once; update scripts/add_tool_check.py")
    return text.replace(old, new)


def _write(tree: pathlib.Path, paths: Sequence[str], edits: dict[str, Callable[[str], str]]) -> list[str]:
    written = []
    for path in paths:
        file = tree / path
        if not file.exists() and path == "CHANGELOG.md":
            continue
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


def _run(tree: pathlib.Path, *args: str, label: str = "") -> None:
    print("$", label or " ".join(args), flush=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(args, cwd=tree, env=env, timeout=TIMEOUT)
    if done.returncode != 0:
        raise SystemExit(f"add_tool_check: `{' '.join(args)}` failed (exit {done.returncode}) in {tree}")


_SDK_CALL: Final = """
import json, sys
from tests.conftest import server_env
from tests.sandbox_gateway import SandboxGateway
from tests.test_sdk_client import sdk
name, arguments = json.loads(sys.argv[1])
with SandboxGateway() as gateway:
    stdin = json.dumps([name, arguments]) + "\\n"
    report = sdk("calls", "legacy", sys.executable, stdin=stdin, env=server_env(FAIRWINS_API_URL=gateway.url))
(call,) = report["calls"]
assert "raised" not in call and call["jsonschema"] == [] and call["isError"] is False, call
assert call["structuredContent"]["leaders"], call
assert report["schemas"][name]["anyOf"][0]["properties"]["leaders"], report["schemas"][name]
print("the official SDK client called", name, "and read", len(call["structuredContent"]["leaders"]), "leaders")
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


def check(tree: pathlib.Path) -> tuple[list[str], list[str]]:
    """Write the tools into `tree`, regenerate, run the tests; the files written for each. Exits non-zero on any
    failure."""
    python = sys.executable
    before = _digests(tree)
    written = write_tool(tree)
    print("written:", ", ".join(written), flush=True)
    written_member = write_member_tool(tree)
    print("written for the member tool:", ", ".join(written_member), flush=True)
    # The copy's own code runs, not the checkout's editable install.
    where = f"import mcp_server, tests; assert mcp_server.__file__.startswith({str(tree)!r}), mcp_server.__file__"
    _run(tree, python, "-c", where, label="the copy imports its own mcp_server")
    _run(tree, python, "-m", "assistant_contract.export")
    _run(tree, python, "-m", "scripts.readme")
    changed = sorted(path for path, digest in _digests(tree).items() if before.get(path) != digest)
    others = [path for path in changed if path not in {*written, *written_member} and path not in GENERATED]
    if others:
        raise SystemExit(f"add_tool_check: files changed that a contributor should not have to touch: {others}")
    print("regenerated:", ", ".join(path for path in changed if path in GENERATED), flush=True)
    _run(tree, python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS)
    _run(tree, python, "-c", _SDK_CALL, json.dumps([TOOL, ARGUMENTS]), label=f"the official SDK client calls {TOOL}")
    _run(tree, python, "-c", _VIEW_CHECK, MEMBER_TOOL, label=f"a client with MCP Apps calls {MEMBER_TOOL}")
    return written, written_member


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
        f"ok: {TOOL} added in {len(WRITTEN)} hand-written files at most, {MEMBER_TOOL} with its view in "
        f"{len(WRITTEN_MEMBER)}, everything else generated"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
