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
import pty
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

import pytest

from mcp_server import __version__
from mcp_server.setup.client_configs import InstallError, desktop_config_path, merge, server_entry
from tests.conftest import ROOT, StdioProcess
from tests.hosts import hold_session, tool
from tests.sandbox_gateway import TOKEN_MEMBER_A, TOKEN_MEMBER_B, SandboxGateway
from tests.secret_canaries import record_output

RUN_TIMEOUT: Final = 120.0
REDACTED_A: Final = "fw1.…7f3k"
ENTRY: Final = server_entry("/usr/bin/python3", ["-m", "mcp_server"], "https://relay.fairwins.app", TOKEN_MEMBER_A)
# Claude Code never phones home from these tests: no updater, telemetry or error reports.
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
        ('{"mcpServers": {"github": {"env": {"GITHUB_TOKEN": "ghp_secret"}}', "not valid JSON (line 1, column"),
        ("[1, 2]", "does not hold a JSON object"),
        ('{"mcpServers": []}', '"mcpServers" in c is not an object'),
    ],
)
def test_a_config_that_cannot_be_merged_is_refused_without_quoting_it(text: str, why: str) -> None:
    with pytest.raises(InstallError) as refused:
        merge(text, "fairwins", ENTRY, force=True, where="c")
    assert why in str(refused.value) and "ghp_secret" not in str(refused.value)


# --- claude-desktop, end to end in a scratch HOME ---------------------------------------------------


def scratch_env(home: pathlib.Path, **extra: str) -> dict[str, str]:
    """A member's environment with HOME moved to `home`, and nothing of ours that the command reads."""
    drop = ("FAIRWINS_", "PYTHON", "XDG_CONFIG_HOME", "APPDATA", "LOCALAPPDATA", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), **extra)
    return env


def install(
    home: pathlib.Path, *args: str, cwd: pathlib.Path | None = None, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`fairwins-mcp install …` as the member runs it: this environment's installed command, from `cwd`."""
    command = pathlib.Path(sys.executable).parent / "fairwins-mcp"
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
    return home / ".config" / "Claude" / "claude_desktop_config.json"


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
    assert "kept     1 other server(s) (github) and every other setting" in out
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
    assert path.stat().st_mode & 0o777 == 0o600, "the file now holds a token"
    (backup,) = path.parent.glob("claude_desktop_config.json.bak-*")
    assert backup.read_text(encoding="utf-8") == EXISTING and f"backup   {backup}" in out
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


# --- claude-code, with the real Claude Code CLI -----------------------------------------------------


@pytest.fixture
def claude_path(tmp_path: pathlib.Path) -> str:
    """A PATH on which `claude` is the pinned Claude Code."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claude").symlink_to(tool("claude-code")[0])
    return f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"


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
