"""Invariants read from the source itself (an AST scan): standard library only, no cross-imports, no print."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# package name → its directory
PACKAGES = {"mcp_server": ROOT / "mcp_server", "assistant_contract": ROOT / "assistant_contract"}


def modules(package: str) -> list[pathlib.Path]:
    found = sorted(PACKAGES[package].rglob("*.py"))
    assert found, f"no modules found in {package}"
    return found


def imported_roots(path: pathlib.Path) -> set[str]:
    """The top-level names of every absolute import in a module (relative imports stay inside)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            roots.add("__import__")  # dynamic imports would escape this scan
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module":
            roots.add("importlib.import_module")
    return roots


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_standard_library_and_itself(package: str) -> None:
    allowed = set(sys.stdlib_module_names) | {package, "__future__"}
    for path in modules(package):
        foreign = imported_roots(path) - allowed
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


@pytest.mark.parametrize(
    ("package", "other"), [("mcp_server", "assistant_contract"), ("assistant_contract", "mcp_server")]
)
def test_neither_package_imports_the_other(package: str, other: str) -> None:
    for path in modules(package):
        assert other not in imported_roots(path), f"{path.relative_to(ROOT)} imports {other}"


def test_the_scan_sees_an_import_it_must_refuse(tmp_path: pathlib.Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import requests\nfrom assistant_contract import ROUTES\nfrom . import sibling\n", encoding="utf-8"
    )
    assert imported_roots(sample) == {"requests", "assistant_contract"}


def print_calls(path: pathlib.Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


def test_mcp_server_never_calls_print() -> None:
    # stdout is the wire in stdio mode (docs/style.md, habit 7).
    for path in modules("mcp_server"):
        assert not print_calls(path), f"{path.relative_to(ROOT)} calls print() on lines {print_calls(path)}"


def stdout_writes(path: pathlib.Path) -> list[int]:
    """Lines that write to sys.stdout directly (`sys.stdout.write`, `sys.stdout.buffer`, `sys.__stdout__`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name) or node.value.id != "sys":
            continue
        if node.attr == "__stdout__":
            lines.append(node.lineno)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("write", "writelines", "buffer")
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "stdout"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "sys"
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_stdio_transport_writes_to_sys_stdout() -> None:
    # (`check` may hand sys.stdout to the doctor as its report stream: that is not stdio mode.)
    for path in modules("mcp_server"):
        if path.name != "stdio.py":
            assert not stdout_writes(path), f"{path.relative_to(ROOT)} writes to sys.stdout on {stdout_writes(path)}"


def test_the_print_and_stdout_scans_find_what_they_look_for(tmp_path: pathlib.Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import sys\ndef f():\n    print('x')\n    sys.stdout.write('y')\n    report(sys.stdout)\n")
    assert print_calls(sample) == [3]
    assert stdout_writes(sample) == [4]
