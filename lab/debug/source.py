"""Find breakpoint lines in source files by meaning, not by number.

Role: tests and the ``debug-attach`` e2e scenario put breakpoints in code that keeps changing
(the controller's service sync). A hard-coded line number silently moves to the wrong statement
after the next edit; these helpers find the line from a marker comment or from a function's
qualified name, parsing the file with ``ast`` so the code under debug is never imported here
(``lab/`` must not import ``controller/``).
"""

from __future__ import annotations

import ast
from pathlib import Path


def find_line(path: str | Path, marker: str) -> int:
    """The 1-based number of the only line of ``path`` containing ``marker``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    hits = [i for i, text in enumerate(lines, start=1) if marker in text]
    if len(hits) != 1:
        raise ValueError(
            f"marker {marker!r} must occur on exactly one line of {path}; found lines {hits}"
        )
    return hits[0]


def function_body_line(path: str | Path, qualname: str) -> int:
    """The line of the first statement of function ``qualname`` (``Class.method`` or ``func``).

    A docstring is skipped, so a breakpoint there stops when the function starts doing work,
    with its arguments bound.
    """
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    scope: list[ast.stmt] = tree.body
    parts = qualname.split(".")
    for depth, name in enumerate(parts):
        last = depth == len(parts) - 1
        wanted: tuple[type[ast.stmt], ...] = (
            (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        )
        found = [n for n in scope if isinstance(n, wanted) and getattr(n, "name", None) == name]
        if len(found) != 1:
            kind = "function" if last else "class"
            raise ValueError(
                f"{path}: expected one {kind} {name!r} (of {qualname!r}), found {len(found)}"
            )
        node = found[0]
        assert isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        scope = node.body
    body = scope
    first = body[0]
    if (
        len(body) > 1
        and isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        first = body[1]
    return first.lineno
