"""``Lab`` on the kind backend, through its seams (no Docker engine here).

A fake ``kind`` and ``docker`` (``tests/cluster/fakecli.py``) record every command; the fake
``kind create cluster`` hands back the kubeconfig of an API simulator in which a kubelet
stand-in registered the node containers' kubelets (as kind's would: named after the
containers, ``--node-ip`` = the container IP, tainted uninitialized, no providerID). What is
asserted is the lab's part: the network matches the VPC subnet with container IPs clear of
AWS's reserved addresses, each fake instance gets its container's IP, providerIDs are set,
the controller initializes the nodes, reset restores the nodes and removes what a test made,
and stop deletes the cluster. A real kind run is ``pytest e2e --backend kind`` (CI).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.cluster.versions import KubeVersion
from lab.compose import Lab, LabConfig, wait_for
from lab.kube.server import KubeServer
from lab.pytest_plugin import quiesce_session_lab
from tests.cluster.fakecli import FakeCLI, container

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"
CLUSTER = "ccm-lab-k"
NODES = {f"{CLUSTER}-control-plane": "10.0.8.2", f"{CLUSTER}-worker": "10.0.8.3"}

_WRAPPER = """#!{python} -IS
import shutil, subprocess, sys
code = subprocess.call([{fake!r}, *sys.argv[1:]])
if code == 0 and sys.argv[1:3] == ["create", "cluster"]:
    shutil.copyfile({kubeconfig!r}, sys.argv[sys.argv.index("--kubeconfig") + 1])
sys.exit(code)
"""


@pytest.fixture
def kind_world(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[FakeCLI, Path, Path]]:
    """The fakes, a kind wrapper pointing at a simulator, and that simulator's kubelets."""
    quiesce_session_lab(request.config)  # these labs reset the process-global moto state
    fake = FakeCLI(tmp_path / "fake")
    network = f"ccm-lab-{CLUSTER}"
    fake.set(
        kind_version="kind v0.29.0 go1.24.2 linux/amd64",
        containers=[
            container(name, role, CLUSTER, ip, network=network)
            for name, ip in NODES.items()
            for role in ["control-plane" if name.endswith("control-plane") else "worker"]
        ],
    )
    with KubeServer() as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "cluster.kubeconfig")
        wrapper = tmp_path / "kind"
        wrapper.write_text(
            _WRAPPER.format(
                python=sys.executable, fake=str(fake.bin / "kind"), kubeconfig=str(kubeconfig)
            )
        )
        wrapper.chmod(0o755)
        api = sim.api_client()
        with KubeletStandIn(api) as kubelets:
            for name, ip in NODES.items():
                role = Role.CONTROL_PLANE if name.endswith("control-plane") else Role.WORKER
                kubelets.register(
                    NodeRegistration(name=name, ip=ip, version=KubeVersion.parse("1.33"), role=role)
                )
            yield fake, wrapper, tmp_path


def _taints(core: Any, name: str) -> set[str]:
    return {t.key for t in core.read_node(name).spec.taints or []}


def test_lab_on_kind_seeds_instances_from_containers_and_initializes_nodes(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    fake, wrapper, tmp = kind_world
    config = LabConfig(
        name="k",
        backend="kind",
        kind_binary=str(wrapper),
        docker_binary=str(fake.bin / "docker"),
        state_dir=tmp / "lab",
    )
    lab = Lab(config)
    try:
        lab.start()
        calls = fake.calls()
        create = next(c for c in calls if c[:3] == ["docker", "network", "create"])
        assert create[create.index("--subnet") + 1] == "10.0.0.0/20", "the zone's VPC subnet"
        assert create[create.index("--ip-range") + 1] == "10.0.8.0/21", "clear of reserved IPs"
        assert any(c[:3] == ["kind", "create", "cluster"] for c in calls)

        assert {n.name: n.private_ip for n in lab.nodes} == NODES
        ec2 = lab.aws.client("ec2")
        for node in lab.nodes:
            inst = ec2.describe_instances(InstanceIds=[node.instance_id])["Reservations"][0]
            assert inst["Instances"][0]["PrivateIpAddress"] == node.private_ip
        core = client.CoreV1Api(lab.api_client())
        for node in lab.nodes:
            assert core.read_node(node.name).spec.provider_id == node.provider_id
        state = lab.state(tmp / "lab")
        assert state.backend == "kind"
        assert not lab.has_kubelet_stand_in

        lab.start_controller()
        for node in lab.nodes:
            wait_for(
                lambda n=node.name: UNINIT not in _taints(core, n),
                what=f"{node.name} initialized",
            )

        # A test's leftovers: a Service with our finalizer, a label on a node.
        core.create_namespaced_service(
            "default",
            {
                "metadata": {
                    "name": "web",
                    "finalizers": ["service.kubernetes.io/load-balancer-cleanup"],
                },
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            },
        )
        worker = lab.workers[0].name
        core.patch_node(worker, {"metadata": {"labels": {"test": "leftover"}}})
        lab.reset()
        names = [s.metadata.name for s in core.list_namespaced_service("default").items]
        assert "web" not in names
        labels = core.read_node(worker).metadata.labels
        assert "test" not in labels
        assert UNINIT in _taints(core, worker), "restored as the kubelet registered it"
        assert core.read_node(worker).spec.provider_id == lab.node(worker).provider_id
    finally:
        lab.stop()
    assert any(c[:3] == ["kind", "delete", "cluster"] for c in fake.calls())
    assert json.loads((fake.root / "state.json").read_text())  # fakes still consistent


def test_expose_to_nodes_serves_aws_and_metadata_on_the_nodes_gateway(
    kind_world: tuple[FakeCLI, Path, Path],
) -> None:
    """For an in-cluster controller the endpoints listen where pods reach the host. The fake
    network reports 127.0.0.1 as its gateway (servers here bind loopback only), so what is
    checked is that the address comes from the network's IPAM answer."""
    fake, wrapper, tmp = kind_world
    fake.set(gateway="127.0.0.1", networks=[f"ccm-lab-{CLUSTER}"])
    lab = Lab(
        LabConfig(
            name="k",
            backend="kind",
            kind_binary=str(wrapper),
            docker_binary=str(fake.bin / "docker"),
            state_dir=tmp / "lab",
            expose_to_nodes=True,
        )
    )
    try:
        lab.start()
        inspects = [
            c for c in fake.calls() if c[:3] == ["docker", "network", "inspect"] and "--format" in c
        ]
        assert inspects, "the gateway is read from the nodes' network"
        assert inspects[-1][3] == f"ccm-lab-{CLUSTER}"
        state = lab.state(tmp / "lab")
        assert state.aws_endpoint.startswith("http://127.0.0.1:")
        assert state.imds_endpoint.startswith("http://127.0.0.1:")
    finally:
        lab.stop()
