"""`fairwins-mcp install`: this server put into a client's configuration.

claude-desktop edits Claude Desktop's claude_desktop_config.json (at the operating system's own
path; mcp_server/setup/client_configs.py): our entry goes in, every other byte stays, a backup of
the file is kept, and a different entry of the same name is replaced only with --force. A file
Claude Desktop cannot read (not JSON, not UTF-8, not an object) is refused with nothing written; a
symlink is written through, the file it points at replaced atomically, its mode kept.

claude-code runs `claude mcp add` when `claude` is on PATH, and prints the command otherwise.

The entry launches this very interpreter with `-m mcp_server`, checked first the way the client
will start it (another directory, no PYTHONPATH), so it runs from a virtual environment, pipx or a
user install alike. The token is read from stdin (--token-stdin), FAIRWINS_API_TOKEN, or a prompt
that does not echo; it is only ever shown redacted (`fw1.…abcd`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import os
import pathlib
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from mcp_server import __version__
from mcp_server.ops.logs import redact
from mcp_server.setup.client_configs import (
    CLAUDE_CODE_SCOPES,
    FIX_IT,
    TOKEN_VARIABLE,
    URL_VARIABLE,
    InstallError,
    Merge,
    claude_code_argv,
    desktop_config_path,
    merge,
    server_entry,
)
from mcp_server.setup.config import ConfigError, from_env, token_refusal
from mcp_server.upstream.gateway import parse_base_url

PUBLIC_RELAY: Final = "https://relay.fairwins.app"
DEFAULT_NAME: Final = "fairwins"
PROBE_TIMEOUT: Final = 60.0
CLAUDE_TIMEOUT: Final = 120.0
# What the printed `claude mcp add` line holds instead of the token: the shell reads it from the
# member's own environment when they paste the line.
TOKEN_REFERENCE: Final = "${" + TOKEN_VARIABLE + "}"
LOCK_WAIT: Final = 10.0  # seconds to wait for another install's lock on the same file (each holds it for milliseconds)
LOCK_POLL: Final = 0.02
WRITE_ATTEMPTS: Final = 3  # merges tried on a file Claude Desktop keeps saving under us


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fairwins-mcp install",
        description="Put this server into an MCP client's configuration. The token is never printed.",
    )
    clients = parser.add_subparsers(dest="client", required=True, metavar="CLIENT")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--name", default=DEFAULT_NAME, help=f"the server's name in the client (default {DEFAULT_NAME})"
    )
    common.add_argument(
        "--url", help=f"gateway base URL (default: FAIRWINS_API_URL if set, else the public relay {PUBLIC_RELAY})"
    )
    token = common.add_mutually_exclusive_group()
    token.add_argument("--token-stdin", action="store_true", help="read the member token from the first line of stdin")
    token.add_argument("--no-token", action="store_true", help="no member token: the public tools only")
    common.add_argument("--force", action="store_true", help="replace a different entry of the same name")
    common.add_argument("--print", action="store_true", help="show the entry (token redacted) instead of installing")
    desktop = clients.add_parser(
        "claude-desktop",
        parents=[common],
        help="write the server into Claude Desktop's claude_desktop_config.json",
        description="Merge the server into Claude Desktop's configuration file, keeping a backup.",
    )
    desktop.add_argument("--config", type=pathlib.Path, help="the configuration file (default: Claude Desktop's own)")
    code = clients.add_parser(
        "claude-code",
        parents=[common],
        help="add the server to Claude Code (claude mcp add)",
        description="Run `claude mcp add` for the server, or print the command when claude is not on PATH.",
    )
    code.add_argument(
        "--scope",
        choices=CLAUDE_CODE_SCOPES,
        default="local",
        help="local: you, in this project (default); user: you, in every project; project: .mcp.json, shared "
        "with the project (the token is then read from FAIRWINS_API_TOKEN, never written there)",
    )
    return parser


def _line(out: TextIO, topic: str, text: str) -> None:
    """One aligned `topic  text` line, as `check` prints them."""
    out.write(f"{topic:<8} {text}\n")


def _token(args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO) -> tuple[str | None, str]:
    """(the token or None, where it came from), never echoing it."""
    if args.no_token:
        return None, "--no-token"
    if args.token_stdin:
        token = stdin.readline().strip()
        if not token:
            raise InstallError("--token-stdin read an empty line: pipe the token in, or use --no-token")
        return token, "stdin"
    if env.get(TOKEN_VARIABLE, "").strip():
        return env[TOKEN_VARIABLE].strip(), TOKEN_VARIABLE
    if stdin.isatty() and not args.print:  # --print shows no token, so it asks for none
        token = getpass.getpass("Member token (fw1.…; press Enter for none, the public tools only): ").strip()
        return (token or None), "the prompt"
    return None, f"none given (no --token-stdin, no {TOKEN_VARIABLE}, no terminal to ask on)"


def _settings(
    args: argparse.Namespace, env: Mapping[str, str], stdin: TextIO, *, ask_token: bool = True
) -> tuple[str, str | None, str]:
    """(gateway URL, token or None, its source), checked as the server would."""
    url = (args.url or env.get(URL_VARIABLE, "") or PUBLIC_RELAY).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InstallError(f"the gateway URL must be an http:// or https:// URL with a host, not {url!r}")
    try:
        parse_base_url(url)  # http:// to another machine: the server would refuse it at every call
    except ValueError as exc:
        raise InstallError(str(exc)) from None
    token, source = _token(args, env, stdin) if ask_token else (None, "not asked")
    if token is not None:
        # Refused in the words of where it came from (the server would name its variable).
        refusal = token_refusal(token, TOKEN_VARIABLE if source == TOKEN_VARIABLE else f"the token from {source}")
        if refusal is not None:
            raise InstallError(refusal + "; nothing was changed")
    try:
        # The server's own reading of these settings, so anything it would refuse is refused here.
        from_env({URL_VARIABLE: url, **({TOKEN_VARIABLE: token} if token else {})})
    except ConfigError as exc:
        raise InstallError(str(exc)) from None
    return url, token, source


def _launch() -> tuple[str, list[str]]:
    """This interpreter with `-m mcp_server`, checked as a client starts it."""
    command, args = sys.executable, ["-m", "mcp_server"]
    if not command or not os.path.isabs(command):
        raise InstallError("cannot tell which Python is running this; run fairwins-mcp from an installed package")
    probe = "import mcp_server, sys; sys.stdout.write(mcp_server.__version__)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    # A client starts the server from its own directory with its own environment: no PYTHONPATH, no
    # checkout in the working directory. The filesystem root stands in for that directory.
    neutral = pathlib.Path(command).anchor or "/"
    try:
        done = subprocess.run(
            [command, "-c", probe], cwd=neutral, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{command} could not be started to check the package: {exc}") from None
    if done.returncode != 0 or done.stdout != __version__:
        raise InstallError(
            f"{command} -m mcp_server would not start fairwins-mcp {__version__} outside this directory "
            f"(it {'found version ' + done.stdout if done.returncode == 0 else 'cannot import mcp_server'}); "
            "install the package first (pip install . or pipx install .), then run its fairwins-mcp install"
        )
    return command, args


def _shown(entry: dict[str, Any], token: str | None) -> dict[str, Any]:
    if not token:
        return entry
    return {**entry, "env": {**entry["env"], TOKEN_VARIABLE: redact(token)}}


@dataclass(frozen=True)
class _Existing:
    """The config file as found: real path (through links), bytes, status."""

    target: pathlib.Path
    data: bytes | None  # None: no such file
    status: os.stat_result | None


if sys.platform == "win32":
    _BINARY: Final = os.O_BINARY  # bytes as they are: no "\r\n" turned into "\n" on the way in
    _NONBLOCK: Final = 0  # a FIFO cannot sit at a path there
else:
    _BINARY: Final = 0
    _NONBLOCK: Final = os.O_NONBLOCK


class ChangedMeanwhile(InstallError):
    """The file changed (Desktop saved it) after it was read: nothing written."""


def _read(path: pathlib.Path) -> _Existing:
    """The file at `path`, through symlinks; refused if not safely replaceable."""
    # Written through the link: replacing a symlink by a regular file would cut it from the file it
    # points at (a dotfiles repository, a synced folder), which Desktop would then no longer see.
    target = pathlib.Path(os.path.realpath(path))
    try:
        # Non-blocking, so a FIFO put where the file should be is refused instead of waited on.
        fd = os.open(target, os.O_RDONLY | _NONBLOCK | _BINARY)
    except FileNotFoundError:
        return _Existing(target, None, None)
    with os.fdopen(fd, "rb") as fh:
        status = os.fstat(fh.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise InstallError(f"{target} is not a regular file; nothing was changed")
        if status.st_nlink > 1:
            # os.replace would give this name a new file and leave the other names on the old one.
            raise InstallError(
                f"{target} has {status.st_nlink} hard links, which replacing it would split; "
                "nothing was changed (make it a single file, or a symlink, and run this again)"
            )
        return _Existing(target, fh.read(), status)


def _mode(found: _Existing, holds_token: bool) -> int:
    """The new file's mode: the old one's or 0600, never others' with a token."""
    mode = stat.S_IMODE(found.status.st_mode) if found.status else 0o600
    return mode & ~0o077 if holds_token else mode


