"""The suite's two tiers: ``pytest -m "not slow"`` for the inner loop, everything for the gate.

A case is ``slow`` (deselected by ``-m "not slow"``; the gate, ``.ci/run``, runs it anyway) when

* it is marked ``@pytest.mark.slow`` itself or by its module's ``pytestmark``;
* it uses a fixture of :data:`SLOW_FIXTURES`: each starts something a case cannot share
  cheaply (a whole lab of its own, ``invoke lab.up``, a cluster to attach to, the kind fakes),
  so a new case that asks for one is slow without anyone deciding it;
* or it is named in ``tests/slow_tests.txt`` (``path::function``, every parameter of it): the
  cases over about a second that no fixture gives away (subprocesses of their own: ``pytest``
  and ``invoke`` runs, servers started as processes, fuzzing). A new case that takes more than a
  second and matches no rule: add it there (or mark it).

Root ``conftest.py`` applies the rule at collection (``classify``), puts slow cases first so the
longest work starts first (``slow_first``), and runs ``-n N`` as ``--dist loadgroup``: every
case a unit of its own, handed to whichever worker is free, in that order. (Grouping cases by
``xdist_group`` does not work with pytest 9.2 and pytest-xdist 3.8: the worker's ``@group``
suffix goes to ``Item._nodeid``, which pytest 9 no longer reads.) ``tests/test_house.py``
checks that the rule is what marked the session's cases and that every name in the list is a
test that exists. No timing is asserted anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LISTED = Path(__file__).resolve().parent / "slow_tests.txt"

#: fixture -> what it starts for the case
SLOW_FIXTURES: dict[str, str] = {
    "lab_at": "a whole lab of a Kubernetes release for the case (e2e release presets)",
    "lab_dir": "a lab through `invoke lab.up` (the front door's module lab)",
    "their_cluster": "a separate cluster for --backend existing to attach to",
    "kind_world": "the fake kind and docker with a simulator behind them",
}


def listed() -> frozenset[str]:
    """``tests/slow_tests.txt``: ``path::function`` per line (``#`` comments, blank lines)."""
    names = (line.split("#", 1)[0].strip() for line in LISTED.read_text().splitlines())
    return frozenset(name for name in names if name)


def _function_id(item: pytest.Item) -> str:
    """``path::function`` (``path::Class::function``) of a case, without its parameters."""
    return item.nodeid.split("[", 1)[0].split("@", 1)[0]


def slow_reason(item: pytest.Item, names: frozenset[str]) -> str | None:
    """Why the rule makes ``item`` slow, or None (an explicit marker is not the rule's)."""
    fixtures = [name for name in getattr(item, "fixturenames", ()) if name in SLOW_FIXTURES]
    if fixtures:
        return f"uses {fixtures[0]}: {SLOW_FIXTURES[fixtures[0]]}"
    if _function_id(item) in names:
        return f"named in {LISTED.relative_to(ROOT)}"
    return None


def classify(items: list[pytest.Item]) -> None:
    """Mark the rule's slow cases ``slow``."""
    names = listed()
    for item in items:
        if slow_reason(item, names) is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


def slow_first(items: list[pytest.Item]) -> None:
    """Slow cases first, each tier in collection order (so a module's cases stay together)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
