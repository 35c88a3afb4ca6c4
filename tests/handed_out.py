"""Every fenced block in the docs an operator or member copies from, and the kind of thing it is.

A block's kind comes from its info string: `nginx`, `sh container` (docker/podman lines),
`sh deploy` (a deployment's commands, checked against deploy/), `sh runnable`, `sh`, `python`,
`text`; a `yaml` block holding `scrape_configs` is a Prometheus config and a `json` block holding
`mcpServers` a Claude Desktop config. Any other info string is a kind of its own, which no
checker knows (tests/test_handed_out_configs.py then fails, naming it).
Whatever the info string says, a body that looks like a config (an nginx block, a scrape config, a
Dockerfile, a systemd unit, a container command, …) must be of that config's kind: a config hidden
in a `text` or `sh` block is found all the same.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Final

from tests.conftest import ROOT

# The docs an operator or member copies from: every tracked Markdown file outside tests/ (the
# inventory test fails when one is added and not listed here), every page under docs/ included.
DOCS: Final = (
    "README.md",
    *sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")),
    "BENCHMARKS.md",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
    "assistant_contract/README.md",
    "mcp_server/fairwins/guide.md",
)

_FENCE: Final = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_HEADING: Final = re.compile(r"^#{1,6} (.+)$", re.M)

# What a body looks like when it is a config some program reads, whatever its info string says.
LOOKS_LIKE: Final = {
    "nginx": re.compile(
        r"^\s*(proxy_pass\s|upstream\s+\S+\s*\{|location\s+[^\n]*\{|listen\s+[^\n;]+;|server\s*\{)", re.M
    ),
    "prometheus": re.compile(r"^\s*(scrape_configs|rule_files|remote_write)\s*:", re.M),
    "claude-desktop": re.compile(r'"mcpServers"\s*:'),
    "container": re.compile(
        r"(^|[\s;&|(])(docker|podman)(-compose)?\s+(run|build|create|compose|kube|container|pod|pull|push)\b", re.M
    ),
    "dockerfile": re.compile(r"^(FROM|RUN|COPY|ADD|ENTRYPOINT|HEALTHCHECK)\s", re.M),
    "systemd": re.compile(r"^\[(Unit|Service|Install|Socket|Timer)\]\s*$", re.M),
    "compose": re.compile(r"^services\s*:\s*$", re.M),
    "kubernetes": re.compile(r"^apiVersion\s*:", re.M),
}


@dataclass(frozen=True)
class Block:
    doc: str  # its file, relative to the repository
    line: int  # the line of its opening fence, from 1
    info: str
    body: str
    section: str  # the heading it sits under

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line} ({self.info or 'no info string'}, under “{self.section}”)"

    @property
    def kind(self) -> str:
        language, _, tag = self.info.partition(" ")
        tag = tag.strip()
        if language == "sh" and tag in ("", "runnable", "container", "deploy"):
            return {"": "commands", "runnable": "runnable", "container": "container", "deploy": "deploy"}[tag]
        if language == "nginx" and not tag:
            return "nginx"
        if language in ("yaml", "yml") and not tag and LOOKS_LIKE["prometheus"].search(self.body):
            return "prometheus"
        if language == "json" and not tag:
            return "claude-desktop" if LOOKS_LIKE["claude-desktop"].search(self.body) else "json"
        if language in ("text", "") and not tag:
            return "prose"
        if language == "python" and not tag:
            return "python"
        return f"{self.info} (no checker)"

    def looks_like(self) -> set[str]:
        """The config kinds this body looks like, by content alone."""
        return {kind for kind, pattern in LOOKS_LIKE.items() if pattern.search(self.body)}


def blocks_in(doc: str, text: str | None = None) -> list[Block]:
    """Every fenced block of `doc` (its text read from the checkout unless given), in order."""
    if text is None:
        text = (ROOT / doc).read_text(encoding="utf-8")
    headings = [(m.start(), m[1].strip()) for m in _HEADING.finditer(text)]
    found = []
    for match in _FENCE.finditer(text):
        section = next((title for at, title in reversed(headings) if at < match.start()), "(top)")
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(doc, line, match[1].strip(), match[2], section))
    return found


def unseen_fences(text: str) -> list[str]:
    """Fence lines the block reader would not see (indented, `~~~`, four backticks), or one left open."""
    problems = [
        f"line {n}: {line.strip()[:40]}"
        for n, line in enumerate(text.splitlines(), 1)
        if re.match(r"^(\s+```|\s*~~~|````)", line)
    ]
    fences = sum(1 for line in text.splitlines() if line.startswith("```"))
    if fences != 2 * len(_FENCE.findall(text)):
        problems.append(f"{fences} fence lines for {len(_FENCE.findall(text))} blocks: one is left open")
    return problems


def every_block() -> list[Block]:
    return [block for doc in DOCS for block in blocks_in(doc)]


def of_kind(kind: str) -> list[Block]:
    return [block for block in every_block() if block.kind == kind]


def tracked_docs() -> set[str]:
    """Every Markdown file git tracks outside tests/."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return {name for name in done.stdout.split("\0") if name and not name.startswith("tests/")}


def commands(body: str) -> list[list[str]]:
    """The command lines of a shell block, continuations joined and comments dropped, each split into words."""
    joined = re.sub(r"\\\n\s*", " ", body)
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def container_commands(block: Block) -> list[list[str]]:
    """The command lines of an `sh container` block, and after each the one its `# or:` comment offers instead."""
    found = []
    for line in re.sub(r"\\\n\s*", " ", block.body).splitlines():
        if words := shlex.split(line, comments=True):
            found.append(words)
        if "# or:" in line:
            found.append(shlex.split(line.split("# or:", 1)[1], comments=True))
    return found
