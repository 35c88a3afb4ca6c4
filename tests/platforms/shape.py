"""Run a Python program under a standard library shaped like CPython's (3.11 to 3.13) on macOS or Windows.

    python tests/platforms/shape.py darwin|win32 -m MODULE [ARG ...]
    python tests/platforms/shape.py darwin|win32 SCRIPT.py [ARG ...]

On Linux, before the program imports anything of its own:

- every name typeshed says the platform lacks is taken out of its module, and every module it
  lacks refuses to import (shapes.json, generated from typeshed by typeshed_shapes.py), for the
  modules already loaded and for each one loaded later;
- `sys.platform` says the platform's name, so code behind `sys.platform` checks takes that
  platform's branch;
- on Windows, `select.select` refuses what is not a socket ("WinError 10038") as Windows' does,
  and `socket.socketpair` is the standard library's own fallback over a loopback TCP connection,
  as on Windows, where the C library has none;
- on Windows, what our code calls that only Windows has is there, doing on Linux what it would do
  there to the bytes: `msvcrt.setmode` (a pipe's mode; this kernel has no text mode to undo)
  and `os.O_BINARY` (0, for the same reason).

A few standard library modules choose their own platform branch when imported, and that branch
needs the real system (ssl's Windows certificate store, subprocess's Windows process calls,
asyncio's proactor loop over _overlapped): they
are imported before the switch, as Linux builds them, and keep the unshaped modules they hold
(the shape replaces each module in sys.modules by a stripped copy). This tier tests our code, not
CPython's.

What it cannot show: pipe sizes and modes, how signals are (or are not) delivered, file system
rules (case, reserved names, locking), kqueue (macOS's selector here is poll), and anything the
kernel itself does differently. docs/platforms.md says so too.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import pathlib
import runpy
import stat
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

SHAPES = pathlib.Path(__file__).with_name("shapes.json")
# Imported on Linux's branch before sys.platform changes (see the module docstring).
# Loaded again, from the shaped modules, when next imported: they choose by what they find then
# (selectors its DefaultSelector: kqueue on macOS, which Linux has not, so poll; select on Windows).
RELOADED = ("selectors",)
NATIVE_FIRST = ("socket", "ssl", "subprocess", "ctypes", "ctypes.util", "uuid", "platform", "asyncio")


class _Shaper(importlib.abc.MetaPathFinder):
    """Refuses the modules the platform lacks; strips what it lacks from each module as it loads."""

    def __init__(self, absent_modules: set[str], absent_names: dict[str, list[str]]) -> None:
        self.absent_modules = absent_modules
        self.absent_names = absent_names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.absent_modules:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        if fullname not in self.absent_names:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None and spec.loader is not None:
                spec.loader = _StrippingLoader(spec.loader, self.absent_names[fullname])
                return spec
        return None


class _StrippingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, names: list[str]) -> None:
        self.inner = inner
        self.names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _strip(module, self.names)


def _strip(module: types.ModuleType, names: list[str]) -> None:
    for name in names:
        module.__dict__.pop(name, None)


class _SocketOnlySelect:
    """Windows' select(): sockets only. A callable object, not a function, so that selectors'
    `_select = select.select` class attribute stays unbound, as the built-in is."""

    def __init__(self, platform_select: Callable[..., Any]) -> None:
        self.platform_select = platform_select

    def __call__(self, rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        for item in (*rlist, *wlist, *xlist):
            fd = item if isinstance(item, int) else item.fileno()
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise OSError(10038, "An operation was attempted on something that is not a socket")
        return self.platform_select(rlist, wlist, xlist, timeout)


def _msvcrt() -> types.ModuleType:
    module = types.ModuleType("msvcrt", "Windows' C runtime calls our code uses, as they act on Linux's bytes.")
    modes: dict[int, int] = {}
    text, binary = 0x4000, 0x8000  # <fcntl.h> of the Windows C runtime: _O_TEXT, _O_BINARY

    def setmode(fd: int, flags: int) -> int:
        os.fstat(fd)  # OSError for a descriptor that is not open, as on Windows
        if flags not in (text, binary, 0):
            raise ValueError("invalid mode")
        previous = modes.get(fd, text)
        modes[fd] = flags or binary
        return previous

    module.setmode = setmode  # type: ignore[attr-defined]
    return module


def enter(platform: str) -> None:
    """Shape this process's standard library like CPython 3.11's on `platform` (darwin or win32)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    table = json.loads(SHAPES.read_text(encoding="utf-8"))[version][platform]
    absent_modules = set(table["absent_modules"])
    absent_names: dict[str, list[str]] = table["absent_names"]
    import _socket

    if platform == "win32":
        # Before socket is imported: it then defines socketpair() as Windows' CPython does.
        del _socket.socketpair
    for name in NATIVE_FIRST:
        __import__(name)
    # Every module loaded so far is replaced, for whatever imports it from now on, by a copy
    # without what the platform lacks. The modules loaded above keep the originals they hold.
    for name in RELOADED:
        sys.modules.pop(name, None)
    _strip(sys, absent_names.get("sys", []))  # sys itself stays the one module it is
    for name, module in list(sys.modules.items()):
        if name in absent_names and module is not None and name != "sys":
            shaped = types.ModuleType(module.__name__, module.__doc__)
            shaped.__dict__.update(module.__dict__)
            _strip(shaped, absent_names[name])
            sys.modules[name] = shaped
    if platform == "win32":
        import select

        select.select = _SocketOnlySelect(select.select)  # type: ignore[assignment]
    for name in absent_modules:
        if name in sys.modules and name not in ("posix", "_posixsubprocess"):  # Linux's os is built on these
            sys.modules[name] = None  # type: ignore[assignment]
    sys.meta_path.insert(0, _Shaper(absent_modules, absent_names))
    sys.platform = platform
    if platform == "win32":
        sys.modules["msvcrt"] = _msvcrt()
        import os as shaped_os

        shaped_os.O_BINARY = 0  # type: ignore[attr-defined]


def main(argv: Sequence[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("darwin", "win32"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        raise SystemExit(2)
    platform, rest = argv[0], list(argv[1:])
    enter(platform)
    if rest[0] == "-m":
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = rest
        sys.path[0] = os.path.dirname(os.path.abspath(rest[0]))
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
