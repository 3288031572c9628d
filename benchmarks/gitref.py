"""Another commit's code beside this checkout's, for benchmarks that compare the two in one
run: a temporary detached git worktree (:func:`worktree`)."""

from __future__ import annotations

import contextlib
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
