"""README.md and the pages under docs/, tried as a newcomer would: runnable blocks run, snippets fit the real CLIs.

Its tables are true, the README stays a front page, and every link between the pages lands. A
fenced block whose info string is `sh runnable`, on any page, is run here with bash (`-e -o
pipefail`) from the repository root, as if the virtual environment were active (this
interpreter's bin directory first on PATH), against a sandbox gateway started for it: the page's
`127.0.0.1:8787` (where `make demo` puts the sandbox) is pointed at that gateway's free port.
Every other block is checked by the program that reads it, or found to be prose:
tests/test_handed_out_configs.py. A fact is looked for on whichever page holds it now.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib
import unicodedata
import urllib.parse
from collections.abc import Iterator
from typing import Any, Final

import pytest

from demo.demo import connect_lines
from mcp_server import __version__
from mcp_server.setup.config import argument_parser
from scripts import readme as generator
from tests.conftest import ROOT
from tests.inspector import NPX as INSPECTOR_NPX
from tests.sandbox_gateway import SandboxGateway

README: Final = ROOT / "README.md"
README_TEXT: Final = README.read_text(encoding="utf-8")
# The README first, then every page under docs/; each page's text, by its path from the root.
PAGES: Final = {
    path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]
}
# Every page, one after another: where a fact is looked for, whichever page holds it.
TEXT: Final = "\n".join(PAGES.values())
# Pages whose links are checked: the README, docs/ and the benchmark report the pages link to.
LINKED_PAGES: Final = [*PAGES, "BENCHMARKS.md"]
README_MAX_LINES: Final = 300
SANDBOX_ADDRESS: Final = "127.0.0.1:8787"
BLOCK_TIMEOUT: Final = 120.0
_FENCE: Final = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
_HEADING: Final = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*$", re.M)
# A code span may run over a line break, never over a blank line.
_CODE_SPAN: Final = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")
_LINK: Final = re.compile(r"\[[^\]]*\]\(([^()\s]+)\)")
_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# `claude mcp add --help`, Claude Code 2.1.332 (npm @anthropic-ai/claude-code): option → (its name,
# what it takes: "1" one value, "*" several (commander's variadic options swallow every following
# word that does not start with "-"), "0" none).
CLAUDE_MCP_ADD: Final = {
    "-s": ("scope", "1"), "--scope": ("scope", "1"), "-t": ("transport", "1"), "--transport": ("transport", "1"),
    "-e": ("env", "*"), "--env": ("env", "*"), "-H": ("header", "*"), "--header": ("header", "*"),
    "--client-id": ("client-id", "1"), "--callback-port": ("callback-port", "1"),
    "--client-secret": ("client-secret", "0"), "-h": ("help", "0"), "--help": ("help", "0"),
}  # fmt: skip
CLAUDE_TRANSPORTS: Final = ("stdio", "sse", "http")
# `mcp-inspector --help`, `--cli --help` and `--web --help`, @modelcontextprotocol/inspector 2.12.0.
INSPECTOR: Final = {
    "--cli": ("cli", "0"), "--web": ("web", "0"), "--tui": ("tui", "0"), "-e": ("env", "1"),
    "--transport": ("transport", "1"), "--server-url": ("server-url", "1"), "--header": ("header", "*"),
    "--method": ("method", "1"), "--tool-name": ("tool-name", "1"), "--tool-arg": ("tool-arg", "*"),
    "--uri": ("uri", "1"), "--prompt-name": ("prompt-name", "1"), "--prompt-args": ("prompt-args", "*"),
    "--cwd": ("cwd", "1"), "--config": ("config", "1"), "--server": ("server", "1")
}  # fmt: skip


def page_blocks(info: str | None = None) -> list[tuple[str, str, str]]:
    """(page, info string, body) of every fenced block on every page, or only those whose info string is `info`."""
    found = [(page, m[1].strip(), m[2]) for page, text in PAGES.items() for m in _FENCE.finditer(text)]
    return [b for b in found if info is None or b[1] == info]


def blocks(info: str | None = None) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block on every page, or only those whose info string is `info`."""
    return [(found, body) for _, found, body in page_blocks(info)]


RUNNABLE_ON: Final = [(page, body) for page, _, body in page_blocks("sh runnable")]
RUNNABLE: Final = [body for _, body in RUNNABLE_ON]


