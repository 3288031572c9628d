"""Another commit of this repository, checked out for the length of a benchmark run.

``--compare REF`` in ``benchmarks.e2e``, ``benchmarks.lab``, ``benchmarks.aws``,
``benchmarks.suite`` and ``benchmarks.controller`` measures the same figures at git ``REF`` in the
same run, so "before" and "after" share the machine and its load. The checkout is a temporary,
detached ``git worktree``; its code runs with this virtualenv, through ``PYTHONPATH``
(:func:`env_for`): ahead of the editable install's path, so every process a measurement starts
(``invoke``, pytest, the lab daemon, servers, controllers: the lab puts the repository it was
imported from on their ``PYTHONPATH`` too) imports the worktree's code. That is honest as long as
``REF`` pins the same dependencies (``deploy/constraints.txt``); the scripts say which commit each
figure is from.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resolve(ref: str) -> str:
    """The commit ``ref`` names; ValueError (naming it) when git knows no such commit."""
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(f"--compare {ref!r}: not a commit of this repository (try a sha or tag)")
    return done.stdout.strip()


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[Path]:
    """A detached git worktree of ``ref`` for the length of the block."""
    with tempfile.TemporaryDirectory(prefix="ccm-lab-bench-") as tmp:
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


def env_for(tree: Path) -> dict[str, str]:
    """This process's environment with ``tree``'s code first on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": str(tree)}


def constraints_differ(tree: Path) -> bool:
    """True when ``tree`` pins other dependencies than this checkout (then its figures are
    not only its code's)."""
    pins = Path("deploy/constraints.txt")
    return (tree / pins).read_bytes() != (ROOT / pins).read_bytes()


def environ(tree: Path) -> dict[str, str] | None:
    """The environment that makes pytest and every process it starts import ``tree``'s code
    (None: this checkout's own, unchanged)."""
    return None if tree == ROOT else env_for(tree)
