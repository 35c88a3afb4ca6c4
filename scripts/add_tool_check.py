"""`python -m scripts.add_tool_check [--keep]`: add a throwaway public tool to a copy of the tree, and test it.

What CONTRIBUTING.md's "Adding a tool" promises, shown rather than claimed. The tree as git knows
it (tracked files and new ones not ignored, with their working-copy contents) is copied to a
temporary directory. There a public read, `get_leaderboard` (GET /v1/leaderboard/{chainId}?period=),
is added the way a contributor adds one: by writing the files of WRITTEN and no other. Then the
generated files are regenerated (`make snapshot`, `make readme`), and the tool tests, the contract
tests, the sandbox tests and an official-SDK client session (.venv-sdk) run in the copy, the new
tool among everything they walk. Last, the SDK client calls the new tool itself.

It exits 0 when all of it passed and no file other than WRITTEN and the generated ones changed.
The copy is removed unless --keep is given. tests/test_add_tool.py runs it.
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
from collections.abc import Sequence
from typing import Final

from scripts import readme

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
TIMEOUT: Final = 900.0

# The files a new public read is written in, in the order CONTRIBUTING.md lists them. CHANGELOG.md
# is written when the tree has one.
WRITTEN: Final = ("assistant_contract/tools.py", "tests/sandbox_gateway.py", "tests/samples.py", "CHANGELOG.md")
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
)
TOOL: Final = "get_leaderboard"
ARGUMENTS: Final = {"chainId": 137, "period": "day"}

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


def _insert(text: str, anchor: str, new: str, *, last: bool = False) -> str:
    """`text` with `new` written just before `anchor` (its last occurrence when `last`)."""
    at = text.rfind(anchor) if last else text.find(anchor)
    if at < 0:
        raise SystemExit(f"add_tool_check: the anchor {anchor!r} is gone; update scripts/add_tool_check.py")
    return text[:at] + new + text[at:]


def _changelog(text: str) -> str:
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
        return text[:at] + _CHANGE + "\n" + text[at:]
    return text[:body] + "\n\n### Added\n\n" + _CHANGE + "\n" + text[body:]


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
    written = []
    for path in WRITTEN:
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


def check(tree: pathlib.Path) -> list[str]:
    """Write the tool into `tree`, regenerate, run the tests; the files written. Exits non-zero on any failure."""
    python = sys.executable
    before = _digests(tree)
    written = write_tool(tree)
    print("written:", ", ".join(written), flush=True)
    # The copy's own code runs, not the checkout's editable install.
    where = f"import mcp_server, tests; assert mcp_server.__file__.startswith({str(tree)!r}), mcp_server.__file__"
    _run(tree, python, "-c", where, label="the copy imports its own mcp_server")
    _run(tree, python, "-m", "assistant_contract.export")
    _run(tree, python, "-m", "scripts.readme")
    changed = sorted(path for path, digest in _digests(tree).items() if before.get(path) != digest)
    others = [path for path in changed if path not in written and path not in GENERATED]
    if others:
        raise SystemExit(f"add_tool_check: files changed that a contributor should not have to touch: {others}")
    print("regenerated:", ", ".join(path for path in changed if path in GENERATED), flush=True)
    _run(tree, python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS)
    _run(tree, python, "-c", _SDK_CALL, json.dumps([TOOL, ARGUMENTS]), label=f"the official SDK client calls {TOOL}")
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
    print(f"ok: {TOOL} added in {len(WRITTEN)} hand-written files at most, everything else generated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
