"""`fairwins-mcp install`: Claude Desktop's config written where each OS keeps it; Claude Code via the real `claude`.

Each end-to-end test runs the command as a member would, in a scratch HOME, and then starts what
it wrote exactly as the client would (the entry's command, args and env, from another directory)
and holds a session against the sandbox gateway. Claude Code is the real CLI (npm
@anthropic-ai/claude-code, pinned; tests/tools/npm_tool.sh): after the install, `claude mcp list`
must report the server connected. No token ever appears in what the command prints.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import select
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

if sys.platform != "win32":
    import pty  # the terminal prompt test (posix-marked): Windows has no pty

from mcp_server import __version__
from mcp_server.setup import install as install_module
from mcp_server.setup.client_configs import (
    InstallError,
    JsonSyntaxError,
    desktop_config_path,
    merge,
    scan,
    server_entry,
)
from tests.conftest import NODE_TOOLS, ROOT, StdioProcess, console_script
from tests.hosts import hold_session, node, tool
from tests.sandbox_gateway import TOKEN_MEMBER_A, TOKEN_MEMBER_B, SandboxGateway
from tests.secret_canaries import record_output

RUN_TIMEOUT: Final = 120.0
REDACTED_A: Final = "fw1.…7f3k"
ENTRY: Final = server_entry("/usr/bin/python3", ["-m", "mcp_server"], "https://relay.fairwins.app", TOKEN_MEMBER_A)
# Claude Code never phones home from these tests: no updater, telemetry or error reports.
# Windows has no FIFO, lets only an administrator make a symlink, and keeps no POSIX file modes.
POSIX_FILES: Final = pytest.mark.posix("a FIFO, a hard link, a symlink or a POSIX file mode")
QUIET_CLAUDE: Final = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


# --- where Claude Desktop keeps its configuration (pure) ------------------------------------------


def test_macos_keeps_it_in_application_support() -> None:
    home = pathlib.PurePosixPath("/Users/ann")
    assert desktop_config_path("darwin", {}, home) == pathlib.PurePosixPath(
        "/Users/ann/Library/Application Support/Claude/claude_desktop_config.json"
    )


def test_windows_keeps_it_in_appdata_roaming(tmp_path: pathlib.Path) -> None:
    env = {"APPDATA": r"C:\Users\ann\AppData\Roaming", "LOCALAPPDATA": str(tmp_path / "no-packages")}
    path = desktop_config_path("win32", env, pathlib.PureWindowsPath(r"C:\Users\ann"))
    assert str(path) == r"C:\Users\ann\AppData\Roaming\Claude\claude_desktop_config.json"
    # Without %APPDATA%: the profile's own AppData\Roaming.
    path = desktop_config_path("win32", {"LOCALAPPDATA": env["LOCALAPPDATA"]}, pathlib.PureWindowsPath(r"C:\Users\ann"))
    assert str(path) == r"C:\Users\ann\AppData\Roaming\Claude\claude_desktop_config.json"


def test_windows_msix_claude_reads_it_inside_its_package(tmp_path: pathlib.Path) -> None:
    package = tmp_path / "Packages" / "Claude_pzs8sxrjxfjjc"
    package.mkdir(parents=True)
    (tmp_path / "Packages" / "Microsoft.WindowsTerminal_8wekyb3d8bbwe").mkdir()
    env = {"APPDATA": r"C:\Users\ann\AppData\Roaming", "LOCALAPPDATA": str(tmp_path)}
    path = desktop_config_path("win32", env, pathlib.PureWindowsPath(r"C:\Users\ann"))
    assert path == package / "LocalCache" / "Roaming" / "Claude" / "claude_desktop_config.json"


def test_two_msix_claude_packages_are_refused_rather_than_guessed(tmp_path: pathlib.Path) -> None:
    for name in ("Claude_pzs8sxrjxfjjc", "Claude_0123456789abc"):
        (tmp_path / "Packages" / name).mkdir(parents=True)
    with pytest.raises(InstallError, match="--config PATH"):
        desktop_config_path("win32", {"LOCALAPPDATA": str(tmp_path)}, pathlib.PureWindowsPath(r"C:\Users\ann"))


def test_linux_keeps_it_under_xdg_config_home() -> None:
    home = pathlib.PurePosixPath("/home/ann")
    assert str(desktop_config_path("linux", {}, home)) == "/home/ann/.config/Claude/claude_desktop_config.json"
    xdg = {"XDG_CONFIG_HOME": "/srv/conf"}
    assert str(desktop_config_path("linux", xdg, home)) == "/srv/conf/Claude/claude_desktop_config.json"
    relative = {"XDG_CONFIG_HOME": "conf"}  # invalid per the XDG spec: ignored
    assert str(desktop_config_path("linux", relative, home)) == "/home/ann/.config/Claude/claude_desktop_config.json"


# --- the merge (pure) -----------------------------------------------------------------------------

EXISTING: Final = json.dumps(
    {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"github": {"command": "/opt/gh-mcp", "args": [], "env": {"GITHUB_TOKEN": "ghp_secret"}}},
        "preferences": {"menuBarEnabled": False},
    },
    indent=2,
)


def test_the_merge_adds_the_entry_and_keeps_every_other_server_and_key() -> None:
    result = merge(EXISTING, "fairwins", ENTRY, force=False, where="config")
    merged = json.loads(result.text)
    assert result.outcome == "added" and result.others == ("github",)
    assert merged == {**json.loads(EXISTING), "mcpServers": {**json.loads(EXISTING)["mcpServers"], "fairwins": ENTRY}}
    assert list(merged) == ["globalShortcut", "mcpServers", "preferences"]  # order kept too


def test_a_missing_or_empty_file_becomes_a_config_with_just_this_server() -> None:
    for existing in (None, "", "  \n"):
        assert json.loads(merge(existing, "fairwins", ENTRY, force=False, where="c").text) == {
            "mcpServers": {"fairwins": ENTRY}
        }


def test_the_same_entry_again_changes_nothing() -> None:
    once = merge(EXISTING, "fairwins", ENTRY, force=False, where="c").text
    again = merge(once, "fairwins", ENTRY, force=False, where="c")
    assert again.outcome == "unchanged" and again.text == once


def test_a_different_entry_of_the_same_name_is_refused_without_force_and_named_without_its_values() -> None:
    mine = merge(EXISTING, "fairwins", ENTRY, force=False, where="c").text
    other = server_entry("/usr/bin/python3", ["-m", "mcp_server"], "https://relay.fairwins.app", TOKEN_MEMBER_B)
    with pytest.raises(InstallError) as refused:
        merge(mine, "fairwins", other, force=False, where="c")
    message = str(refused.value)
    assert "--force" in message and "env FAIRWINS_API_TOKEN" in message
    assert TOKEN_MEMBER_A not in message and TOKEN_MEMBER_B not in message
    forced = merge(mine, "fairwins", other, force=True, where="c")
    assert forced.outcome == "replaced" and forced.differences == ("env FAIRWINS_API_TOKEN",)
    assert json.loads(forced.text)["mcpServers"]["fairwins"] == other


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            '{"mcpServers": {"github": {"env": {"GITHUB_TOKEN": "ghp_secret"}}',
            "a comma or '}' was expected at line 1, col",
        ),
        ('{"github": "ghp_secret",\n  "windowZoom": NaN}', "JSON has no NaN, Infinity, comments"),
        (
            '{"github": "ghp_secret", "windowZoom": Infinity}',
            "not valid JSON: a value was expected (JSON has no NaN, Infinity, comments, single quotes or trailing "
            "commas) at line 1, column 40",
        ),
        (
            '{"github": "ghp_secret", "windowZoom": -Infinity}',
            "a number is malformed (JSON has no NaN or Infinity) at line 1, column 40",
        ),
        ('// ghp_secret\n{"mcpServers": {}}', "at line 1, column 1"),
        ('{"mcpServers": {"github": "ghp_secret",}}', "a member's name in double quotes was expected at line 1"),
        ("{'github': 'ghp_secret'}", "a member's name in double quotes"),
        ('{"github": "ghp_secret\x01"}', "a string is not closed, or holds a control character"),
        ('{"github": "ghp_secret"} {}', "something follows the end of the JSON value"),
        ("[1, 2]", "does not hold a JSON object"),
        ('{"mcpServers": []}', 'c holds an "mcpServers" that is not an object'),
        (
            '{"mcpServers": {},\n "mcpServers": null}',
            'c has "mcpServers" 2 times (at line 1 and line 2); Claude Desktop reads only the last',
        ),  # never merged into one copy (issue 34): the member decides which
    ],
)
def test_a_config_that_cannot_be_merged_is_refused_without_quoting_it(text: str, why: str) -> None:
    with pytest.raises(InstallError) as refused:
        merge(text, "fairwins", ENTRY, force=True, where="c")
    assert why in str(refused.value) and "ghp_secret" not in str(refused.value)


# --- what Claude Desktop's parser reads: JSON.parse, in Node --------------------------------------

_JSON_PARSE: Final = """
let input = '';
process.stdin.setEncoding('utf8').on('data', (c) => (input += c)).on('end', () => {
  const answers = JSON.parse(input).map((text) => {
    let value;
    try { value = JSON.parse(text); } catch (e) { return { ok: false }; }
    try { return { ok: true, value: JSON.stringify(value) }; } catch (e) { return { ok: true }; }  // too deep to write
  });
  process.stdout.write(JSON.stringify(answers));
});
"""


def _json_parse(texts: list[str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [node(), "-e", _JSON_PARSE], input=json.dumps(texts), capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def json_parse(texts: list[str]) -> list[str | None]:
    """Each text as JSON.parse reads it (what Claude Desktop and Claude Code read their configs with), written
    back by JSON.stringify; None where it throws. One Node process for the lot."""
    return [a.get("value") if a["ok"] else None for a in _json_parse(texts)]


def json_parse_accepts(texts: list[str]) -> list[bool]:
    return [bool(a["ok"]) for a in _json_parse(texts)]


def accepted(text: str) -> bool:
    try:
        scan(text)
    except JsonSyntaxError:
        return False
    return True


def mutations(seed: str, count: int) -> list[str]:
    """`count` near-misses of `seed`: one to three characters inserted, deleted or replaced (seeded)."""
    alphabet = [*'{}[]",:0123456789eE.+- \n\t\r\\u/abtnrflNI', "\u00a0", "\ufeff", "é", "\x00", "\x1f", "\u2028"]
    rng = random.Random(23)
    found = []
    for _ in range(count):
        chars = list(seed)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(chars))
            match rng.randrange(3):
                case 0:
                    chars.insert(at, rng.choice(alphabet))
                case 1:
                    del chars[at]
                case _:
                    chars[at] = rng.choice(alphabet)
        found.append("".join(chars))
    return found


SEED: Final = (
    '{\n  "mcpServers": {"gh": {"command": "/x", "args": ["-y", 1.5e3, -0, true, null],'
    ' "env": {"K": "v\\u00e9\\n"}}},\n  "z": [[], {}, 12345678901234567890]\n}\n'
)
EDGES: Final = [
    "{}", "[]", " {} ", "\ufeff{}", "\u00a0{}", '{"a": 1e999}', '{"a": -1E+999}', '{"a": NaN}', '{"a": Infinity}',
    '{"a": -Infinity}', '{"a": 01}', '{"a": 1.}', '{"a": .5}', '{"a": -}', '{"a": +1}', '{"a": 0x10}',
    '{"a": 1,}', "[1,]", '{"a" 1}', '{a: 1}', "{'a': 1}", '{"a": "\\x41"}', '{"a": "\\u00e"}', '{"a": "\t"}',
    '{"a": "\\ud800"}', '{"a": "\u2028"}', '{"a": 1} // c', "/* c */ {}", '{"a": tru}', '{"a": True}', '{"a": nul}',
    '{"a": 1, "a": 2}', '{"mcp\\u0053ervers": {}}', "", " ", "{", "}", '"\\"', '{"a": [1 2]}', '{"a": [,1]}',
    "[" * 20000 + "]" * 20000, '{"a":' * 20000 + "1" + "}" * 20000,
]  # fmt: skip


@NODE_TOOLS
def test_the_scanner_accepts_exactly_what_json_parse_accepts() -> None:
    # Python's json.loads is not the judge: it takes NaN and Infinity, which JSON.parse refuses.
    texts = [SEED, *EDGES, *mutations(SEED, 3000)]
    verdicts = json_parse_accepts(texts)
    assert verdicts[0] and 300 < sum(verdicts) < len(texts) - 300, "the corpus must hold both kinds"
    disagree = [text[:200] for text, verdict in zip(texts, verdicts, strict=True) if accepted(text) != verdict]
    assert not disagree, disagree[:3]


def kept_outside(old: str, new: str) -> tuple[str, str]:
    """(what was taken out of `old`, what was put into `new`) at the one place they differ."""
    head = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    rest = zip(reversed(old[head:]), reversed(new[head:]), strict=False)
    tail = next((i for i, (a, b) in enumerate(rest) if a != b), min(len(old), len(new)) - head)
    return old[head : len(old) - tail], new[head : len(new) - tail]


def with_entry(parsed: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(parsed)
    config.setdefault("mcpServers", {})[name] = entry
    return config


STYLES: Final = {
    "two spaces": EXISTING + "\n",
    "tabs": '{\n\t"mcpServers": {\n\t\t"github": {"command": "/opt/gh-mcp"}\n\t},\n\t"a": 1\n}\n',
    "crlf": '{\r\n    "windowZoom": 1.2,\r\n    "mcpServers": {\r\n        "github": {}\r\n    }\r\n}\r\n',
    "one line": '{"mcpServers":{"github":{"command":"/opt/gh-mcp"}},"a":[1,2]}',
    "one line, no servers": '{"windowZoom":1.2}',
    "overflowing, huge": '{\n  "windowZoom": 1e999,\n  "id": 123456789012345678901234567890,\n  "f": 1.10\n}',
    # Repeated names off the path written are the member's, kept as they are (JSON.parse reads the last).
    "duplicate keys": '{"x": 1, "mcpServers": {"github": {}, "github": {"args": []}}, "x": 2}',
    "escaped key": '{\n  "mcp\\u0053ervers": {\n    "git\\u0068ub": {"env": {"T": "\\u00e9\\ud83d\\ude00"}}\n  }\n}',
    "empty object": "{}",
    "empty servers": '{\n  "mcpServers": {}\n}\n',
    "empty servers, one line": '{"mcpServers":{},"a":1}',
    "no trailing newline, trailing spaces": '{"a": {"b": [{}]}}   ',
}


@NODE_TOOLS
@pytest.mark.parametrize("old", STYLES.values(), ids=STYLES.keys())
def test_the_entry_is_added_with_every_other_byte_kept_and_json_parse_reads_the_result(old: str) -> None:
    result = merge(old, "fairwins", ENTRY, force=False, where="c")
    assert result.outcome == "added"
    removed, inserted = kept_outside(old, result.text)
    assert removed == "", "only an insertion"
    assert json.dumps(ENTRY["env"]["FAIRWINS_API_TOKEN"]) in inserted
    before, after = json_parse([old, result.text])
    assert before is not None and after is not None
    # As Claude Desktop reads it: what it read before, and the entry.
    assert after == json.dumps(with_entry(before, "fairwins", ENTRY), separators=(",", ":"), ensure_ascii=False)
    assert merge(result.text, "fairwins", ENTRY, force=False, where="c").outcome == "unchanged"


@NODE_TOOLS
@pytest.mark.parametrize("old", STYLES.values(), ids=STYLES.keys())
def test_force_replaces_the_entry_json_parse_reads_and_nothing_else(old: str) -> None:
    stale = server_entry("/old/python", ["-m", "mcp_server"], "https://relay.fairwins.app", None)
    first = merge(old, "fairwins", stale, force=False, where="c").text
    result = merge(first, "fairwins", ENTRY, force=True, where="c")
    assert result.outcome == "replaced" and result.differences == ("command", "env FAIRWINS_API_TOKEN")
    servers = next(m for m in reversed(scan(first).members) if m.key == "mcpServers")
    old_value = next(m for m in reversed(servers.value.members) if m.key == "fairwins").value
    head, tail = first[: old_value.start], first[old_value.end :]
    assert result.text.startswith(head) and result.text.endswith(tail), "only the old entry's value is replaced"
    assert json.loads(result.text[len(head) : len(result.text) - len(tail)]) == ENTRY
    before, after = json_parse([first, result.text])
    assert before is not None and after is not None
    assert after == json.dumps(with_entry(before, "fairwins", ENTRY), separators=(",", ":"), ensure_ascii=False)


def test_our_name_repeated_in_mcp_servers_is_refused_naming_the_lines_even_with_force() -> None:
    # Until issue 34 the last copy (the one JSON.parse reads) was replaced and the first left
    # behind; either copy may be the one the member meant, so neither is chosen for them.
    old = '{"mcpServers": {\n  "fairwins": {"command": "/first"},\n  "github": {},\n  "fair\\u0077ins": {}\n}}'
    for force in (False, True):
        with pytest.raises(InstallError) as refused:
            merge(old, "fairwins", ENTRY, force=force, where="c")
        assert str(refused.value).startswith(
            'c has the server "fairwins" in "mcpServers" 2 times (at line 2 and line 4)'
        )
    assert merge(old, "other", ENTRY, force=False, where="c").outcome == "added"  # another name: not on the path


@NODE_TOOLS
def test_a_leading_byte_order_mark_json_parse_refuses_is_dropped_and_nothing_else_changes() -> None:
    old = "\ufeff" + EXISTING
    result = merge(old, "fairwins", ENTRY, force=False, where="c")
    assert result.bom_dropped and kept_outside(EXISTING, result.text)[0] == ""
    before, after = json_parse([old, result.text])
    assert before is None and after is not None, "JSON.parse refuses the mark and reads the file without it"
    again = merge("\ufeff" + result.text, "fairwins", ENTRY, force=False, where="c")
    assert again.outcome == "unchanged" and again.text == "\ufeff" + result.text, "a file left alone keeps it"


@NODE_TOOLS
def test_an_entry_nested_deeper_than_python_reads_is_a_different_entry_not_a_crash() -> None:
    deep = '{"mcpServers": {"fairwins": {"args": ' + "[" * 100_000 + "]" * 100_000 + "}}}"
    with pytest.raises(InstallError, match="differs in the whole entry"):
        merge(deep, "fairwins", ENTRY, force=False, where="c")
    assert json.loads(merge(deep, "fairwins", ENTRY, force=True, where="c").text)["mcpServers"]["fairwins"] == ENTRY


# --- claude-desktop, end to end in a scratch HOME ---------------------------------------------------


def scratch_env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    """A member's environment with HOME moved to `home`, and nothing of ours that the command reads."""
    drop = ("FAIRWINS_", "PYTHON", "XDG_CONFIG_HOME", "APPDATA", "LOCALAPPDATA", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), **extra)
    if sys.platform == "win32":
        env["USERPROFILE"] = str(home)  # where Path.home() looks there; APPDATA then defaults inside it
    return env


