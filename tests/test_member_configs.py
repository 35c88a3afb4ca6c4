"""Every Claude Desktop and Claude Code configuration a member is handed, read by the programs that read it.

The claude_desktop_config.json snippets (README's or docs/'s, `fairwins-mcp install claude-desktop --print`'s,
`make demo`'s) are parsed by JSON.parse in Node, as Claude Desktop reads its file, and must have the
shape Desktop reads (mcpServers → name → command, args, env). Each entry then goes to the real
Claude Code CLI (npm @anthropic-ai/claude-code, pinned) with `claude mcp add-json`, which checks it
against Claude Code's own schema, and `claude mcp get` must show it back. Every `claude mcp add`
line (README's or docs/'s, `install claude-code --print`'s for each scope, `make demo`'s) is run by bash with
that CLI; what Claude Code then stored (~/.claude.json, or .mcp.json for the project scope) is
parsed and checked the same way, and goes through `claude mcp add-json` unchanged. All of it in a
scratch HOME: this machine's own Claude configuration is never read or touched.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Final

import pytest

from demo.demo import connect_lines
from tests.conftest import NODE_TOOLS
from tests.hosts import tool
from tests.test_install import QUIET_CLAUDE, RUN_TIMEOUT, install, json_parse, scratch_env
from tests.test_readme import TEXT

pytestmark = NODE_TOOLS

# README.md and every page under docs/, one after another: wherever a member copies a config from.
PAGES_TEXT: Final = TEXT
_FENCE: Final = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
# The README's placeholder token, which the member replaces with their own; no secret of the test run.
MEMBER_TOKEN: Final = "fw1.your-own-token"
DEMO_LINES: Final = connect_lines("http://127.0.0.1:8790/mcp", "http://127.0.0.1:8787")


def readme_blocks(info: str) -> list[str]:
    return [m[2] for m in _FENCE.finditer(PAGES_TEXT) if m[1].strip() == info]


# --- the shapes the clients read ------------------------------------------------------------------


def is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def is_string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def check_desktop_config(config: Any) -> dict[str, dict[str, Any]]:
    """claude_desktop_config.json as Claude Desktop reads it: its servers, each a command it starts over stdio."""
    assert isinstance(config, dict) and list(config) == ["mcpServers"], config
    servers = config["mcpServers"]
    assert isinstance(servers, dict) and servers
    for name, entry in servers.items():
        assert isinstance(entry, dict) and set(entry) <= {"command", "args", "env"}, (name, entry)
        assert isinstance(entry.get("command"), str) and entry["command"], (name, entry)
        assert is_strings(entry.get("args", [])) and is_string_map(entry.get("env", {})), (name, entry)
    return servers


def check_code_entry(entry: Any) -> None:
    """One Claude Code `mcpServers` entry: stdio (command, args, env) or remote (http or sse: url, headers)."""
    assert isinstance(entry, dict), entry
    kind = entry.get("type", "stdio")
    if kind == "stdio":
        assert set(entry) <= {"type", "command", "args", "env"}, entry
        assert isinstance(entry.get("command"), str) and entry["command"]
        assert is_strings(entry.get("args", [])) and is_string_map(entry.get("env", {})), entry
    else:
        assert kind in ("http", "sse") and set(entry) <= {"type", "url", "headers"}, entry
        assert isinstance(entry.get("url"), str) and re.match(r"https?://", entry["url"]), entry
        assert is_string_map(entry.get("headers", {})), entry


def parsed(text: str) -> Any:
    """`text` as JSON.parse reads it; the test fails where it throws."""
    (value,) = json_parse([text])
    assert value is not None, f"JSON.parse refuses this:\n{text}"
    return json.loads(value)


# --- the real Claude Code, in a scratch HOME ------------------------------------------------------


@dataclass(frozen=True)
class Claude:
    home: pathlib.Path
    project: pathlib.Path  # the directory Claude Code runs in: local and project scopes belong to it
    path: str  # a PATH on which `claude` is the pinned Claude Code

    def env(self, **extra: str) -> dict[str, str]:
        env = scratch_env(self.home, PATH=self.path, **QUIET_CLAUDE, **extra)
        env.pop("CLAUDE_CONFIG_DIR", None)
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.bash(shlex.join(["claude", *args]))

    def bash(self, line: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`line` as a member pastes it into a shell, in the project directory."""
        return subprocess.run(
            ["bash", "-c", line],
            cwd=self.project,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )

    def stored(self, name: str, scope: str) -> Any:
        """The entry Claude Code keeps for `name`, read from its file by JSON.parse."""
        if scope == "project":
            return parsed((self.project / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"][name]
        state = parsed((self.home / ".claude.json").read_text(encoding="utf-8"))
        servers = state["mcpServers"] if scope == "user" else state["projects"][str(self.project)]["mcpServers"]
        return servers[name]

    def shows(self, name: str, entry: dict[str, Any]) -> None:
        """`claude mcp get` finds `name` and shows `entry`'s command, arguments and environment (or URL, headers)."""
        got = self.run("mcp", "get", name)
        assert got.returncode == 0, got.stdout + got.stderr
        shown = got.stdout
        assert shown.startswith(f"{name}:\n"), shown
        if entry.get("type", "stdio") == "stdio":
            assert f"  Command: {entry['command']}\n" in shown, shown
            assert f"  Args: {' '.join(entry.get('args', []))}".rstrip() + "\n" in shown, shown
            for key, value in entry.get("env", {}).items():
                assert f"    {key}={value}\n" in shown, shown
        else:
            assert f"  Type: {entry['type']}\n" in shown and f"  URL: {entry['url']}\n" in shown, shown
            for key, value in entry.get("headers", {}).items():
                assert f"    {key}: {value}\n" in shown, shown

    def add_json(self, name: str, entry: dict[str, Any]) -> None:
        """`claude mcp add-json <name> '<json>'` as pasted; Claude Code must take it and keep it as given."""
        done = self.bash(shlex.join(["claude", "mcp", "add-json", name, json.dumps(entry)]))
        assert done.returncode == 0, f"claude mcp add-json refused {entry}: {done.stdout}{done.stderr}"
        assert self.stored(name, "local") == entry
        self.shows(name, entry)


@pytest.fixture
def claude(tmp_path: pathlib.Path) -> Claude:
    home, project, bindir = tmp_path / "home", tmp_path / "home" / "project", tmp_path / "bin"
    project.mkdir(parents=True)
    bindir.mkdir()
    (bindir / "claude").symlink_to(tool("claude-code")[0])
    return Claude(home, project, f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")


# --- Claude Desktop's JSON ----------------------------------------------------------------------


README_DESKTOP: Final = [body for body in readme_blocks("json") if "mcpServers" in body]
# `fairwins-mcp install claude-desktop --print` as a member runs it: the README's runnable line, and with a token.
PRINTED_DESKTOP: Final = {
    "install --print": (["--no-token"], ""),
    "install --print, with a token": (["--token-stdin"], MEMBER_TOKEN + "\n"),
}
DESKTOP_SNIPPETS: Final = [*(f"README block {i}" for i in range(len(README_DESKTOP))), *PRINTED_DESKTOP, "make demo"]


def desktop_snippet(label: str, home: pathlib.Path) -> str:
    """The claude_desktop_config.json text a member copies from `label`."""
    if label.startswith("README block "):
        return README_DESKTOP[int(label.rsplit(" ", 1)[1])]
    if label in PRINTED_DESKTOP:
        args, stdin = PRINTED_DESKTOP[label]
        done = install(home, "claude-desktop", "--print", *args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout
    return DEMO_LINES[DEMO_LINES.index("{") : DEMO_LINES.rindex("}") + 1]


def test_the_readme_shows_the_desktop_config_written_by_hand() -> None:
    assert len(README_DESKTOP) >= 1


@pytest.mark.parametrize("label", DESKTOP_SNIPPETS)
def test_every_claude_desktop_snippet_is_json_desktop_reads_and_claude_code_takes_each_entry(
    label: str, claude: Claude
) -> None:
    text = desktop_snippet(label, claude.home)
    config = parsed(text)
    assert config == json.loads(text)
    for name, entry in check_desktop_config(config).items():
        claude.add_json(name, entry)
        claude.add_json(f"{name}-typed", {"type": "stdio", **entry})  # as Claude Code writes .mcp.json
        if label == "install --print, with a token":
            assert entry["env"]["FAIRWINS_API_TOKEN"] == "fw1.…oken", "the printed entry shows the token redacted"


def test_claude_code_add_json_refuses_an_entry_no_client_could_start(claude: Claude) -> None:
    # The judge of the test above has teeth: what add-json takes, it takes because it is right.
    for broken in ({"command": 1}, {"args": ["-m", "mcp_server"]}, {"command": "x", "env": {"A": 1}}, {"type": "http"}):
        done = claude.bash(shlex.join(["claude", "mcp", "add-json", "broken", json.dumps(broken)]))
        assert done.returncode != 0, broken
    assert "broken" not in claude.run("mcp", "list").stdout


# --- Claude Code's command lines and the JSON they leave ------------------------------------------


README_CLAUDE: Final = [
    line for body in readme_blocks("sh") for line in body.splitlines() if line.startswith("claude mcp add ")
]
CLAUDE_LINES: Final = [
    *(f"README line {i}" for i in range(len(README_CLAUDE))),
    *(f"install claude-code --print --scope {scope}" for scope in ("local", "user", "project")),
    "make demo",
]


def claude_line(label: str, home: pathlib.Path) -> str:
    """The `claude mcp add` line a member pastes from `label`."""
    if label.startswith("README line "):
        return README_CLAUDE[int(label.rsplit(" ", 1)[1])]
    if label.startswith("install "):
        scope = label.rsplit(" ", 1)[1]
        done = install(home, "claude-code", "--print", "--scope", scope, FAIRWINS_API_TOKEN=MEMBER_TOKEN)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[0]
    (line,) = [line.strip() for line in DEMO_LINES.splitlines() if line.strip().startswith("claude mcp add ")]
    return line


def test_the_readme_shows_a_stdio_and_an_http_claude_mcp_add_line() -> None:
    assert len(README_CLAUDE) >= 2 and any("--transport http" in line for line in README_CLAUDE)


@pytest.mark.parametrize("label", CLAUDE_LINES)
def test_every_claude_mcp_add_line_is_taken_by_claude_code_and_leaves_json_it_reads_back(
    label: str, claude: Claude
) -> None:
    line = claude_line(label, claude.home)
    words = shlex.split(line)
    scope = words[words.index("--scope") + 1] if "--scope" in words else "local"
    done = claude.bash(line, FAIRWINS_API_TOKEN=MEMBER_TOKEN)  # the member's own token, in their own shell
    assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    name = next(w for w in words[3:] if w.startswith("fairwins"))
    entry = claude.stored(name, scope)
    check_code_entry(entry)
    if entry.get("type", "stdio") == "stdio":
        assert [entry["command"], *entry.get("args", [])] == words[words.index("--") + 1 :]
        token = entry["env"].get("FAIRWINS_API_TOKEN")
        # Project scope: .mcp.json is shared, so it holds the reference Claude Code expands, never a token.
        assert token == ("${FAIRWINS_API_TOKEN}" if scope == "project" else MEMBER_TOKEN), token
    else:
        assert entry["url"] in words and all(f"{k}: {v}" in words for k, v in entry.get("headers", {}).items())
        assert entry.get("headers"), "the token travels in the Authorization header"
    claude.shows(name, entry)
    claude.add_json("copy", entry)
