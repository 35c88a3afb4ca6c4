"""A new tool is the files CONTRIBUTING.md lists for its kind, and nothing else (scripts/add_tool_check.py).

The script copies the tree, adds a throwaway pinned public read, relayed public read and member
read with a view by writing only those files, regenerates, and runs the tool, contract, recipe,
relayed, sandbox and view tests and official-SDK client sessions in the copy. `-m add_tool` runs
this alone (a few minutes; `make add-tool-check` runs the script).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Final

import pytest

from scripts import add_tool_check
from tests.conftest import ROOT

CONTRIBUTING: Final = ROOT / "CONTRIBUTING.md"


def _section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def listed_files(kind: str) -> list[str]:
    """The files CONTRIBUTING.md's "Adding a tool" lists for `kind`: the first code span of each numbered item."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = _section(_section(text, "## Adding a tool"), f"### {kind}")
    return re.findall(r"^\d+\. `([^`]+)`", section, re.M)


PUBLIC: Final = "A public read, pinned or relayed"
MEMBER: Final = "A member read (scoped)"


def test_contributing_lists_exactly_the_files_the_script_writes_for_a_public_read_pinned_or_relayed() -> None:
    assert listed_files(PUBLIC) == list(add_tool_check.WRITTEN) == list(add_tool_check.WRITTEN_RELAYED)
    assert len(add_tool_check.WRITTEN) <= 5


def test_contributing_lists_every_file_the_script_writes_for_a_member_read_with_a_view() -> None:
    listed = listed_files(MEMBER)
    assert set(add_tool_check.WRITTEN_MEMBER) <= set(listed)
    # In CONTRIBUTING's order; prompt.py (a new scope) and samples.py (arguments) are not needed here,
    # nor views.py: the record names its view.
    assert [p for p in listed if p in add_tool_check.WRITTEN_MEMBER] == list(add_tool_check.WRITTEN_MEMBER)
    assert len(add_tool_check.WRITTEN_MEMBER) <= 5


def test_contributing_names_every_file_it_lists_and_each_exists_or_is_the_changelog() -> None:
    for kind in (PUBLIC, MEMBER, "A priced member read", "A new view"):
        files = listed_files(kind)
        assert files, kind
        for path in files:
            assert (ROOT / path).is_file() or path == "CHANGELOG.md", f"{kind}: {path} does not exist"


@pytest.mark.add_tool
def test_three_throwaway_tools_added_by_writing_only_those_files_pass_the_tests() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.add_tool_check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=add_tool_check.TIMEOUT,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for tool, files in (
        (add_tool_check.TOOL, add_tool_check.WRITTEN),
        (add_tool_check.RELAYED_TOOL, add_tool_check.WRITTEN_RELAYED),
        (add_tool_check.MEMBER_TOOL, add_tool_check.WRITTEN_MEMBER),
    ):
        (written,) = [line for line in done.stdout.splitlines() if line.startswith(f"written for {tool}: ")]
        expected = [p for p in files if (ROOT / p).exists()]
        assert written.removeprefix(f"written for {tool}: ").split(", ") == expected
    assert f"the official SDK client called {add_tool_check.TOOL} and read 2 leaders" in done.stdout
    assert f"the official SDK client called {add_tool_check.RELAYED_TOOL} and read 3 history" in done.stdout
    assert f"finds {add_tool_check.MEMBER_TOOL} in the wagers view, and reads 1 wager" in done.stdout
    assert "the new version, as `make snapshot` named it: assistant_contract/versions.py" in done.stdout
    (regenerated,) = [line for line in done.stdout.splitlines() if line.startswith("regenerated: ")]
    assert "toolDefs.snapshot.json" in regenerated and "docs/gateway.md" in regenerated
