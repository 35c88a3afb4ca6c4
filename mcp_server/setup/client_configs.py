"""Where MCP clients keep their server lists, and how to merge an entry.

The merge is text in, text out; `fairwins-mcp install` (setup/install.py) reads and writes the
files. Serving never loads this module.
"""

from __future__ import annotations

import json
import pathlib
import re
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
FIX_IT: Final = "nothing was changed. Fix it or move it aside, then run this again"


class InstallError(Exception):
    """Nothing was changed, for the reason in the message (a sentence or two)."""


def desktop_config_path(platform: str, env: Mapping[str, str], home: pathlib.PurePath) -> pathlib.PurePath:
    """Claude Desktop's config file on `platform` (a sys.platform value)."""
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
    # Linux: community builds, at Electron's appData. The XDG base directory spec: a relative path
    # is invalid and is ignored.
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = pathlib.PurePosixPath(xdg) if xdg.startswith("/") else home / ".config"
    return base / "Claude" / CONFIG_NAME


def server_entry(command: str, args: Sequence[str], url: str, token: str | None) -> dict[str, Any]:
    """This server as Claude's `mcpServers` value: stdio, by absolute path."""
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
    bom_dropped: bool = False  # the file began with a byte-order mark, which is not in the new text


def differences(old: Any, new: dict[str, Any]) -> tuple[str, ...]:
    """What differs between two entries, by name only (a value may be a token)."""
    if not isinstance(old, dict):
        return ("the whole entry",)
    found = [key for key in sorted(set(old) | set(new)) if key != "env" and old.get(key) != new.get(key)]
    raw_env = old.get("env")
    old_env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    new_env: dict[str, Any] = new.get("env", {})
    found += [f"env {name}" for name in sorted(set(old_env) | set(new_env)) if old_env.get(name) != new_env.get(name)]
    return tuple(found)


# --- reading a config as Claude Desktop's JSON.parse reads it, keeping where everything is ----------
#
# The file is edited, not rewritten: the new text is the old text with one value replaced (our own
# entry) or one member inserted (our entry, or an "mcpServers" holding it). Re-serialising a parsed
# config is not safe: Python writes 1e999 back as `Infinity` and NaN as `NaN`, which JSON.parse
# refuses (and with it every server in the file); a 20-digit integer or a duplicate key would be
# rewritten too. So the text is checked against JSON's own grammar (RFC 8259, which is what
# JSON.parse accepts), not Python's (which also takes NaN and Infinity), and everything outside our
# entry stays byte for byte. The one exception is a leading byte-order mark: JSON.parse refuses it,
# it carries nothing, and dropping it is what makes such a file readable.

_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
# Possessive: an unterminated string fails in linear time.
_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+"')
_LITERALS: Final = ("true", "false", "null")
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
BOM: Final = "\ufeff"
_NO_VALUE: Final = {
    "": "the text ends where a value was expected",
    '"': "a string is not closed, or holds a control character or an unknown escape",
    "-": "a number is malformed (JSON has no NaN or Infinity)",
    "?": "a value was expected (JSON has no NaN, Infinity, comments, single quotes or trailing commas)",
}


def _skip(text: str, pos: int) -> int:
    """The position after JSON's whitespace (space, tab, LF, CR) from `pos`."""
    found = _WHITESPACE.match(text, pos)
    return found.end() if found else pos


class JsonSyntaxError(ValueError):
    """Not JSON that JSON.parse reads.

    `position` is where, the message says what (never the text itself).
    """

    def __init__(self, position: int, why: str) -> None:
        super().__init__(why)
        self.position = position


@dataclass(frozen=True)
class Span:
    """A value's place in the text: [start, end), kind, members (two levels)."""

    start: int
    end: int
    kind: str  # "object" | "array" | "string" | "number" | "literal"
    members: tuple[Member, ...] = ()


@dataclass(frozen=True)
class Member:
    key: str  # decoded: "mcp\u0053ervers" is "mcpServers", as JSON.parse reads it
    key_start: int  # the key's opening quote
    value: Span


class _Open:
    """An object or array whose end has not been read yet."""

    __slots__ = ("closer", "key", "key_start", "kind", "members", "record", "start")

    def __init__(self, start: int, kind: str, record: bool) -> None:
        self.start, self.kind, self.record = start, kind, record
        self.closer = "}" if kind == "object" else "]"
        self.members: list[Member] = []
        self.key, self.key_start = "", start


