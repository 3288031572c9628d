"""Fixtures for catalog scenarios that need a cluster of a given Kubernetes release.

The seed-004 scenarios (``k8s-109414``, ``k8s-109718``, ``k8s-110309``) show bugs of particular
releases of the kubelet and the endpoint controllers: their reproduce cases run on a buggy
release, their fixed cases on the first fixed one. ``lab_at(version, feature_gates="")`` hands
out a sim lab of that release with those data-plane gates (whole cluster: API server, kubelet
and controller stand-ins), started for the test and stopped after it, and fails the test on any
component's internal error, like the session ``lab`` fixture.

Every catalog lab runs its clock at :data:`CATALOG_SPEED` lab seconds per real second (the
session lab's speed is raised for each catalog test and put back after it): the scenarios'
waits are lab time (health-check thresholds, node-monitor grace periods, drain windows), so
this is what the catalog's wall time mostly depends on. The controller under test runs in real
time, as it would against a real cluster; scenarios whose evidence compares its periods with
lab time pass their own timing flags.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest

from e2e.catalog import AWS_NEEDS, scenario_of
from lab.compose import Lab
from lab.pytest_plugin import quiesce_session_lab, use_controller_under_test
from lab.spec import LabSpec

#: lab seconds per real second for the catalog's labs. The lab clock holds for a starved
#: component (``lab.clock``), so a fast clock no longer lets a busy machine change a verdict
#: (at 20x, before the clock held, a 2 s real node-monitor grace was too short for a starved
#: kubelet, and the catalog flaked in CI). Measured with ``benchmarks.flakes`` beside a CPU hog
#: pinned to one core, 3 runs each: 50x, 100x and 200x gave every case the same verdict in
#: every run (catalog 138-149 s, 125-128 s, 123-125 s); 200x is the fastest measured.
CATALOG_SPEED = 200.0


def catalog_speed(config: pytest.Config) -> float:
    """:data:`CATALOG_SPEED`, or pytest ``--catalog-speed`` (``benchmarks.e2e`` measures the
    catalog at a faster clock with it, to show how much of its time is lab time)."""
    given = config.getoption("--catalog-speed", None)
    return float(given) if given is not None else CATALOG_SPEED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each catalog case carries its scenario's ``aws_needs`` (``e2e.catalog.AWS_NEEDS``), so
    the lab fixtures skip it, saying why, on an AWS endpoint that lacks what it needs."""
    for item in items:
        scenario = scenario_of(str(item.path))
        if scenario is not None and AWS_NEEDS.get(scenario.id):
            item.add_marker(pytest.mark.aws_needs(*AWS_NEEDS[scenario.id]))


@pytest.fixture(autouse=True)
def catalog_clock(request: pytest.FixtureRequest) -> Iterator[None]:
    """The session lab at :data:`CATALOG_SPEED` for a catalog test that uses it, where the
    cluster runs on the lab clock (sim). On kind the kubelets, kube-proxy and the node lifecycle
    controller run in real time, so the lab clock (the ELB's health checks, the fake nodes'
    leases) keeps the lab's own ``--clock-speed`` there (10 by default, as ``lab.up``), not the
    catalog's 200."""
    if "lab" not in request.fixturenames:
        yield
        return
    lab: Lab = request.getfixturevalue("lab")
    if not lab.capabilities.lab_time:
        yield
        return
    before = lab.set_clock_speed(catalog_speed(request.config))
    try:
        yield
    finally:
        lab.set_clock_speed(before)


@pytest.fixture
def lab_at(request: pytest.FixtureRequest) -> Iterator[Callable[..., Lab]]:
    if request.config.getoption("--backend") not in (None, "sim", "auto"):
        pytest.skip("release presets are the sim backend's; on kind use its pinned node images")
    if request.config.getoption("--aws") not in (None, "moto"):
        pytest.skip("release presets run on the lab's own moto endpoint, not --aws localstack")
    used: list[Lab] = []
    errors: dict[str, dict[str, list[str]]] = {}
    # moto's backends are process-global: the session lab's controller must not reconcile the
    # AWS this lab seeds, nor an earlier lab's of this test, whose data plane and ELB health
    # checks would also judge the same instance ids; so an earlier lab of the test is stopped
    # (its evidence is taken by then) before the next starts, and none outlives its test.
    quiesce_session_lab(request.config)

    numbers = itertools.count()

    def stop(lab: Lab) -> None:
        errors[lab.config.name] = lab.take_internal_errors()
        lab.stop()

    def get(version: str, feature_gates: str = "") -> Lab:
        for earlier in used:
            stop(earlier)
        used.clear()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        lab = Lab(
            LabSpec(
                name=f"pytest-{worker}-{version.replace('.', '-')}-{next(numbers)}",
                k8s_version=version,
                nodes=3,
                zones=("us-east-1a",),
                feature_gates=feature_gates,
                clock_speed=catalog_speed(request.config),
                insecure_api=bool(request.config.getoption("--insecure-api")),
            )
        )
        use_controller_under_test(lab, request.config)
        used.append(lab)
        lab.start()
        lab.take_internal_errors()
        return lab

    try:
        yield get
    finally:
        for lab in used:
            stop(lab)
    failed = {v: e for v, e in errors.items() if e}
    if failed:
        pytest.fail(
            "a component of a release-preset lab failed:\n"
            + "\n".join(
                f"{v} {c}: {line}"
                for v, e in failed.items()
                for c, lines in e.items()
                for line in lines
            )
        )
