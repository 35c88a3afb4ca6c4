"""A new public tool is the files CONTRIBUTING.md lists, and nothing else (scripts/add_tool_check.py).

The script copies the tree, adds a throwaway public read by writing only those files,
regenerates, and runs the tool, contract and sandbox tests and an official-SDK client session
in the copy. `-m add_tool` runs this alone (about a minute; `make add-tool-check` runs the script).
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


def test_contributing_lists_exactly_the_files_the_script_writes_for_a_public_read() -> None:
    assert listed_files("A public read") == list(add_tool_check.WRITTEN)
    assert len(add_tool_check.WRITTEN) <= 4


def test_contributing_lists_every_file_the_script_writes_for_a_member_read_with_a_view() -> None:
    listed = listed_files("A member read (scoped)")
    assert set(add_tool_check.WRITTEN_MEMBER) <= set(listed)
    # In CONTRIBUTING's order; prompt.py (a new scope) and samples.py (arguments) are not needed here.
    assert [p for p in listed if p in add_tool_check.WRITTEN_MEMBER] == list(add_tool_check.WRITTEN_MEMBER)
    assert len(add_tool_check.WRITTEN_MEMBER) <= 5


def test_contributing_names_every_file_it_lists_and_each_exists_or_is_the_changelog() -> None:
    for kind in ("A public read", "A member read (scoped)", "A priced member read"):
        files = listed_files(kind)
        assert files, kind
        for path in files:
            assert (ROOT / path).is_file() or path == "CHANGELOG.md", f"{kind}: {path} does not exist"


@pytest.mark.add_tool
def test_a_throwaway_public_tool_added_by_writing_only_those_files_passes_the_tests() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.add_tool_check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=add_tool_check.TIMEOUT,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    (written,) = [line for line in done.stdout.splitlines() if line.startswith("written: ")]
    expected = [p for p in add_tool_check.WRITTEN if (ROOT / p).exists()]
    assert written.removeprefix("written: ").split(", ") == expected
    assert f"the official SDK client called {add_tool_check.TOOL} and read 2 leaders" in done.stdout
    (member,) = [line for line in done.stdout.splitlines() if line.startswith("written for the member tool: ")]
    expected = [p for p in add_tool_check.WRITTEN_MEMBER if (ROOT / p).exists()]
    assert member.removeprefix("written for the member tool: ").split(", ") == expected
    assert f"finds {add_tool_check.MEMBER_TOOL} in the wagers view, and reads 1 wager" in done.stdout
    (regenerated,) = [line for line in done.stdout.splitlines() if line.startswith("regenerated: ")]
    assert "toolDefs.snapshot.json" in regenerated and "README.md" in regenerated