def _key(text: str, pos: int, frame: _Open) -> int:
    """Read `"name" :` at `pos` into `frame`; the position after the colon."""
    found = _STRING.match(text, pos)
    if not found:
        raise JsonSyntaxError(pos, "a member's name in double quotes was expected")
    if frame.record:
        frame.key, frame.key_start = str(json.loads(found.group())), pos
    pos = _skip(text, found.end())
    if not text.startswith(":", pos):
        raise JsonSyntaxError(pos, "a colon after the member's name was expected")
    return pos + 1


def scan(text: str) -> Span:
    """The one JSON value `text` holds; JsonSyntaxError where it breaks it.

    Iterative, so any depth of nesting is read (JSON.parse reads it too) and the answer is total.
    """
    stack: list[_Open] = []
    done: Span | None = None
    pos = 0
    while True:
        if done is None:  # a value starts here
            pos = _skip(text, pos)
            char = text[pos : pos + 1]
            if char in ("{", "["):
                frame = _Open(pos, "object" if char == "{" else "array", record=len(stack) < 2)
                stack.append(frame)
                pos = _skip(text, pos + 1)
                if text.startswith(frame.closer, pos):
                    stack.pop()
                    done, pos = Span(frame.start, pos + 1, frame.kind), pos + 1
                elif frame.kind == "object":
                    pos = _key(text, pos, frame)
                continue
            done = _scalar(text, pos, char)
            pos = done.end
            continue
        if not stack:
            pos = _skip(text, pos)
            if pos != len(text):
                raise JsonSyntaxError(pos, "something follows the end of the JSON value")
            return done
        frame = stack[-1]
        if frame.record and frame.kind == "object":
            frame.members.append(Member(frame.key, frame.key_start, done))
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            done = None
            pos = _key(text, _skip(text, pos + 1), frame) if frame.kind == "object" else pos + 1
        elif text.startswith(frame.closer, pos):
            stack.pop()
            done, pos = Span(frame.start, pos + 1, frame.kind, tuple(frame.members)), pos + 1
        else:
            raise JsonSyntaxError(pos, f"a comma or {frame.closer!r} was expected")


def _scalar(text: str, pos: int, char: str) -> Span:
    """The string, number or literal at `pos`, whose first character is `char`."""
    if char == '"':
        found, kind = _STRING.match(text, pos), "string"
    elif char == "-" or "0" <= char <= "9":
        found, kind = _NUMBER.match(text, pos), "number"
    else:
        end = next((pos + len(w) for w in _LITERALS if text.startswith(w, pos)), None)
        if end is not None:
            return Span(pos, end, "literal")
        found, kind = None, "literal"
    if not found:
        raise JsonSyntaxError(pos, _NO_VALUE.get(char, _NO_VALUE["?"]))
    return Span(pos, found.end(), kind)


def _line_col(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    return f"line {line}, column {position - text.rfind(chr(10), 0, position)}"


def _last(members: Sequence[Member], key: str) -> Member | None:
    """The member JSON.parse keeps: of duplicate keys, the last."""
    return next((m for m in reversed(members) if m.key == key), None)


def _once(text: str, members: Sequence[Member], key: str, what: str, where: str) -> None:
    """InstallError naming the lines when `key` is a member more than once.

    JSON.parse keeps the last of repeated names, so whichever copy this wrote into, the other
    would be lost to Claude Desktop or come back on the next edit by hand; the member decides.
    """
    found = [m for m in members if m.key == key]
    if len(found) > 1:
        lines = " and ".join(f"line {text.count(chr(10), 0, m.key_start) + 1}" for m in found)
        raise InstallError(
            f"{where} has {what} {len(found)} times (at {lines}); Claude Desktop reads only the last, so merging "
            f"would hide or drop the others; {FIX_IT}"
        )


def _gap(text: str, key_start: int) -> str:
    """The whitespace before a member's name: how this file separates members."""
    start = key_start
    while start > 0 and text[start - 1] in " \t\n\r":
        start -= 1
    return text[start:key_start]


def _line_indent(text: str, position: int) -> str:
    """The spaces and tabs that begin the line holding `position`."""
    line = text[text.rfind("\n", 0, position) + 1 : position]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _unit(text: str, root: Span) -> str:
    """The file's indentation step: its first member's, else two spaces."""
    if root.members:
        gap = _gap(text, root.members[0].key_start)
        if "\n" in gap and (step := gap.rsplit("\n", 1)[1]):
            return step
    return "  "


def _json(value: Any, *, indent: str | None, base: str, newline: str) -> str:
    """`value` written as the file around it is.

    Across lines from `base` by `indent`, or on one line (None).
    """
    if indent is None:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=indent, ensure_ascii=False).replace("\n", newline + base)


