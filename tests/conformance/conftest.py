"""Fixtures for the client flows: one simulator per session, reset per test.

A test using ``sim`` fails if a request handler raised inside the server while it ran, as in
``tests/kube``; ``kubeconfig`` is the simulator's kubeconfig file, which every client reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.kube.server import KubeServer


@pytest.fixture(scope="session")
def conformance_sim() -> Iterator[KubeServer]:
    with KubeServer() as sim:
        yield sim


@pytest.fixture
def sim(conformance_sim: KubeServer) -> Iterator[KubeServer]:
    conformance_sim.control.reset()
    conformance_sim.take_internal_errors()
    yield conformance_sim
    errors = conformance_sim.take_internal_errors()
    assert not errors, "server-side handler exceptions:\n" + "\n".join(errors)


@pytest.fixture
def kubeconfig(sim: KubeServer) -> Path:
    return sim.kubeconfig_path
