"""The source's shape: docstring first lines and lines of code in a tree.

python3 -m bench.source [DIR ...]   (default: mcp_server)
"""

from __future__ import annotations

import ast
import io
import pathlib
import statistics
import sys
import tokenize
from collections.abc import Sequence

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_NOT_CODE = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def _docstring(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def measure(path: pathlib.Path) -> tuple[list[int], int, int]:
    """A file's docstring first-line lengths, its lines, and its lines of code."""
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    firsts: list[int] = []
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        expr = _docstring(node) if isinstance(node, _DOCUMENTED) else None
        if expr is not None:
            doc = ast.get_docstring(node, clean=True) or ""  # type: ignore[arg-type]
            firsts.append(len(doc.strip().splitlines()[0]) if doc.strip() else 0)
            doc_lines.update(range(expr.lineno, (expr.end_lineno or expr.lineno) + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in _NOT_CODE:
            code.update(line for line in range(tok.start[0], tok.end[0] + 1) if line not in doc_lines)
    return firsts, src.count("\n"), len(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the counts for each tree named."""
    for root in argv or sys.argv[1:] or ["mcp_server"]:
        firsts: list[int] = []
        lines = code = 0
        for path in sorted(pathlib.Path(root).rglob("*.py")):
            f, n, c = measure(path)
            firsts += f
            lines += n
            code += c
        over = sum(n > 72 for n in firsts)
        print(
            f"{root}: {lines:,} lines, {code:,} of code; {len(firsts)} docstrings, first line median "
            f"{statistics.median(firsts):g} chars, over 72: {over} ({100 * over / len(firsts):.0f} %), "
            f"over 100: {sum(n > 100 for n in firsts)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