def commands_starting(prefix: str, text: str) -> list[list[str]]:
    """Every command line in `text` (continuations joined, comments dropped) that starts with `prefix`."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for raw in joined.splitlines():
        if raw.strip().startswith(prefix + " "):
            found.append(shlex.split(raw.strip(), comments=True))
    return found


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match[0])


def prose(text: str) -> str:
    """`text` with its fenced blocks blanked out (line numbers kept): what Markdown reads as headings and links."""
    return _FENCE.sub(_blank, text)


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of every heading outside the fenced blocks, in order."""
    return [(len(m[1]), m[2]) for m in _HEADING.finditer(prose(text))]


def section_text(title: str) -> str:
    """The text under the one heading `title` on any page, up to the next heading of its level or above."""
    found = []
    for text in PAGES.values():
        body = prose(text)
        for m in _HEADING.finditer(body):
            if m[2] == title:
                level = len(m[1])
                after = text[m.end() :]
                end = next((n.start() for n in _HEADING.finditer(body[m.end() :]) if len(n[1]) <= level), len(after))
                found.append(after[:end])
    assert len(found) == 1, f"{len(found)} pages have a heading {title!r}"
    return found[0]


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, punctuation dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "").lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page's headings give, a repeated one numbered as GitHub numbers it (`-1`, `-2`)."""
    seen: dict[str, int] = {}
    found = set()
    for _, title in headings(text):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every inline Markdown link outside fenced blocks and code spans."""
    body = _CODE_SPAN.sub(_blank, prose(text))
    return [(body.count("\n", 0, m.start()) + 1, m[1]) for m in _LINK.finditer(body)]


def link_problems(page: str, text: str, root: pathlib.Path = ROOT) -> list[str]:
    """Each relative link on `page` (a path from `root`) whose file, or whose heading, does not exist."""
    problems = []
    for line, target in links(text):
        if _SCHEME.match(target):
            continue  # a web address: not a link between the pages
        path, _, anchor = (urllib.parse.unquote(part) for part in target.partition("#"))
        where = f"{page}:{line}: ({target})"
        file = (root / page).parent / path if path else root / page
        resolved = file.resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{where} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where} names a file that does not exist")
        elif anchor and resolved.suffix != ".md":
            problems.append(f"{where} names a heading in a file that is not Markdown")
        elif anchor and anchor not in anchors(text if not path else resolved.read_text(encoding="utf-8")):
            problems.append(f"{where} names a heading that {path or page} does not have")
    return problems


def env_names_the_server_reads() -> set[str]:
    return set(
        re.findall(
            r'"((?:FAIRWINS_|K_|GOOGLE_)[A-Z_]+)"',
            (ROOT / "mcp_server" / "setup" / "config.py").read_text(encoding="utf-8"),
        )
    )


def console_script() -> str:
    scripts: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    (name,) = (n for n, target in scripts.items() if target == "mcp_server.setup.cli:main")
    return name


# --- the runnable blocks ------------------------------------------------------------------------


def test_the_readme_marks_the_commands_a_newcomer_runs_first_as_runnable() -> None:
    joined = "\n".join(RUNNABLE)
    for command in (
        "python -m demo --once",
        "fairwins-mcp check",
        "| FAIRWINS_API_URL=",
        "python -m scripts.readme --check",
    ):
        assert command in joined


@pytest.fixture
def sandbox() -> Iterator[SandboxGateway]:
    with SandboxGateway() as gateway:
        yield gateway


@pytest.mark.posix("runs the README's sh blocks in bash, as a member on macOS or Linux pastes them")
@pytest.mark.parametrize("body", RUNNABLE, ids=[f"{page}:block{i}" for i, (page, _) in enumerate(RUNNABLE_ON)])
def test_every_runnable_block_runs(body: str, sandbox: SandboxGateway) -> None:
    bindir = pathlib.Path(sys.executable).parent
    assert (bindir / console_script()).exists(), f"{console_script()} is not installed beside {sys.executable}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHONPATH"))}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    script = body.replace(SANDBOX_ADDRESS, f"127.0.0.1:{sandbox.port}")
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    assert done.returncode == 0, f"this block failed ({done.returncode}):\n{body}\n{done.stdout}\n{done.stderr}"


# --- the first commands -------------------------------------------------------------------------


# How many lines a first screen shows: the ways in and the two commands must both be on it.
FIRST_SCREEN_LINES: Final = 45


def test_the_first_screen_gives_a_member_the_three_ways_in_each_with_who_it_suits_and_where_to_read_on() -> None:
    sections = re.findall(r"^## (.+)$", README_TEXT, re.M)
    assert sections[:2] == ["Three ways in", "First commands"]
    ways = section_text("Three ways in")
    bullets = re.findall(r"^- \*\*(.+?)\*\* (For .+?)(?=^- |^\n|\Z)", ways, re.M | re.S)
    assert [title for title, _ in bullets] == [
        "Claude Desktop: the bundle.",
        "Claude Code.",
        "claude.ai and the Claude mobile apps: the hosted connector.",
    ]
    for title, body in bullets:
        assert links(body), f"{title} links nowhere to read on"
    desktop, code, hosted = (body for _, body in bullets)
    assert "no Python needed" in desktop and "fairwins-mcp-0.1.0.mcpb" in desktop
    assert "fairwins-mcp install claude-code" in code
    assert "docs/authorization.md#adding-the-connector-members" in hosted
    first_commands = README_TEXT.splitlines().index("## First commands")
    assert first_commands < FIRST_SCREEN_LINES, f"the two commands start on line {first_commands + 1}"


def test_the_first_commands_are_the_two_that_do_all_the_set_up() -> None:
    first = README_TEXT.split("## First commands", 1)[1]
    info, body = next((m[1].strip(), m[2]) for m in _FENCE.finditer(first))
    commands = [shlex.split(line, comments=True) for line in body.splitlines() if line.strip()]
    assert info == "sh" and commands == [["make", "demo"], ["make", "test"]]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo: \$\(VPY\)", makefile, re.M), "make demo must set up .venv first"
    # make test sets up through test-setup, whose list (made four at a time) holds .venv first.
    assert re.search(r"^test: test-setup$", makefile, re.M), "make test must do its set-up first"
    assert re.search(r"^TEST_SETUP := \$\(VPY\) ", makefile, re.M), "make test must set up .venv"


# --- the client snippets fit the real command lines ---------------------------------------------


def desktop_configs() -> list[tuple[str, dict[str, Any]]]:
    found = [(page, json.loads(body)) for page, _, body in page_blocks("json") if "mcpServers" in body]
    printed = connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787")
    found.append(("make demo", json.loads(printed[printed.index("{") : printed.rindex("}") + 1])))
    return found


def test_the_claude_desktop_configs_launch_the_real_command_with_the_real_variables() -> None:
    configs = desktop_configs()
    assert [where for where, _ in configs] == ["README.md", "make demo"]
    for where, config in configs:
        for name, entry in config["mcpServers"].items():
            assert set(entry) <= {"command", "args", "env"}, (where, name)
            command, args = entry["command"], entry.get("args", [])
            if pathlib.Path(command).name == console_script():
                parsed = argument_parser().parse_args(args)
            else:  # the interpreter of a checkout that is not installed
                assert args[:2] == ["-m", "mcp_server"], (where, name)
                parsed = argument_parser().parse_args(args[2:])
            assert parsed.command == "serve" and parsed.http is None, "Desktop speaks stdio"
            assert pathlib.Path(command).is_absolute(), "Desktop does not read the shell's PATH"
            env = entry.get("env", {})
            assert "FAIRWINS_API_URL" in env
            assert set(env) - {"PYTHONPATH"} <= env_names_the_server_reads(), (where, set(env))


def _parse(words: list[str], options: dict[str, tuple[str, str]]) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """(options given, positionals, words after `--`) as commander reads them; unknown options fail the test."""
    given: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return given, positionals, words[i + 1 :]
        if word.startswith("-"):
            assert word in options, f"{word} is not an option of this command: {shlex.join(words)}"
            name, takes = options[word]
            values: list[str] = []
            if takes == "1":
                i += 1
                values.append(words[i])
            elif takes == "*":
                while i + 1 < len(words) and not words[i + 1].startswith("-"):
                    i += 1
                    values.append(words[i])
                assert values, f"{word} needs a value: {shlex.join(words)}"
            given.setdefault(name, []).extend(values)
        else:
            positionals.append(word)
        i += 1
    return given, positionals, []


def test_every_claude_mcp_add_line_uses_flags_that_exist_and_launches_the_real_server() -> None:
    lines = commands_starting("claude mcp add", TEXT) + commands_starting(
        "claude mcp add", connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787")
    )
    assert len(lines) >= 3
    kinds = set()
    for words in lines:
        given, positionals, command = _parse(words[3:], CLAUDE_MCP_ADD)
        transport = (given.get("transport") or ["stdio"])[-1]
        assert transport in CLAUDE_TRANSPORTS
        kinds.add(transport)
        if transport == "stdio":
            assert positionals == ["fairwins"] and command, shlex.join(words)
            assert pathlib.Path(command[0]).name == console_script()
            assert argument_parser().parse_args(command[1:]).http is None
            names = {pair.split("=", 1)[0] for pair in given.get("env", [])}
            assert "FAIRWINS_API_URL" in names and names <= env_names_the_server_reads()
        else:
            assert len(positionals) == 2 and positionals[0].startswith("fairwins"), shlex.join(words)
            url = positionals[1]
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url), url
            assert given["header"] and all(re.fullmatch(r"Authorization: Bearer fw1\.\S+", h) for h in given["header"])
    assert kinds == {"stdio", "http"}


def inspector_words(words: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(the Inspector's options, the server target) of one line, split the way Inspector 2.12 splits them.

    --cli: the target (a command and its own arguments, or a URL) comes first; the Inspector's options
    follow, after `--` when the target has arguments starting with "-". The browser form: the
    Inspector's options first; after `--`, the target.
    """
    rest = words[2:]
    if rest[:1] == ["--cli"]:
        rest = rest[1:]
        if "--" in rest:
            target, options = rest[: rest.index("--")], rest[rest.index("--") + 1 :]
        else:
            lead = next((i for i, w in enumerate(rest) if w.startswith("-")), len(rest))
            target, options = rest[:lead], rest[lead:]
        given, positionals, _ = _parse(options, INSPECTOR)
        return given, target + positionals
    given, positionals, after = _parse(rest, INSPECTOR)
    return given, positionals + after


