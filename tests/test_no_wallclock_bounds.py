"""No test asserts an upper bound on wall-clock time (speed belongs in ``benchmarks/``).

A test that says "this took less than N seconds" passes on a quiet machine and fails on a busy
one: its verdict depends on the machine, not on the code. This module reads every test module
(``tests/``, ``e2e/``) as Python syntax and fails naming each ``assert`` that compares a reading
of a real clock (``time.monotonic()``, ``time.perf_counter()``, ``time.time()``,
``datetime.now()``, directly or through a variable assigned from one) as smaller than
something. Lower bounds ("an injected
latency of 0.3 s took at least 0.3 s") cannot fail because a machine is slow and are allowed, and
so is a wait's give-up time (``assert time.monotonic() < deadline`` with ``deadline = time.
monotonic() + timeout``): every wait has one, as a guard against a hang, not a claim of speed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and isinstance(sub.func.value, ast.Name)
            and (
                (sub.func.value.id == "time" and sub.func.attr in CLOCKS)
                or (sub.func.value.id == "datetime" and sub.func.attr in ("now", "utcnow"))
            )
        ):
            return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


def _is_deadline(node: ast.AST, deadlines: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in deadlines


def _upper_bounds(test: ast.Assert, tainted: set[str], deadlines: set[str]) -> bool:
    """``assert`` comparing a clock reading as smaller than something (a deadline aside)."""
    for compare in ast.walk(test.test):
        if not isinstance(compare, ast.Compare):
            continue
        operands = [compare.left, *compare.comparators]
        for i, op in enumerate(compare.ops):
            left, right = operands[i], operands[i + 1]
            below = isinstance(op, ast.Lt | ast.LtE) and _reads_clock(left, tainted)
            if below and not _is_deadline(right, deadlines):
                return True
            above = isinstance(op, ast.Gt | ast.GtE) and _reads_clock(right, tainted)
            if above and not _is_deadline(left, deadlines):
                return True
    return False


def wallclock_upper_bounds(source: str, filename: str = "<test>") -> list[str]:
    """``file:line`` of every assert that bounds a real clock's reading from above."""
    tree = ast.parse(source, filename)
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            continue
        tainted: set[str] = set()
        deadlines: set[str] = set()
        body = func.body
        for node in [n for stmt in body for n in ast.walk(stmt)]:
            if isinstance(node, ast.Assign) and _reads_clock(node.value, tainted):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                value = node.value
                if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
                    deadlines |= names  # now + timeout: a wait's give-up time
                else:
                    tainted |= names
            if isinstance(node, ast.Assert) and _upper_bounds(node, tainted, deadlines):
                found.append(f"{filename}:{node.lineno}")
    return sorted(set(found))


def test_the_check_finds_upper_bounds_and_allows_lower_ones() -> None:
    bad = (
        "import time\n"
        "def test_a():\n"
        "    start = time.monotonic()\n"
        "    work()\n"
        "    assert time.monotonic() - start < 2\n"
        "def test_b():\n"
        "    began = time.perf_counter()\n"
        "    took = time.perf_counter() - began\n"
        "    assert 5 > took\n"
    )
    assert wallclock_upper_bounds(bad, "x.py") == ["x.py:5", "x.py:9"]
    fine = (
        "import time\n"
        "def test_c():\n"
        "    start = time.perf_counter()\n"
        "    slow_call()\n"
        "    assert time.perf_counter() - start >= 0.3\n"
        "    assert clock.now() < 10\n"
        "    deadline = time.monotonic() + 30\n"
        "    assert time.monotonic() < deadline, 'gave up waiting'\n"
    )
    assert wallclock_upper_bounds(fine, "y.py") == []


def test_no_test_asserts_a_wall_clock_upper_bound() -> None:
    found = []
    for folder in ("tests", "e2e"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            found += wallclock_upper_bounds(path.read_text(), rel)
    assert found == [], "assert speed in benchmarks/, not in tests: " + ", ".join(found)
