"""Fixtures of the in-cluster deployment tests (the helpers behind them are in ``support``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.incluster.support import Fakes, make_fakes


@pytest.fixture
def fakes(tmp_path: Path) -> Fakes:
    """Fake ``docker``, ``kind`` and ``kubectl`` on the PATH of ``fakes.runner``."""
    return make_fakes(tmp_path)
