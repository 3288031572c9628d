"""Another commit of this repository checked out beside the working tree, for benchmarks that
measure "before" and "after" in one run (``benchmarks.e2e --compare``, ``benchmarks.suite``).

The worktree shares the repository's objects and this virtualenv; a process run in it imports
the worktree's code when ``PYTHONPATH`` names it (:func:`environ`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[Path]:
    """A detached git worktree of ``ref`` for the length of the block."""
    with tempfile.TemporaryDirectory(prefix="ccm-lab-ref-") as tmp:
        path = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(path)],
                cwd=ROOT,
                check=False,
                capture_output=True,
            )


def environ(tree: Path) -> dict[str, str] | None:
    """The environment that makes pytest and every process it starts import ``tree``'s code
    (None: the working tree's own, unchanged)."""
    if tree == ROOT:
        return None
    return {**os.environ, "PYTHONPATH": str(tree)}
