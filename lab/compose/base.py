"""The composed lab's shared vocabulary: :class:`LabNotReady` and :func:`wait_for`.

Role: what every part of ``lab.compose`` (and every test) uses to say a part is missing or to
wait on a condition. Neighbours: each module of the package raises :class:`LabNotReady`;
``lab.daemon`` and the fixtures catch it; tests and benchmarks poll with :func:`wait_for`.

Design: the package's leaf module, importing nothing of it, so its siblings may all import it
without an import circle (the acyclic_siblings contract in pyproject.toml).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class LabNotReady(RuntimeError):
    """A part of the lab was asked for that is not running (or that this backend lacks)."""


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; raise ``TimeoutError`` naming it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or predicate!r}")
