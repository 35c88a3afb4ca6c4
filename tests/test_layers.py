"""The packages' shape: no import loop between any two modules, and the layers docs/architecture.md draws.

`make lint` checks the same rule with import-linter (pyproject.toml, [tool.importlinter]); this test
reads every import itself, in functions and under TYPE_CHECKING too, so a loop fails `make test`
even where the linter is not run, and it checks that the linter's layers are the documented ones.
"""

from __future__ import annotations

import ast
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("mcp_server", "assistant_contract")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """Every module of ours that `name` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module; `from module import name` the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_inside_functions_or_under_type_checking() -> None:
    edges = graph()
    # Package __init__ modules importing their own children is how a package exposes them, not a loop.
    edges = {m: {t for t in ts if not (m in t and t.startswith(m + "."))} for m, ts in edges.items()}
    assert cycles(edges) == []


def test_the_loop_finder_finds_a_loop() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = (c for c in config["contracts"] if c["type"] == "layers")
    assert contract["containers"] == ["mcp_server"]
    return [[part.strip() for part in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def test_every_subpackage_of_mcp_server_is_in_exactly_one_layer_and_holds_code() -> None:
    named = [name for layer in layers() for name in layer]
    assert len(named) == len(set(named))
    on_disk = {p.parent.name for p in (ROOT / "mcp_server").glob("*/__init__.py")}
    assert set(named) == on_disk
    # Nothing but the package's face stays at its top: every module lives in a layer.
    assert {p.name for p in (ROOT / "mcp_server").glob("*.py")} == {"__init__.py", "__main__.py"}


def test_no_module_imports_a_layer_above_its_own() -> None:
    rank = {name: i for i, layer in enumerate(layers()) for name in layer}
    siblings = {name: set(layer) - {name} for layer in layers() for name in layer}

    def layer_of(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "mcp_server" and len(parts) > 1 and parts[1] in rank else None

    wrong = []
    for module, targets in graph().items():
        mine = layer_of(module)
        if mine is None:
            continue
        for target in targets:
            theirs = layer_of(target)
            if theirs is None or theirs == mine:
                continue
            if rank[theirs] < rank[mine] or theirs in siblings[mine]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


@pytest.mark.parametrize("package", PACKAGES)
def test_the_two_packages_never_import_each_other(package: str) -> None:
    other = next(p for p in PACKAGES if p != package)
    crossing = [
        f"{m} -> {t}" for m, ts in graph().items() if m.split(".")[0] == package for t in ts if t.split(".")[0] == other
    ]
    assert crossing == []
