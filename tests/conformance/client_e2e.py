"""Run the official Python client's own e2e suite against the simulator.

The suite (``kubernetes/e2e_test`` of github.com/kubernetes-client/python) is not shipped in the
``kubernetes`` wheel and is not vendored here: :func:`find_suite` takes a checkout's path from
``CCM_LAB_CLIENT_E2E``. Its tests import ``kubernetes.e2e_test``, so the runner extends the
installed ``kubernetes`` package's ``__path__`` with the checkout's ``kubernetes`` directory
(a pytest plugin written to a temporary directory): the client under test stays the installed
one, the tests come from the checkout. The suite finds the cluster through ``KUBECONFIG``.

The cluster is the simulator with the kubelet stand-in and the data plane (pods get scheduled,
run and get IPs), as a ``lab.up`` sim lab has them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.clock import ScaledClock
from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.dataplane.api import Api
from lab.dataplane.plane import SimDataPlane
from lab.kube.server import KubeServer
from lab.versions.release import KubeVersion

ENV = "CCM_LAB_CLIENT_E2E"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
HOW = (
    f"set {ENV} to a checkout of github.com/kubernetes-client/python at the installed client's "
    "release (git clone --depth 1 --branch vNN.0.0 https://github.com/kubernetes-client/python)"
)
NODES = (
    ("cp", "10.0.0.10", Role.CONTROL_PLANE),
    ("w1", "10.0.0.11", Role.WORKER),
    ("w2", "10.0.0.12", Role.WORKER),
)


def find_suite() -> tuple[Path | None, str]:
    """The checkout's root, or None and the reason it cannot be used."""
    raw = os.environ.get(ENV, "")
    if not raw:
        return None, f"{ENV} is not set: {HOW}"
    root = Path(raw).expanduser()
    if not (root / "kubernetes" / "e2e_test" / "base.py").is_file():
        return None, f"{ENV}={raw} holds no kubernetes/e2e_test/base.py: {HOW}"
    return root, ""


@contextmanager
def simulated_cluster(workdir: Path, version: str = "1.33") -> Iterator[Path]:
    """A simulator with kubelets and the data plane; yields its kubeconfig's path."""
    v = KubeVersion.parse(version)
    clock = ScaledClock(10.0)
    sim = KubeServer(version=str(v)).start()
    kubelet = KubeletStandIn(sim.api_client(), clock=clock)
    plane: SimDataPlane | None = None
    try:
        kubelet.start()
        api = Api(sim.api_client())
        for name, ip, role in NODES:
            kubelet.register(NodeRegistration(name=name, ip=ip, version=v, role=role))
            # what the cloud controller does: the node is initialized, its taint goes
            taints = [
                t
                for t in api.get(f"/api/v1/nodes/{name}")["spec"].get("taints") or []
                if t.get("key") != UNINITIALIZED
            ]
            api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints or None}})
        plane = SimDataPlane(sim.api_client(), version=v, hosts=kubelet, clock=clock)
        plane.start()
        yield sim.write_kubeconfig(workdir / "kubeconfig")
    finally:
        if plane is not None:
            plane.stop()
        kubelet.stop()
        sim.stop()


def run_suite(
    root: Path, kubeconfig: Path, workdir: Path, *, timeout: float = 900.0
) -> dict[str, str]:
    """Run the suite; ``{"file::Class::test": "passed" | "failed" | "skipped"}``."""
    shim = workdir / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "ccm_lab_client_e2e_shim.py").write_text(
        f"import kubernetes\nkubernetes.__path__.append({str(root / 'kubernetes')!r})\n"
    )
    junit = workdir / "junit.xml"
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), PYTHONPATH=str(shim))
    subprocess.run(
        [
            sys.executable, "-m", "pytest", str(root / "kubernetes" / "e2e_test"),
            "-p", "ccm_lab_client_e2e_shim", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-q", "-o", "addopts=", "-c", os.devnull, f"--rootdir={root}",
            "--timeout=120", f"--junitxml={junit}",
        ],
        env=env, cwd=root, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if not junit.is_file():
        raise RuntimeError("the client's e2e suite wrote no JUnit report")
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = str(case.get("classname", "")).rsplit(".", 1)
        name = f"{module[0].rsplit('.', 1)[-1]}.py::{module[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
    return outcomes
