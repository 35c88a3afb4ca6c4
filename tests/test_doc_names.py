"""Every `*.md` file a comment, a doc or a test names is in the repository, or is named with its project.

A clone alone must tell a maintainer what the code follows: a design note cited from the code and
kept elsewhere cannot be read or updated from a checkout. So each name is looked up among the
repository's files (as written, beside the file that names it, or as a file of that name in some
folder); a page of another project counts only when the project is named beside it, by its
address or its owner/name.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Final

import pytest

from tests.conftest import ROOT

_MD: Final = re.compile(r"(?<![\w./-])(?:\.\./|\./)*[\w][\w./-]*\.md\b")
_URL: Final = re.compile(r"(?:https?://|github\.com/)\S+")
_ESCAPE: Final = re.compile(r"\\[nrt]")
# Pages of other projects the tree cites, by file name, with the project that must be named beside them.
EXTERNAL: Final = {
    "MANIFEST.md": "modelcontextprotocol/mcpb",
    "scheme_exact_evm.md": "coinbase/x402",
    "scheme_exact_svm.md": "coinbase/x402",
    "http.md": "coinbase/x402",
    "mcp.md": "coinbase/x402",
    "official-registry-requirements.md": "modelcontextprotocol/registry",
}
# Names the link checker's own test plants to show it reports them (tests/test_readme.py).
_PLANTED: Final = {"gone", "gone-too", "gone-as-well", "other"}
PLANTED: Final = {("tests/test_readme.py", f"{prefix}{name}.md") for name in _PLANTED for prefix in ("", "docs/")}


def tracked() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


FILES: Final = tracked()


def mentions(text: str) -> Iterator[tuple[int, str, str]]:
    """Each `*.md` name in `text`, with its line number and the lines around it; addresses left out."""
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        bare = _URL.sub(" ", _ESCAPE.sub(" ", line))
        for found in _MD.finditer(bare):
            around = "\n".join(lines[max(0, number - 3) : number + 2])
            yield number, found.group(0), around


def resolves(name: str, where: str) -> bool:
    """Is `name`, named in the file `where`, a file of this repository?"""
    base = (ROOT / where).parent
    for candidate in (ROOT / name, base / name):
        if candidate.resolve().is_file() and candidate.resolve().is_relative_to(ROOT):
            return True
    plain = name.lstrip("./")
    # A bare name ("FIXTURES.md"), or a path inside a bundle or a copy of the tree
    # ("server/mcp_server/fairwins/guide.md").
    return any(f.endswith("/" + plain) or plain.endswith("/" + f) for f in FILES)


def problems_in(path: str, text: str) -> list[str]:
    found = []
    for number, name, around in mentions(text):
        if (path, name) in PLANTED or resolves(name, path):
            continue
        project = EXTERNAL.get(name.rsplit("/", 1)[-1])
        if project is not None and project in around:
            continue
        found.append(f"{path}:{number}: names {name}, which is not in the repository")
    return found


def _text(path: str) -> str | None:
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # not text


def test_no_comment_doc_or_test_names_a_markdown_file_the_repository_lacks() -> None:
    problems = []
    for path in FILES:
        text = _text(path)
        if text is not None and path != "toolDefs.snapshot.json":
            problems += problems_in(path, text)
    assert problems == [], "\n".join(problems)


# The names are put together here, so this file names no such page itself.
@pytest.mark.parametrize(
    ("line", "stem"),
    [("# the rules are in {}", "STYLE"), ("see {} §3", "research/x402"), ("({}) says so", "MANIFEST")],
)
def test_the_check_reports_a_design_note_kept_elsewhere_and_a_page_whose_project_is_not_named(
    line: str, stem: str
) -> None:
    name = stem + ".md"
    (found,) = problems_in("mcp_server/example.py", line.format(name))
    assert found == f"mcp_server/example.py:1: names {name}, which is not in the repository"


def test_the_check_accepts_pages_of_the_tree_addresses_and_pages_named_with_their_project() -> None:
    text = "\n".join(
        [
            "docs/gateway.md, and guide.md beside it, and FIXTURES.md anywhere in the tree",
            "the spec: https://github.com/modelcontextprotocol/mcpb/blob/main/MANIFEST.md",
            "modelcontextprotocol/mcpb: MANIFEST.md",
            "a bundle's server/mcp_server/fairwins/guide.md",
        ]
    )
    assert problems_in("mcp_server/fairwins/tools.py", text) == []