def _inserted(text: str, into: Span, key: str, value: Any, unit: str, *, spread: bool) -> str:
    """`text` with `"key": value` last in the object at `into`, all else kept.

    Written as the members around it are: on lines of their own, lined up, or all on one line.
    `spread` says which for an empty object, which has no members to follow.
    """
    newline = "\r\n" if "\r\n" in text else "\n"
    name = json.dumps(key, ensure_ascii=False) + ": "
    if not into.members:
        at = into.start + 1
        if not spread:
            return text[:at] + name + _json(value, indent=None, base="", newline=newline) + text[at:]
        base = _line_indent(text, into.start)
        member = name + _json(value, indent=unit, base=base + unit, newline=newline)
        return text[:at] + newline + base + unit + member + newline + base + text[at:]
    last = into.members[-1]
    gap = _gap(text, last.key_start)
    if "\n" in gap:  # the gap is repeated, so the new member lines up with the last
        member = name + _json(value, indent=unit, base=gap.rsplit("\n", 1)[1], newline=newline)
    else:
        gap = gap if len(into.members) > 1 else " "  # the gap after `{` is no separator
        member = name + _json(value, indent=None, base="", newline=newline)
    return text[: last.value.end] + "," + gap + member + text[last.value.end :]


def _replaced(text: str, old: Member, value: Any, unit: str) -> str:
    """`text` with `old`'s value replaced by `value`, every other byte kept."""
    multiline = "\n" in _gap(text, old.key_start)
    newline = "\r\n" if "\r\n" in text else "\n"
    new = _json(value, indent=unit if multiline else None, base=_line_indent(text, old.key_start), newline=newline)
    return text[: old.value.start] + new + text[old.value.end :]


def _decoded(text: str) -> Any:
    """A checked JSON value as Python reads it; None if too deep for Python."""
    try:
        return json.loads(text)
    except RecursionError:
        return None


def merge(existing: str | None, name: str, entry: dict[str, Any], *, force: bool, where: str) -> Merge:
    """The config with `entry` as mcpServers[name], every other byte kept.

    InstallError if it must not be merged (a name repeated on the path written: `_once`).
    """
    original = existing or ""
    text = original.removeprefix(BOM)
    bom = text != original
    if _skip(text, 0) == len(text):  # no file, or only whitespace: nothing to keep
        fresh = json.dumps({"mcpServers": {name: entry}}, indent=2, ensure_ascii=False) + "\n"
        return Merge(fresh, "added", (), bom_dropped=bom)
    try:
        root = scan(text)
    except JsonSyntaxError as exc:
        # The position and the rule only: the file may hold other servers' secrets.
        raise InstallError(
            f"{where} is not valid JSON: {exc} at {_line_col(text, exc.position)}. Claude Desktop cannot read it "
            f"either; {FIX_IT}"
        ) from None
    if root.kind != "object":
        raise InstallError(f"{where} does not hold a JSON object; {FIX_IT}")
    unit = _unit(text, root)
    spread = "\n" in text[root.start : root.end] or not root.members  # `{}` opens onto lines
    _once(text, root.members, "mcpServers", '"mcpServers"', where)
    servers = _last(root.members, "mcpServers")
    if servers is None:
        return Merge(
            _inserted(text, root, "mcpServers", {name: entry}, unit, spread=spread), "added", (), bom_dropped=bom
        )
    if servers.value.kind != "object":
        raise InstallError(f'{where} holds an "mcpServers" that is not an object; {FIX_IT}')
    _once(text, servers.value.members, name, f'the server "{name}" in "mcpServers"', where)
    others = tuple(dict.fromkeys(m.key for m in servers.value.members if m.key != name))
    mine = _last(servers.value.members, name)
    if mine is None:
        return Merge(_inserted(text, servers.value, name, entry, unit, spread=spread), "added", others, bom_dropped=bom)
    old = _decoded(text[mine.value.start : mine.value.end])
    if old == entry:
        return Merge(original, "unchanged", others)
    changed = differences(old, entry)
    if not force:
        raise InstallError(
            f'{where} already has a different server named "{name}" (it differs in {", ".join(changed)}); nothing '
            f"was changed. Run again with --force to replace it (a backup is kept), or choose another --name."
        )
    return Merge(_replaced(text, mine, entry, unit), "replaced", others, changed, bom_dropped=bom)


def claude_code_argv(
    claude: str, scope: str, name: str, entry: dict[str, Any], *, token_value: str | None = None
) -> list[str]:
    """`claude mcp add` for `entry`; `token_value` stands in for the token."""
    argv = [claude, "mcp", "add", "--scope", scope, "--transport", "stdio", name]
    for key, value in entry["env"].items():
        shown = token_value if key == TOKEN_VARIABLE and token_value is not None else value
        argv += ["-e", f"{key}={shown}"]
    return [*argv, "--", entry["command"], *entry["args"]]
