"""Fixtures for catalog scenarios that need a cluster of a given Kubernetes release.

The seed-004 scenarios (``k8s-109414``, ``k8s-109718``, ``k8s-110309``) show bugs of particular
releases of the kubelet and the endpoint controllers: their reproduce cases run on a buggy
release, their fixed cases on the first fixed one. ``lab_at(version, feature_gates="")`` hands
out a sim lab of that release with those data-plane gates (whole cluster: API server, kubelet
and controller stand-ins), started once per test session and worker and reset before each use,
and fails the test on any component's internal error, like the session ``lab`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from lab.compose import Lab, LabConfig
from lab.pytest_plugin import quiesce_session_lab


@pytest.fixture(scope="session")
def _labs_by_version() -> Iterator[dict[str, Lab]]:
    labs: dict[str, Lab] = {}
    try:
        yield labs
    finally:
        for lab in labs.values():
            lab.stop()


@pytest.fixture
def lab_at(
    request: pytest.FixtureRequest, _labs_by_version: dict[str, Lab]
) -> Iterator[Callable[..., Lab]]:
    if request.config.getoption("--backend") not in (None, "sim", "auto"):
        pytest.skip("release presets are the sim backend's; on kind use its pinned node images")
    used: list[Lab] = []
    # moto's backends are process-global: the session lab's controller must not reconcile the
    # AWS this lab seeds, and this lab's controller must not outlive its test.
    quiesce_session_lab(request.config)

    def get(version: str, feature_gates: str = "") -> Lab:
        key = f"{version} {feature_gates}".strip()
        lab = _labs_by_version.get(key)
        if lab is None:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            lab = Lab(
                LabConfig(
                    name=f"pytest-{worker}-{version.replace('.', '-')}-{len(_labs_by_version)}",
                    k8s_version=version,
                    nodes=3,
                    zones=("us-east-1a",),
                    feature_gates=feature_gates,
                )
            )
            lab.start()
            _labs_by_version[key] = lab
        else:
            lab.reset()
        lab.take_internal_errors()
        used.append(lab)
        return lab

    yield get
    for lab in used:
        lab.stop_controller(kill=True)
        errors = lab.take_internal_errors()
        if errors:
            pytest.fail(
                f"a component of the {lab.config.k8s_version} lab failed:\n"
                + "\n".join(f"{c}: {line}" for c, lines in errors.items() for line in lines)
            )
