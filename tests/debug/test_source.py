"""Breakpoint lines by marker and by function name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lab.debug import find_line, function_body_line

SOURCE = textwrap.dedent(
    '''
    """Module docstring."""


    def helper(x):
        return x  # MARK: helper


    class ServiceController:
        def sync(self, key):
            """Reconcile one Service."""
            name = key.name
            return name

        async def watch(self):
            await self.sync(None)


    def sync():
        pass
    '''
)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "svc.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def _line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_find_line_by_marker(source: Path) -> None:
    assert find_line(source, "# MARK: helper") == _line_of(source, "    return x  # MARK: helper")


@pytest.mark.parametrize("marker", ["# MARK: nowhere", "sync"])
def test_find_line_needs_exactly_one_hit(source: Path, marker: str) -> None:
    with pytest.raises(ValueError, match="exactly one line"):
        find_line(source, marker)


def test_function_body_line_skips_the_docstring(source: Path) -> None:
    line = function_body_line(source, "ServiceController.sync")
    assert line == _line_of(source, "        name = key.name")
    assert function_body_line(source, "ServiceController.watch") == _line_of(
        source, "        await self.sync(None)"
    )
    assert function_body_line(source, "sync") == _line_of(source, "    pass")
    assert function_body_line(source, "helper") == _line_of(source, "    return x  # MARK: helper")


@pytest.mark.parametrize(
    ("qualname", "message"),
    [
        ("ServiceController.missing", "one function 'missing'"),
        ("NoSuchClass.sync", "one class 'NoSuchClass'"),
        ("nothing", "one function 'nothing'"),
    ],
)
def test_function_body_line_names_what_is_missing(
    source: Path, qualname: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        function_body_line(source, qualname)
