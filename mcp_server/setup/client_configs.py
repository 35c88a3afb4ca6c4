"""Where MCP clients keep their server lists, and how this server's entry is merged into one: pure, no I/O.

Used only by `fairwins-mcp install` (mcp_server/setup/install.py); serving never loads it.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

CONFIG_NAME: Final = "claude_desktop_config.json"
# Claude Desktop for Windows installed from its MSIX package (the claude.ai installer as well as
# the Microsoft Store) reads its configuration inside the package's virtualised folder, not from
# %APPDATA%; a file written to %APPDATA%\Claude is never seen by that app.
MSIX_PREFIX: Final = "Claude_"
MSIX_ROAMING: Final = ("LocalCache", "Roaming", "Claude")

TOKEN_VARIABLE: Final = "FAIRWINS_API_TOKEN"
URL_VARIABLE: Final = "FAIRWINS_API_URL"
CLAUDE_CODE_SCOPES: Final = ("local", "user", "project")


class InstallError(Exception):
    """Nothing was changed, for the reason in the message (one or two sentences for stderr)."""


def desktop_config_path(platform: str, env: Mapping[str, str], home: pathlib.PurePath) -> pathlib.PurePath:
    """Claude Desktop's claude_desktop_config.json on `platform` (sys.platform), as Desktop itself reads it.

    macOS: ~/Library/Application Support/Claude. Windows: the MSIX package's
    LocalCache\\Roaming\\Claude when that package is installed, else %APPDATA%\\Claude. Linux (community
    builds; Electron's appData): $XDG_CONFIG_HOME/Claude, else ~/.config/Claude.
    """
    if platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / CONFIG_NAME
    if platform == "win32":
        local = env.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        packages = pathlib.Path(local) / "Packages"
        try:
            found = sorted(p for p in packages.iterdir() if p.name.startswith(MSIX_PREFIX) and p.is_dir())
        except OSError:
            found = []
        if len(found) > 1:
            names = ", ".join(str(p) for p in found)
            raise InstallError(
                f"several Claude Desktop packages are installed ({names}); "
                "say which configuration to write with --config PATH"
            )
        if found:
            return found[0].joinpath(*MSIX_ROAMING, CONFIG_NAME)
        roaming = env.get("APPDATA") or str(home / "AppData" / "Roaming")
        return pathlib.PureWindowsPath(roaming) / "Claude" / CONFIG_NAME
    xdg = env.get("XDG_CONFIG_HOME", "")
    # The XDG base directory spec: a relative path is invalid and is ignored.
    base = pathlib.PurePosixPath(xdg) if xdg.startswith("/") else home / ".config"
    return base / "Claude" / CONFIG_NAME


def server_entry(command: str, args: Sequence[str], url: str, token: str | None) -> dict[str, Any]:
    """This server as Claude Desktop's (and Claude Code's) `mcpServers` value: stdio, launched by absolute path."""
    env = {URL_VARIABLE: url}
    if token:
        env[TOKEN_VARIABLE] = token
    return {"command": command, "args": list(args), "env": env}


@dataclass(frozen=True)
class Merge:
    text: str  # the whole new file
    outcome: str  # "added" | "replaced" | "unchanged"
    others: tuple[str, ...]  # the other servers, kept
    differences: tuple[str, ...] = ()  # what --force replaced


def differences(old: Any, new: dict[str, Any]) -> tuple[str, ...]:
    """What differs between two entries, named without their values (an env value may be a token)."""
    if not isinstance(old, dict):
        return ("the whole entry",)
    found = [key for key in sorted(set(old) | set(new)) if key != "env" and old.get(key) != new.get(key)]
    raw_env = old.get("env")
    old_env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    new_env: dict[str, Any] = new.get("env", {})
    found += [f"env {name}" for name in sorted(set(old_env) | set(new_env)) if old_env.get(name) != new_env.get(name)]
    return tuple(found)


def merge(existing: str | None, name: str, entry: dict[str, Any], *, force: bool, where: str) -> Merge:
    """The config file with `entry` as mcpServers[name], everything else kept; InstallError when it must not be."""
    if existing is None or not existing.strip():
        config: dict[str, Any] = {}
    else:
        try:
            parsed = json.loads(existing)
        except ValueError as exc:
            # The position only: the file may hold other servers' secrets.
            raise InstallError(
                f"{where} is not valid JSON (line {getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')}); "
                "fix it or move it aside, then run this again"
            ) from None
        if not isinstance(parsed, dict):
            raise InstallError(f"{where} does not hold a JSON object; fix it or move it aside, then run this again")
        config = parsed
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InstallError(f'"mcpServers" in {where} is not an object; fix it or move it aside, then run this again')
    others = tuple(n for n in servers if n != name)
    changed: tuple[str, ...] = ()
    if name in servers:
        if servers[name] == entry:
            return Merge(existing or "", "unchanged", others)
        changed = differences(servers[name], entry)
        if not force:
            raise InstallError(
                f'{where} already has a different server named "{name}" (it differs in {", ".join(changed)}); nothing '
                f"was changed. Run again with --force to replace it (a backup is kept), or choose another --name."
            )
    outcome = "replaced" if name in servers else "added"
    servers[name] = entry
    return Merge(json.dumps(config, indent=2, ensure_ascii=False) + "\n", outcome, others, changed)


def claude_code_argv(
    claude: str, scope: str, name: str, entry: dict[str, Any], *, token_value: str | None = None
) -> list[str]:
    """`claude mcp add` for `entry`; `token_value` stands in for the token when given (for printing)."""
    argv = [claude, "mcp", "add", "--scope", scope, "--transport", "stdio", name]
    for key, value in entry["env"].items():
        shown = token_value if key == TOKEN_VARIABLE and token_value is not None else value
        argv += ["-e", f"{key}={shown}"]
    return [*argv, "--", entry["command"], *entry["args"]]