def install(
    home: pathlib.Path, *args: str, cwd: pathlib.Path | None = None, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`fairwins-mcp install …` as the member runs it: this environment's installed command, from `cwd`."""
    command = console_script("fairwins-mcp")
    done = subprocess.run(
        [str(command), "install", *args],
        cwd=cwd or home,
        env=scratch_env(home, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    record_output(f"fairwins-mcp install {' '.join(args)}", done.stdout + done.stderr)
    return done


@pytest.fixture
def home(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def desktop_file(home: pathlib.Path) -> pathlib.Path:
    """Where this platform's Claude Desktop reads its config in the scratch HOME (no APPDATA or XDG set)."""
    return pathlib.Path(str(desktop_config_path(sys.platform, {}, home)))


@pytest.fixture
def entry_process(tmp_path: pathlib.Path) -> Iterator[Any]:
    """Start an `mcpServers` entry exactly as the client would: its command, args and env, elsewhere."""
    started: list[StdioProcess] = []

    def start(entry: dict[str, Any], **extra_env: str) -> StdioProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRWINS_", "PYTHON"))}
        env.update(entry.get("env", {}), **extra_env)
        elsewhere = tmp_path / f"client-cwd-{len(started)}"
        elsewhere.mkdir()
        process = StdioProcess([entry["command"], *entry.get("args", [])], env, cwd=elsewhere)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def test_claude_desktop_writes_a_working_server_beside_the_others_keeping_a_backup(
    home: pathlib.Path, sandbox: SandboxGateway, entry_process: Any
) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(EXISTING, encoding="utf-8")
    done = install(home, "claude-desktop", FAIRWINS_API_URL=sandbox.url, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"config   {path}\n" in out
    assert f'server   "fairwins" added: {sys.executable} -m mcp_server' in out
    assert f"gateway  {sandbox.url}" in out
    assert f"token    {REDACTED_A} (from FAIRWINS_API_TOKEN), kept in plain text in that file" in out
    assert "kept     1 other server(s) (github) and every other byte of the file" in out
    assert TOKEN_MEMBER_A not in out + done.stderr
    config = json.loads(path.read_text(encoding="utf-8"))
    assert config["mcpServers"]["github"] == json.loads(EXISTING)["mcpServers"]["github"]
    assert config["globalShortcut"] == "Ctrl+Space" and config["preferences"] == {"menuBarEnabled": False}
    entry = config["mcpServers"]["fairwins"]
    assert entry == {
        "command": sys.executable,
        "args": ["-m", "mcp_server"],
        "env": {"FAIRWINS_API_URL": sandbox.url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A},
    }
    (backup,) = path.parent.glob("claude_desktop_config.json.bak-*")
    assert backup.read_text(encoding="utf-8") == EXISTING and f"backup   {backup}" in out
    if sys.platform != "win32":  # Windows keeps no POSIX modes: the profile's ACL guards the file there
        assert path.stat().st_mode & 0o777 == 0o600, "the file now holds a token"
        assert backup.stat().st_mode & 0o777 == 0o600
    # What Claude Desktop then does: start the entry and hold a session.
    session = hold_session(entry_process(entry))
    assert session.initialize["serverInfo"]["version"] == __version__
    assert session.public["isError"] is False
    assert session.member["isError"] is False, session.member
    assert any(r.header("Authorization") == f"Bearer {TOKEN_MEMBER_A}" for r in sandbox.seen)


def test_claude_desktop_creates_the_file_when_there_is_none_and_reinstalling_changes_nothing(
    home: pathlib.Path,
) -> None:
    first = install(home, "claude-desktop", "--no-token")
    assert first.returncode == 0, first.stderr
    assert "(new file)" in first.stdout and "token    none (--no-token): the public tools only" in first.stdout
    path = desktop_file(home)
    entry = json.loads(path.read_text(encoding="utf-8"))["mcpServers"]["fairwins"]
    assert entry["env"] == {"FAIRWINS_API_URL": "https://relay.fairwins.app"}
    assert not list(path.parent.glob("*.bak-*")), "there was nothing to back up"
    before = path.read_bytes()
    again = install(home, "claude-desktop", "--no-token")
    assert again.returncode == 0 and "already installed exactly so: nothing changed" in again.stdout
    assert path.read_bytes() == before and not list(path.parent.glob("*.bak-*"))


def test_a_different_entry_of_the_same_name_needs_force_and_force_keeps_a_backup(home: pathlib.Path) -> None:
    assert install(home, "claude-desktop", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A).returncode == 0
    path = desktop_file(home)
    written = path.read_bytes()
    refused = install(home, "claude-desktop", FAIRWINS_API_TOKEN=TOKEN_MEMBER_B)
    assert refused.returncode == 1
    assert "different server named" in refused.stderr and "--force" in refused.stderr
    assert path.read_bytes() == written and not list(path.parent.glob("*.bak-*"))
    forced = install(home, "claude-desktop", "--force", FAIRWINS_API_TOKEN=TOKEN_MEMBER_B)
    assert forced.returncode == 0, forced.stderr
    assert "replaced (--force; it differed in env FAIRWINS_API_TOKEN)" in forced.stdout
    assert json.loads(path.read_text())["mcpServers"]["fairwins"]["env"]["FAIRWINS_API_TOKEN"] == TOKEN_MEMBER_B
    (backup,) = path.parent.glob("*.bak-*")
    assert backup.read_bytes() == written
    assert TOKEN_MEMBER_B not in forced.stdout + forced.stderr + refused.stdout + refused.stderr


def test_print_shows_the_entry_with_the_token_redacted_and_writes_nothing(home: pathlib.Path) -> None:
    done = install(home, "claude-desktop", "--print", "--token-stdin", stdin=TOKEN_MEMBER_A + "\n")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["mcpServers"]["fairwins"]
    assert shown["env"]["FAIRWINS_API_TOKEN"] == REDACTED_A
    assert shown["command"] == sys.executable and shown["args"] == ["-m", "mcp_server"]
    assert "redacted" in done.stderr and str(desktop_file(home)) in done.stderr
    assert not desktop_file(home).exists()


def test_the_token_comes_from_stdin_and_bad_settings_are_refused_before_anything_is_written(home: pathlib.Path) -> None:
    done = install(home, "claude-desktop", "--token-stdin", stdin=TOKEN_MEMBER_A + "\n")
    assert done.returncode == 0 and f"{REDACTED_A} (from stdin)" in done.stdout
    for args, stdin, why in (
        (["--token-stdin"], "\n", "--token-stdin read an empty line"),
        (["--token-stdin", "--force"], "fw1.two words\n", "whitespace"),
        (["--url", "ftp://relay.example", "--no-token"], "", "http:// or https:// URL"),
        (["--url", "http://relay.example", "--no-token"], "", "http:// to relay.example, which is not this machine"),
    ):
        refused = install(home, "claude-desktop", *args, stdin=stdin)
        assert refused.returncode == 1 and why in refused.stderr, refused.stderr
    assert json.loads(desktop_file(home).read_text())["mcpServers"]["fairwins"]["env"]["FAIRWINS_API_TOKEN"] == (
        TOKEN_MEMBER_A
    )


def test_an_interpreter_that_cannot_import_the_package_elsewhere_is_refused(home: pathlib.Path) -> None:
    # A checkout run by a bare interpreter through PYTHONPATH: the client would not find the package.
    python = pathlib.Path(getattr(sys, "_base_executable", "") or sys.executable)  # the venv's base interpreter
    probe = subprocess.run([str(python), "-c", "import mcp_server"], cwd=home, capture_output=True, timeout=RUN_TIMEOUT)
    assert probe.returncode != 0, "the base interpreter must not have the package for this test"
    done = subprocess.run(
        [str(python), "-m", "mcp_server", "install", "claude-desktop", "--no-token"],
        cwd=ROOT,
        env=scratch_env(home, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 1 and "install the package first" in done.stderr
    assert not desktop_file(home).exists()


@pytest.mark.posix("a terminal made with pty.fork: Windows has no pty")
def test_the_prompt_asks_for_the_token_without_echoing_it(home: pathlib.Path) -> None:
    command = pathlib.Path(sys.executable).parent / "fairwins-mcp"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the install command on a terminal, as a member runs it
        os.chdir(home)
        os.execve(str(command), [str(command), "install", "claude-desktop"], scratch_env(home))
    seen = b""
    deadline = time.monotonic() + RUN_TIMEOUT
    typed = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal: it is done
                break
            if not chunk:
                break
            seen += chunk
            if not typed and b"Member token" in seen:
                os.write(fd, TOKEN_MEMBER_A.encode() + b"\n")
                typed = True
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = seen.decode("utf-8", "replace")
    record_output("fairwins-mcp install on a terminal", text)
    assert typed and os.waitstatus_to_exitcode(status) == 0, text
    assert TOKEN_MEMBER_A not in text and f"{REDACTED_A} (from the prompt)" in text
    entry = json.loads(desktop_file(home).read_text())["mcpServers"]["fairwins"]
    assert entry["env"]["FAIRWINS_API_TOKEN"] == TOKEN_MEMBER_A


# --- claude-desktop on the files members really have --------------------------------------------


def snapshot(directory: pathlib.Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file in `directory`: its bytes, mtime and mode (symlinks not followed)."""
    found = {}
    for path in sorted(directory.iterdir()):
        status = path.lstat()
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        found[path.name] = (data, status.st_mtime_ns, status.st_mode)
    return found


@NODE_TOOLS
def test_a_config_json_parse_reads_keeps_every_byte_and_gains_only_the_entry(home: pathlib.Path) -> None:
    # Claude Desktop writes `windowZoom` itself; 1e999 is JSON, and JSON.parse reads it (as Infinity).
    old = (
        b'{\n  "windowZoom": 1e999,\n  "accountId": 123456789012345678901234567890,\n  "mcpServers": {\n'
        b'    "github": {"command": "/opt/gh-mcp", "env": {"GITHUB_TOKEN": "ghp_secret"}},\n    "github": {}\n  }\n}\n'
    )
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(old)
    done = install(home, "claude-desktop", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0, done.stderr
    assert "kept     1 other server(s) (github) and every other byte of the file" in done.stdout
    new = path.read_bytes()
    cut = old.index(b"\n  }\n}\n")
    assert new[:cut] == old[:cut] and new.endswith(old[cut:]), "an insertion before the servers' closing brace"
    before, after = json_parse([old.decode(), new.decode()])
    assert before is not None and after is not None, "Claude Desktop reads the file before and after"
    assert json.loads(after) == json.loads(before) | {
        "mcpServers": {"github": {}, "fairwins": json.loads(new)["mcpServers"]["fairwins"]}
    }
    assert b'"windowZoom": 1e999' in new and b"Infinity" not in new


REFUSED: Final = {
    "NaN": (b'{"windowZoom": NaN, "mcpServers": {}}', "not valid JSON: a value was expected"),
    "Infinity": (b'{\n  "windowZoom": Infinity\n}\n', "at line 2, column 17"),
    "-Infinity": (b'{"windowZoom": -Infinity}', "a number is malformed (JSON has no NaN or Infinity)"),
    "a comment": (b'{\n  // my servers\n  "mcpServers": {}\n}\n', "at line 2, column 3"),
    "a trailing comma": (b'{"mcpServers": {"github": {},}}', "a member's name in double quotes was expected"),
    "not an object": (b'["mcpServers"]', "does not hold a JSON object"),
    "servers not an object": (b'{"mcpServers": ["github"]}', 'holds an "mcpServers" that is not an object'),
    "Latin-1": ('{"mcpServers": {}, "name": "Renée"}'.encode("latin-1"), "is not UTF-8 text (byte offset 31)"),
    "UTF-16": ('{"mcpServers": {}}'.encode("utf-16"), "is not UTF-8 text (byte offset 0)"),
}


@pytest.mark.parametrize(("data", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_config_claude_desktop_cannot_read_is_refused_with_nothing_written(
    home: pathlib.Path, data: bytes, why: str
) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    before = snapshot(path.parent)
    done = install(home, "claude-desktop", "--force", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"fairwins-mcp install: {path} ") and why in done.stderr, done.stderr
    assert "nothing was changed" in done.stderr
    assert "Traceback" not in done.stderr and "ghp_" not in done.stderr
    assert snapshot(path.parent) == before, "the file untouched (bytes and mtime), no backup, no temporary file"


@POSIX_FILES
def test_a_symlinked_config_is_written_through_the_link_keeping_the_link_and_the_targets_mode(
    home: pathlib.Path,
) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude.json"
    target.write_text(EXISTING, encoding="utf-8")
    target.chmod(0o640)
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.symlink_to(os.path.relpath(target, path.parent))  # relative, as dotfile managers make them
    link = os.readlink(path)
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 0, done.stderr
    assert f"config   {path} (a symlink to {target}, written through it)" in done.stdout
    assert path.is_symlink() and os.readlink(path) == link, "still the same link"
    assert json.loads(target.read_text(encoding="utf-8"))["mcpServers"]["fairwins"]["env"] == {
        "FAIRWINS_API_URL": "https://relay.fairwins.app"
    }
    assert target.stat().st_mode & 0o777 == 0o640, "no token written: the mode is the member's"
    (backup,) = path.parent.glob("claude_desktop_config.json.bak-*")  # beside the name the member knows
    assert backup.read_text(encoding="utf-8") == EXISTING and not backup.is_symlink()
    assert sorted(p.name for p in dotfiles.iterdir()) == ["claude.json"], "no temporary file left beside the target"
    # With a token, the target (not the link) becomes the owner's alone.
    done = install(home, "claude-desktop", "--force", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0, done.stderr
    assert "mode     0640 -> 0600: the file now holds your token" in done.stdout
    assert path.is_symlink() and target.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text(encoding="utf-8"))["mcpServers"]["fairwins"]["env"]["FAIRWINS_API_TOKEN"] == (
        TOKEN_MEMBER_A
    )


@POSIX_FILES
def test_a_symlink_to_a_file_not_yet_there_creates_the_file_and_stays_a_link(home: pathlib.Path) -> None:
    target = home / "dotfiles" / "claude.json"
    target.parent.mkdir()
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 0, done.stderr
    assert path.is_symlink() and os.readlink(path) == str(target)
    assert json.loads(target.read_text(encoding="utf-8"))["mcpServers"]["fairwins"]["command"] == sys.executable
    assert target.stat().st_mode & 0o777 == 0o600


@POSIX_FILES
def test_the_files_mode_is_kept_unless_a_token_goes_in(home: pathlib.Path) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(EXISTING, encoding="utf-8")
    path.chmod(0o644)
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 0 and "mode " not in done.stdout, done.stderr
    assert path.stat().st_mode & 0o777 == 0o644
    done = install(home, "claude-desktop", "--force", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A)
    assert done.returncode == 0 and "mode     0644 -> 0600" in done.stdout, done.stderr
    assert path.stat().st_mode & 0o777 == 0o600


@POSIX_FILES
def test_a_config_with_another_hard_link_or_not_a_regular_file_is_refused(home: pathlib.Path) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(EXISTING, encoding="utf-8")
    os.link(path, home / "other-name.json")
    before = snapshot(path.parent)
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 1 and "has 2 hard links, which replacing it would split" in done.stderr
    assert snapshot(path.parent) == before
    (home / "other-name.json").unlink()
    path.unlink()
    os.mkfifo(path)  # nothing writes to it: reading it would wait for ever
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 1 and f"{path} is not a regular file; nothing was changed" in done.stderr
    assert stat.S_ISFIFO(path.lstat().st_mode)


def test_a_config_that_changed_since_it_was_read_is_not_replaced(home: pathlib.Path) -> None:
    # What Claude Desktop saving its settings between our read and our write looks like.
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(EXISTING, encoding="utf-8")
    found = install_module._read(path)
    path.write_text(EXISTING.replace("Ctrl+Space", "Alt+Space"), encoding="utf-8")
    before = snapshot(path.parent)
    with pytest.raises(InstallError, match="changed while this ran; nothing was changed"):
        install_module._write(path, found, b"{}", 0o600)
    assert snapshot(path.parent) == before, "no backup, no temporary file"


# --- claude-code, with the real Claude Code CLI -----------------------------------------------------


def claude_on_path(tmp_path: pathlib.Path) -> str:
    """A PATH on which `claude` is the pinned Claude Code."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claude").symlink_to(tool("claude-code")[0])
    return f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def claude_path(tmp_path: pathlib.Path) -> str:
    return claude_on_path(tmp_path)


def claude(
    home: pathlib.Path, cwd: pathlib.Path, path: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["claude", *args],
        cwd=cwd,
        env=scratch_env(home, PATH=path, **QUIET_CLAUDE, **env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    record_output(f"claude {' '.join(args)}", done.stdout + done.stderr)
    return done


def connected(listing: str, name: str = "fairwins") -> bool:
    return any(line.startswith(f"{name}: ") and "✔ Connected" in line for line in listing.splitlines())


@pytest.fixture
def project(home: pathlib.Path) -> pathlib.Path:
    path = home / "project"
    path.mkdir()
    return path


@NODE_TOOLS
@pytest.mark.parametrize("scope", ["local", "user"])
def test_claude_code_adds_a_server_that_claude_mcp_list_reports_connected(
    scope: str,
    home: pathlib.Path,
    project: pathlib.Path,
    claude_path: str,
    sandbox: SandboxGateway,
    entry_process: Any,
) -> None:
    done = install(
        home,
        "claude-code",
        "--scope",
        scope,
        cwd=project,
        PATH=claude_path,
        FAIRWINS_API_URL=sandbox.url,
        FAIRWINS_API_TOKEN=TOKEN_MEMBER_A,
        **QUIET_CLAUDE,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"Added stdio MCP server fairwins with command: {sys.executable} -m mcp_server to {scope} config" in done.stdout
    )
    assert f"token    {REDACTED_A} (from FAIRWINS_API_TOKEN), kept by Claude Code" in done.stdout
    assert TOKEN_MEMBER_A not in done.stdout + done.stderr
    listing = claude(home, project, claude_path, "mcp", "list")
    assert listing.returncode == 0 and connected(listing.stdout), listing.stdout + listing.stderr
    assert TOKEN_MEMBER_A not in listing.stdout
    # The entry Claude Code stored, started as Claude Code starts it: a member read works.
    stored = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    servers = stored["mcpServers"] if scope == "user" else stored["projects"][str(project)]["mcpServers"]
    entry = servers["fairwins"]
    assert entry["env"] == {"FAIRWINS_API_URL": sandbox.url, "FAIRWINS_API_TOKEN": TOKEN_MEMBER_A}
    session = hold_session(entry_process(entry))
    assert session.member["isError"] is False, session.member
    assert "w-a-1" in json.dumps(session.member["structuredContent"])  # member A's own wager


@NODE_TOOLS
def test_claude_code_refuses_to_replace_an_entry_without_force(
    home: pathlib.Path, project: pathlib.Path, claude_path: str, sandbox: SandboxGateway
) -> None:
    common = {"PATH": claude_path, "FAIRWINS_API_URL": sandbox.url, **QUIET_CLAUDE}
    assert install(home, "claude-code", "--no-token", cwd=project, **common).returncode == 0
    again = install(home, "claude-code", cwd=project, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **common)
    assert again.returncode == 1 and "--force replaces it" in again.stderr
    forced = install(home, "claude-code", "--force", cwd=project, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **common)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert 'removed  the previous "fairwins" (local scope)' in forced.stdout
    stored = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    assert stored["projects"][str(project)]["mcpServers"]["fairwins"]["env"]["FAIRWINS_API_TOKEN"] == TOKEN_MEMBER_A
    assert connected(claude(home, project, claude_path, "mcp", "list").stdout)


@NODE_TOOLS
def test_claude_code_project_scope_shares_no_token_and_connects_with_the_members_own(
    home: pathlib.Path, project: pathlib.Path, claude_path: str, sandbox: SandboxGateway
) -> None:
    done = install(
        home,
        "claude-code",
        "--scope",
        "project",
        cwd=project,
        PATH=claude_path,
        FAIRWINS_API_URL=sandbox.url,
        FAIRWINS_API_TOKEN=TOKEN_MEMBER_A,
        **QUIET_CLAUDE,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shared = (project / ".mcp.json").read_text(encoding="utf-8")
    assert TOKEN_MEMBER_A not in shared
    entry = json.loads(shared)["mcpServers"]["fairwins"]
    assert entry["command"] == "fairwins-mcp" and entry["env"]["FAIRWINS_API_TOKEN"] == "${FAIRWINS_API_TOKEN}"
    # What the member's first interactive `claude` in the project records: the folder is trusted,
    # and the project's server is approved.
    state = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    state.setdefault("projects", {}).setdefault(str(project), {})["hasTrustDialogAccepted"] = True
    (home / ".claude.json").write_text(json.dumps(state), encoding="utf-8")
    settings = project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"enabledMcpjsonServers": ["fairwins"]}), encoding="utf-8")
    bindir = pathlib.Path(sys.executable).parent  # where fairwins-mcp is on the member's PATH
    listing = claude(
        home, project, f"{bindir}{os.pathsep}{claude_path}", "mcp", "list", FAIRWINS_API_TOKEN=TOKEN_MEMBER_A
    )
    assert connected(listing.stdout), listing.stdout + listing.stderr


@NODE_TOOLS
def test_without_claude_on_path_the_command_is_printed_with_the_token_left_to_the_shell(
    home: pathlib.Path, project: pathlib.Path, claude_path: str, sandbox: SandboxGateway
) -> None:
    bare_path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p)
    assert subprocess.run(["bash", "-c", "! command -v claude"], env={"PATH": bare_path}).returncode == 0
    done = install(
        home,
        "claude-code",
        cwd=project,
        PATH=bare_path,
        FAIRWINS_API_URL=sandbox.url,
        FAIRWINS_API_TOKEN=TOKEN_MEMBER_A,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Claude Code (claude) is not on PATH; where it is, run:"
    assert TOKEN_MEMBER_A not in done.stdout and REDACTED_A in lines[2]
    printed = lines[1]
    assert '"FAIRWINS_API_TOKEN=$FAIRWINS_API_TOKEN"' in printed
    assert shlex.split(printed)[:8] == ["claude", "mcp", "add", "--scope", "local", "--transport", "stdio", "fairwins"]
    # Pasted into a shell where claude is and the member's token is set, it installs a working server.
    pasted = subprocess.run(
        ["bash", "-c", printed],
        cwd=project,
        env=scratch_env(home, PATH=claude_path, FAIRWINS_API_TOKEN=TOKEN_MEMBER_A, **QUIET_CLAUDE),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    record_output("the printed claude mcp add", pasted.stdout + pasted.stderr)
    assert pasted.returncode == 0, pasted.stderr
    stored = json.loads((home / ".claude.json").read_text(encoding="utf-8"))
    assert stored["projects"][str(project)]["mcpServers"]["fairwins"]["env"]["FAIRWINS_API_TOKEN"] == TOKEN_MEMBER_A
    assert connected(claude(home, project, claude_path, "mcp", "list").stdout)


def test_the_serve_path_never_loads_the_installer() -> None:
    from tests.test_start_path import NEVER_ON_STDIO

    assert {"mcp_server.setup.install", "mcp_server.setup.client_configs"} <= set(NEVER_ON_STDIO)


def test_a_config_path_that_cannot_be_written_is_reported_not_raised(home: pathlib.Path) -> None:
    blocker = home / "not-a-directory"
    blocker.write_text("a file where a folder would have to be\n")
    done = install(home, "claude-desktop", "--no-token", "--config", str(blocker / "claude_desktop_config.json"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("fairwins-mcp install: ") and "nothing was changed" in done.stderr


# --- two installs at once, and files with repeated keys (issue 34, point 5) -------------------------


def installs_at_once(home: pathlib.Path, names: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """`fairwins-mcp install claude-desktop --name N` for each name, all started before any is waited for."""
    command = pathlib.Path(sys.executable).parent / "fairwins-mcp"
    running = [
        subprocess.Popen(
            [str(command), "install", "claude-desktop", "--no-token", "--name", name],
            cwd=home,
            env=scratch_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    done = []
    for name, process in zip(names, running, strict=True):
        out, err = process.communicate(timeout=RUN_TIMEOUT)
        record_output(f"fairwins-mcp install claude-desktop --name {name}", out + err)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


@pytest.mark.parametrize("existing", [True, False], ids=["beside-others", "no-file-yet"])
def test_installs_run_at_once_with_different_names_leave_every_entry(home: pathlib.Path, existing: bool) -> None:
    path = desktop_file(home)
    if existing:
        path.parent.mkdir(parents=True)
        path.write_text(EXISTING, encoding="utf-8")
    names = [f"fairwins-{n}" for n in range(6)]
    done = installs_at_once(home, names)
    assert [d.returncode for d in done] == [0] * len(names), [d.stderr for d in done]
    servers = json.loads(path.read_text(encoding="utf-8"))["mcpServers"]
    assert sorted(servers) == sorted(names + (["github"] if existing else []))
    assert not list(path.parent.glob("*.lock")) and not list(path.parent.glob("*.tmp")), "nothing left behind"


def test_a_config_with_mcp_servers_twice_is_refused_by_the_command_naming_the_lines(home: pathlib.Path) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    text = '{\n  "mcpServers": {"github": {"command": "/opt/gh-mcp"}},\n  "theme": "dark",\n  "mcpServers": {}\n}\n'
    path.write_text(text, encoding="utf-8")
    before = snapshot(path.parent)
    done = install(home, "claude-desktop", "--no-token", "--force")
    assert done.returncode == 1, done.stdout
    assert f'{path} has "mcpServers" 2 times (at line 2 and line 4); Claude Desktop reads only the last' in done.stderr
    assert "nothing was changed" in done.stderr and "gh-mcp" not in done.stderr
    assert snapshot(path.parent) == before, "no entry, no backup, no lock left"


def test_a_lock_left_by_a_killed_install_is_named_after_the_wait_and_nothing_is_written(home: pathlib.Path) -> None:
    path = desktop_file(home)
    path.parent.mkdir(parents=True)
    path.write_text(EXISTING, encoding="utf-8")
    lock = path.with_name(f".{path.name}.lock")
    lock.write_text("12345\n", encoding="utf-8")
    done = install(home, "claude-desktop", "--no-token")
    assert done.returncode == 1
    assert f"{lock} says another fairwins-mcp install is writing" in done.stderr
    assert f"If no install is running, delete {lock}" in done.stderr
    assert path.read_text(encoding="utf-8") == EXISTING and lock.exists()  # never taken from its owner
