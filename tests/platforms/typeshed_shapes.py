"""What CPython's standard library (3.11 to 3.13) lacks on macOS and on Windows next to Linux, read from typeshed.

typeshed's stubs say where each name exists with `if sys.platform …` and `if sys.version_info …`
blocks, the same conditions mypy narrows. This evaluates them for each Python version on each
platform and writes tests/platforms/shapes.json: for darwin and win32, the modules that do not exist there
and, module by module, the public names Linux has and that platform does not. The stubs read are
the ones bundled with the pinned mypy (the dev tool that checks the same conditions in make lint),
so the shapes and the type check never disagree.

    python -m tests.platforms.typeshed_shapes           # write shapes.json
    python -m tests.platforms.typeshed_shapes --check   # fail, with the difference, if it is stale
"""

from __future__ import annotations

import ast
import difflib
import json
import pathlib
import sys
from collections.abc import Iterable, Sequence

import mypy

VERSIONS = ((3, 11), (3, 12), (3, 13))  # what members' installers ship: python.org, Homebrew, the Store
BASE = "linux"
PLATFORMS = ("darwin", "win32")
STUBS = pathlib.Path(mypy.__file__).parent / "typeshed" / "stdlib"
OUT = pathlib.Path(__file__).with_name("shapes.json")


def _is_sys_attr(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _constant(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def truth(test: ast.expr, platform: str, python: tuple[int, int]) -> bool | None:
    """The value of a stub's `if` test on `platform` under `python`; None when it is about neither."""
    if isinstance(test, ast.BoolOp):
        values = [truth(v, platform, python) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, platform, python)
        return None if inner is None else not inner
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith":
        if _is_sys_attr(test.func.value, "platform") and len(test.args) == 1:
            prefix = _constant(test.args[0])
            if isinstance(prefix, (str, tuple)):
                return platform.startswith(prefix)
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], _constant(test.comparators[0])
        if _is_sys_attr(test.left, "platform"):
            match op:
                case ast.Eq():
                    return platform == right
                case ast.NotEq():
                    return platform != right
                case ast.In() if isinstance(right, tuple):
                    return platform in right
                case ast.NotIn() if isinstance(right, tuple):
                    return platform not in right
            return None
        if _is_sys_attr(test.left, "version_info") and isinstance(right, tuple):
            match op:
                case ast.GtE():
                    return python >= right
                case ast.Gt():
                    return python > right
                case ast.Lt():
                    return python < right
                case ast.LtE():
                    return python <= right
    return None


def names(body: Iterable[ast.stmt], platform: str, python: tuple[int, int]) -> set[str]:
    """The public names a stub's statements define on `platform` (an undecidable test: both branches)."""
    found: set[str] = set()
    for node in body:
        if isinstance(node, ast.If):
            value = truth(node.test, platform, python)
            if value is not False:
                found |= names(node.body, platform, python)
            if value is not True:
                found |= names(node.orelse, platform, python)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            # In a stub only `import a as a` re-exports: the others are the stub's own helpers.
            found.update(alias.name for alias in node.names if alias.asname == alias.name)
    return {name for name in found if not name.startswith("_")}


def _stubs() -> dict[str, pathlib.Path]:
    modules: dict[str, pathlib.Path] = {}
    for path in sorted(STUBS.rglob("*.pyi")):
        parts = path.relative_to(STUBS).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and parts[0] in sys.stdlib_module_names:
            modules[".".join(parts)] = path
    return modules


def shapes(python: tuple[int, int]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    parsed = {name: ast.parse(path.read_text(encoding="utf-8")).body for name, path in _stubs().items()}
    for platform in PLATFORMS:
        absent_modules: list[str] = []
        absent_names: dict[str, list[str]] = {}
        for module, body in parsed.items():
            on_base, on_platform = names(body, BASE, python), names(body, platform, python)
            if on_base and not on_platform:
                absent_modules.append(module)
            elif on_base - on_platform:
                absent_names[module] = sorted(on_base - on_platform)
        out[platform] = {"absent_modules": sorted(absent_modules), "absent_names": absent_names}
    return out


def render() -> str:
    table: dict[str, object] = {"about": f"generated from typeshed as bundled with mypy {mypy_version()}"}
    for python in VERSIONS:
        table[".".join(map(str, python))] = shapes(python)
    return json.dumps(table, indent=2, ensure_ascii=False) + "\n"


def mypy_version() -> str:
    from mypy.version import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = render()
    if args == ["--check"]:
        old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if old != text:
            sys.stdout.writelines(
                difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(OUT), "typeshed")
            )
            sys.stdout.write("stale: run `python -m tests.platforms.typeshed_shapes`\n")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