def _write(path: pathlib.Path, found: _Existing, data: bytes, mode: int) -> pathlib.Path | None:
    """Atomically replace the file `found` with `data`, backing up its bytes.

    `path` may be a link to it. The new file is written beside the target, with its mode and owner,
    and renamed over it, so a reader sees the old file or the new, never a part; if the file
    changed since it was read (Desktop saves its settings there), nothing is written.
    """
    target = found.target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    backup = None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.chmod(temporary, mode)
            _keep_owner(fh.fileno(), found.status)
            os.fsync(fh.fileno())
        now = _read(path)
        if (now.target, now.data) != (target, found.data):
            raise ChangedMeanwhile(f"{target} changed while this ran; nothing was changed, run this again")
        if found.data is not None:
            backup = _backup(path, found.data, found.status)
        os.replace(temporary, target)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        if backup:
            backup.unlink(missing_ok=True)
        raise
    _sync_directory(target.parent)
    return backup


def _keep_owner(fd: int, owner: os.stat_result | None) -> None:
    """Keep a member's file theirs under sudo, so their Desktop can read it.

    Windows has no owner ids to give back: a file written there belongs to whoever ran this.
    """
    if sys.platform != "win32" and owner is not None and os.geteuid() == 0:
        os.fchown(fd, owner.st_uid, owner.st_gid)