def test_every_inspector_line_uses_flags_that_exist_and_starts_the_real_server() -> None:
    # tests/test_inspector.py runs each of these lines; this reads them as the Inspector's parser does.
    text = TEXT + connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787")
    lines = commands_starting(INSPECTOR_NPX, text)
    assert len(lines) >= 6
    for words in lines:
        given, target = inspector_words(words)
        assert given.get("transport", ["http"]) == ["http"]
        for url in given.get("server-url", []) + [p for p in target if p.startswith("http")]:
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url), url
        command = [p for p in target if not p.startswith("http")]
        if command:
            name = pathlib.Path(command[0]).name
            assert (name, command[1:]) in ((console_script(), []), ("python", ["-m", "mcp_server"])), command
        for pair in given.get("env", []):
            assert pair.split("=", 1)[0] in env_names_the_server_reads()
        assert all(re.fullmatch(r"Authorization: Bearer fw1\.\S+", h) for h in given.get("header", []))
        assert given.get("method", ["tools/list"])[0] in ("tools/list", "tools/call")


# --- the tables ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", generator.FILES)
def test_every_generated_list_is_what_the_server_serves(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert generator.render(text, path) == text, f"{path}'s generated lists are stale: run make readme"


def test_the_generator_check_fails_on_a_stale_table_and_names_the_fix(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "README.md"
    stale.write_text(README_TEXT.replace("| `get_fees` |", "| `get_fee` |"), encoding="utf-8")
    monkeypatch.setattr(generator, "README", stale)
    assert generator.main(["--check"]) == 1
    assert "make readme" in capsys.readouterr().err
    assert generator.main([]) == 0 and stale.read_text(encoding="utf-8") == README_TEXT
    assert generator.main(["--check"]) == 0


def test_the_bundle_sizes_are_those_of_the_bundles_make_mcpb_writes(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scripts import mcpb

    assert mcpb.main(["--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    built = {kind: (tmp_path / mcpb.bundle_name(kind)).stat().st_size for kind in ("uv", "python")}
    assert all(f"\t{size} bytes\t" in printed for size in built.values())
    step = generator.BUNDLE_STEP
    kb = {kind: round(size / 1024 / step) * step for kind, size in built.items()}
    assert generator.bundle_size("") == f"about {kb['uv']} KB"
    both = f"about {kb['uv']} KB each" if kb["uv"] == kb["python"] else f"about {kb['uv']} and {kb['python']} KB"
    assert generator.bundle_sizes("") == both


def test_figures_are_rounded_as_the_pages_state_them() -> None:
    assert generator._kb(309_180, 10) == "300" and generator._kb(316_000, 10) == "310"
    assert generator._kb(309_180, 50) == "300" and generator._kb(280_000, 50) == "250"
    assert generator._kb(28_147, 1) == "27" and generator._kb(1_129, 0.1) == "1.1"


def test_a_figure_stated_twice_is_rewritten_at_each_place_and_an_unclosed_region_refused() -> None:
    page = "docs/security.md"
    text = PAGES[page]
    region = "<!-- generated:health-reserve:start -->{}<!-- generated:health-reserve:end -->"
    assert text.count(region.format("8")) == 2
    stale = text.replace(region.format("8"), region.format("9"))
    assert generator.render(stale, page) == text
    unclosed = stale.replace("9<!-- generated:health-reserve:end -->", "9", 1)
    with pytest.raises(ValueError, match="health-reserve"):
        generator.render(unclosed, page)


# This project's version where the pages name it: in a file, image or tag name, or after the name.
_OUR_VERSION: Final = re.compile(
    r"(?:fairwins[-_]mcp[-_: ]|fairwins/fairwins-mcp/v|tag -a v|push origin v)(\d+\.\d+\.\d+)"
)


def test_every_version_of_this_project_the_pages_name_is_the_servers() -> None:
    # Inside code spans, where no generated region can go: checked here instead.
    named = [(page, m[0]) for page, text in PAGES.items() for m in _OUR_VERSION.finditer(text)]
    assert len(named) >= 10 and {page for page, _ in named} >= {"README.md", "docs/install.md"}
    assert [(page, found) for page, found in named if not found.endswith(__version__)] == []


def test_the_generator_refuses_a_readme_without_its_markers() -> None:
    with pytest.raises(ValueError, match=r"generated:[a-z-]+:start"):
        generator.render("# no markers here\n")


def configuration_rows() -> set[str]:
    section = section_text("Configuration")
    return {m[1] for m in re.finditer(r"^\| `([^`]+)`", section, re.M)}


def test_the_configuration_table_lists_every_variable_and_flag_and_nothing_else() -> None:
    rows = configuration_rows()
    flags = set()
    for action in argument_parser()._actions:
        if action.option_strings and "--help" not in action.option_strings:
            flags.add(action.option_strings[0])
        elif not action.option_strings:
            flags.update(c for c in (action.choices or []) if c != action.default)
    variables = ("FAIRWINS_", "K_", "GOOGLE_")
    listed_flags = {row.split()[0] for row in rows if not row.startswith(variables)}
    assert listed_flags == flags
    assert {row for row in rows if row.startswith(variables)} == env_names_the_server_reads()


# --- the pages and the links between them ------------------------------------------------------


def test_the_readme_is_a_front_page_of_at_most_300_lines_its_generated_catalog_left_out() -> None:
    # The catalog grows by a row with each tool; the prose around it is what must stay short.
    lines = generator.lines_outside(README_TEXT, "catalog")
    assert lines < len(README_TEXT.splitlines()), "README.md has no generated catalog"
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move a section to a page under docs/"


def test_every_link_between_the_pages_lands_on_a_file_and_a_heading_that_exist() -> None:
    problems = []
    for page in LINKED_PAGES:
        problems += link_problems(page, (ROOT / page).read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_readme_links_every_page_under_docs() -> None:
    linked = {(pathlib.PurePosixPath(target.partition("#")[0])).as_posix() for _, target in links(README_TEXT)}
    pages = {page for page in PAGES if page != "README.md"}
    assert pages <= linked, f"README.md's Read on does not link {sorted(pages - linked)}"
    assert "BENCHMARKS.md" in linked


def test_the_link_check_finds_a_missing_page_a_missing_heading_and_a_link_out_of_the_repository(
    tmp_path: pathlib.Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Project\n\n## First commands\n\n## Install\n", encoding="utf-8")
    page = """# A page

## Stopping: a drain a load balancer survives

[fine](../README.md#first-commands) and [fine too](#stopping-a-drain-a-load-balancer-survives),
[the page itself](other.md) and [a web page](https://example.com/nowhere.md#nothing).

[no such page](gone.md) and [no such heading](../README.md#first-command), [none
here](#stopping) and [out](../../etc/passwd) and [not Markdown](../Makefile#demo).

```sh
echo "[inside a fence](gone-too.md)"
```
and `[inside a code span](gone-as-well.md)`.
"""
    (tmp_path / "docs" / "other.md").write_text(page, encoding="utf-8")
    (tmp_path / "Makefile").write_text("demo:\n", encoding="utf-8")
    problems = link_problems("docs/other.md", page, tmp_path)
    assert problems == [
        "docs/other.md:8: (gone.md) names a file that does not exist",
        "docs/other.md:8: (../README.md#first-command) names a heading that ../README.md does not have",
        "docs/other.md:8: (#stopping) names a heading that docs/other.md does not have",
        "docs/other.md:9: (../../etc/passwd) leaves the repository",
        "docs/other.md:9: (../Makefile#demo) names a heading in a file that is not Markdown",
    ]


def test_headings_get_the_anchors_github_gives_them() -> None:
    text = "# fairwins-mcp\n## Check a set-up: `fairwins-mcp check`\n### Workers: every vCPU\n## Install\n## Install\n"
    text += "```sh\n# a comment in a block, not a heading\n```\n"
    assert anchors(text) == {
        "fairwins-mcp", "check-a-set-up-fairwins-mcp-check", "workers-every-vcpu", "install", "install-1"
    }  # fmt: skip
