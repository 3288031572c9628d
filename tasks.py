"""The front door: ``invoke check`` and (as they land) the ``lab`` tasks.

Task bodies stay thin and call importable functions, so tests call the same code.
"""

from __future__ import annotations

from invoke.collection import Collection
from invoke.context import Context
from invoke.tasks import task

PY_PATHS = "."  # ruff skips .venv, .lab and git-ignored files


@task
def lint(c: Context) -> None:
    """ruff lint and format check."""
    c.run(f"ruff check {PY_PATHS}", pty=False)
    c.run(f"ruff format --check {PY_PATHS}", pty=False)


@task
def types(c: Context) -> None:
    """mypy --strict on lab/ and controller/."""
    c.run("mypy", pty=False)


@task
def contracts(c: Context) -> None:
    """import-linter: controller/ and lab/ independent; boto3 only where allowed."""
    c.run("lint-imports", pty=False)


@task(pre=[lint, types, contracts], default=True)
def check(c: Context) -> None:
    """ruff, mypy --strict and the import contracts."""


@task
def fmt(c: Context) -> None:
    """Apply ruff's fixes and formatting."""
    c.run(f"ruff check --fix {PY_PATHS}", pty=False)
    c.run(f"ruff format {PY_PATHS}", pty=False)


ns = Collection()
check_ns = Collection("check", check, lint, types, contracts)
ns.add_collection(check_ns)
ns.add_task(fmt)