def _backup(path: pathlib.Path, data: bytes, owner: os.stat_result | None) -> pathlib.Path:
    """The old bytes beside `path`, for the file's owner only.

    `path` is the name the member knows; the backup may hold tokens.
    """
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    backup = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while True:
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o600)
            break
        except FileExistsError:
            n += 1
            backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    with os.fdopen(fd, "wb") as fh:
        _keep_owner(fh.fileno(), owner)
        fh.write(data)
    return backup


def _sync_directory(directory: pathlib.Path) -> None:
    """Make the rename durable (POSIX), where the directory can be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _merged(path: pathlib.Path, name: str, entry: dict[str, Any], force: bool) -> tuple[_Existing, Merge]:
    """The file as it is and `entry` merged in; InstallError if it must not."""
    found = _read(path)
    existing = None
    if found.data is not None:
        try:
            existing = found.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InstallError(
                f"{path} is not UTF-8 text (byte offset {exc.start}), as Claude Desktop reads it; {FIX_IT}"
            ) from None
    return found, merge(existing, name, entry, force=force, where=str(path))


@contextmanager
def _locked(target: pathlib.Path) -> Iterator[None]:
    """Hold a lock file `.<name>.lock` by `target`: one install at a time.

    Made with O_CREAT | O_EXCL, which creates a file only when none is there, atomically, on every
    platform (POSIX, and CREATE_NEW on Windows): no fcntl, no msvcrt. It holds this process's id, for
    whoever finds one left behind by an install that was killed.
    """
    lock = target.with_name(f".{target.name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, 0o600)
            break
        except FileExistsError:
            if time.monotonic() >= deadline:
                raise InstallError(
                    f"{lock} says another fairwins-mcp install is writing {target.name}, and it still did after "
                    f"{LOCK_WAIT:g} s; nothing was changed. If no install is running, delete {lock} and run this "
                    "again"
                ) from None
            time.sleep(LOCK_POLL)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(f"{os.getpid()}\n".encode())
        yield
    finally:
        lock.unlink(missing_ok=True)


def _desktop(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    url, token, source = _settings(args, os.environ, sys.stdin)
    path = args.config or pathlib.Path(str(desktop_config_path(sys.platform, os.environ, pathlib.Path.home())))
    command, launch_args = _launch()
    entry = server_entry(command, launch_args, url, token)
    if args.print:
        out.write(json.dumps({"mcpServers": {args.name: _shown(entry, token)}}, indent=2) + "\n")
        err.write(
            f"(not written; fairwins-mcp install claude-desktop writes it into {path}"
            + (f"; {TOKEN_VARIABLE} is shown redacted: the real entry holds the whole token)\n" if token else ")\n")
        )
        return 0
    # Another install (of another name, say) holds the lock while it reads, merges and replaces the
    # file, so neither replaces the other's entry; Claude Desktop, which takes no lock, saving in
    # between is seen (_write) and the merge done again on what it saved.
    with _locked(pathlib.Path(os.path.realpath(path))):
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            found, result = _merged(path, args.name, entry, args.force)
            if result.outcome == "unchanged":
                break
            try:
                data = result.text.encode("utf-8")
            except UnicodeEncodeError:  # only our own entry can hold what UTF-8 cannot: a path in another encoding
                raise InstallError(
                    f"{command} cannot be written in UTF-8, as Claude Desktop reads its config"
                ) from None
            mode = _mode(found, bool(token))
            try:
                backup = _write(path, found, data, mode)
                break
            except ChangedMeanwhile:
                if attempt == WRITE_ATTEMPTS:
                    raise
    linked = f" (a symlink to {found.target}, written through it)" if path.is_symlink() else ""
    _line(out, "config", str(path) + ("" if found.data is not None else " (new file)") + linked)
    if result.outcome == "unchanged":
        _line(out, "server", f'"{args.name}" is already installed exactly so: nothing changed')
        return 0
    what = "replaced (--force; it differed in " + ", ".join(result.differences) + ")"
    _line(
        out,
        "server",
        f'"{args.name}" {"added" if result.outcome == "added" else what}: {shlex.join([command, *launch_args])}',
    )
    _line(out, "gateway", url)
    if token:
        _line(out, "token", f"{redact(token)} (from {source}), kept in plain text in that file, readable by you only")
    else:
        _line(out, "token", f"none ({source}): the public tools only")
    if found.status and mode != stat.S_IMODE(found.status.st_mode):
        _line(out, "mode", f"{stat.S_IMODE(found.status.st_mode):04o} -> {mode:04o}: the file now holds your token")
    kept = f"{len(result.others)} other server(s) ({', '.join(result.others)}) and " if result.others else ""
    if found.data is not None:
        _line(out, "kept", f"{kept}every other byte of the file")
    if result.bom_dropped:
        _line(out, "note", "the byte-order mark at the start of the file was dropped: Claude Desktop cannot read it")
    if backup:
        _line(out, "backup", str(backup))
    out.write("Restart Claude Desktop (quit it fully) to load the server.\n")
    return 0


def _printable(argv: list[str], *, expand: bool) -> str:
    """The command line to paste.

    With `expand`, the member's shell puts their token in from their own environment; without, the
    reference reaches Claude Code as written (it expands `${VAR}` itself).
    """
    sentinel = "FAIRWINS-TOKEN-REFERENCE"
    marked = [a.replace(TOKEN_REFERENCE, sentinel) if expand else a for a in argv]
    if os.name == "nt":
        return subprocess.list2cmdline(marked).replace(sentinel, f"%{TOKEN_VARIABLE}%")
    return shlex.join(marked).replace(f"{TOKEN_VARIABLE}={sentinel}", f'"{TOKEN_VARIABLE}=${TOKEN_VARIABLE}"')


def _claude_code(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    url, token, source = _settings(args, os.environ, sys.stdin, ask_token=args.scope != "project")
    if args.scope == "project":
        # .mcp.json is shared with everyone who has the project: the portable command, and the token
        # as a reference Claude Code fills from each member's own environment.
        command, launch_args = "fairwins-mcp", list[str]()
        entry = server_entry(command, launch_args, url, TOKEN_REFERENCE)
    else:
        command, launch_args = _launch()
        entry = server_entry(command, launch_args, url, token)
    claude = shutil.which("claude")
    if args.print or not claude:
        printed = claude_code_argv("claude", args.scope, args.name, entry, token_value=TOKEN_REFERENCE)
        if not claude and not args.print:
            out.write("Claude Code (claude) is not on PATH; where it is, run:\n")
        out.write(_printable(printed, expand=bool(token) and args.scope != "project") + "\n")
        if token and args.scope != "project":
            out.write(f"with your token in {TOKEN_VARIABLE} (it is not printed here: {redact(token)}).\n")
        return 0
    if args.force:
        removed = _run([claude, "mcp", "remove", "--scope", args.scope, args.name], token)
        if removed.returncode == 0:
            _line(out, "removed", f'the previous "{args.name}" ({args.scope} scope), as --force asked')
    done = _run(claude_code_argv(claude, args.scope, args.name, entry), token)
    out.write(done.stdout)
    err.write(done.stderr)
    if done.returncode != 0:
        if "already exists" in done.stdout + done.stderr:
            err.write(f'fairwins-mcp: "{args.name}" is already in Claude Code; --force replaces it\n')
        return 1
    _line(out, "server", f'"{args.name}" ({args.scope} scope): {shlex.join([command, *launch_args])}')
    _line(out, "gateway", url)
    if args.scope == "project":
        _line(out, "token", f"read from {TOKEN_VARIABLE} in Claude Code's environment; never written into .mcp.json")
    elif token:
        _line(
            out, "token", f"{redact(token)} (from {source}), kept by Claude Code in its configuration (~/.claude.json)"
        )
    else:
        _line(out, "token", f"none ({source}): the public tools only")
    out.write("`claude mcp list` shows whether it connects.\n")
    return 0


def _run(argv: list[str], token: str | None) -> subprocess.CompletedProcess[str]:
    """`claude …`, its output with the token redacted should it ever repeat it."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CLAUDE_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{argv[0]} {argv[1]} {argv[2]} could not run: {exc}") from None
    if token:
        done.stdout = done.stdout.replace(token, redact(token))
        done.stderr = done.stderr.replace(token, redact(token))
    return done


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        if args.client == "claude-desktop":
            return _desktop(args, sys.stdout, sys.stderr)
        return _claude_code(args, sys.stdout, sys.stderr)
    except InstallError as exc:
        sys.stderr.write(f"fairwins-mcp install: {exc}\n")
        return 1
    except OSError as exc:  # a configuration that cannot be read or written: say which, and why
        sys.stderr.write(
            f"fairwins-mcp install: {exc.filename or 'a file'}: {exc.strerror or exc}; nothing was changed\n"
        )
        return 1
