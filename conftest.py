"""Repository-wide pytest configuration.

Registers the lab's pytest plugin once it exists, forbids real AWS and restores the root
logger after each test (below); sorts the cases into the two tiers (``slow`` or not, slow
first) and runs ``-n N`` as ``--dist loadgroup`` (``tests/tiers.py``); test discovery
and markers are configured in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator

import pytest

# Bytecode caches for our own modules (lab/, controller/, e2e/, tests/; ``__pycache__`` is
# ignored by git and by the image's build context) even where PYTHONDONTWRITEBYTECODE is set, as
# it is on our CI machines and developers' shells: without them each xdist worker compiles and
# assertion-rewrites every module again (collection 12.8 s of CPU instead of 4.7 s), and so does
# every process a test starts (invoke, lab daemons, controllers run afresh, pytest runs of their
# own). The virtualenv's packages are compiled at install (``--compile-bytecode``).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# No test may reach a real AWS account: with this set, the lab's real-account path
# (``lab.aws.realaccount``) refuses a client whose endpoint is one of Amazon's own hosts.
# Subprocesses (labs, controllers) inherit it.
os.environ["CCM_LAB_NO_REAL_AWS"] = "1"

pytest_plugins = [
    name
    for name in ("lab.pytest_plugin", "tests.rehearsal.plugin")
    if importlib.util.find_spec(name) is not None
]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n N`` without ``--dist``: ``loadgroup``, which hands out every case as a unit of its
    own to whichever worker is free, in collection order (slow cases first), where xdist's
    ``load`` sends a quarter of the run up front, alternating between the workers, without
    regard to how long each case takes."""
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "dist", "no") == "no":
        option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The rule's slow cases marked ``slow`` (before ``-m`` deselects), slow cases first."""
    from tests import tiers

    tiers.classify(items)
    tiers.slow_first(items)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """Put the root logger (and every logger's level) back after each test.

    A test that runs a command's ``main()`` in-process lets it configure logging the way the
    command does (a handler on ``sys.stderr``, which is pytest's capture file then); left in
    place, that handler outlives the capture, and threads of later tests' labs that log hit a
    closed file ("--- Logging error ---")."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    named = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    for name, before in named.items():  # the levels a command set on its noisy libraries
        logging.getLogger(name).setLevel(before)
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
