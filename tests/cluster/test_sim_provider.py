"""The sim provider end to end: simulator + kubelet stand-in as a provisioned cluster."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.clock import ScaledClock
from lab.cluster.base import ClusterSpec, NodeName, NodeSpec, ProviderID, Role
from lab.cluster.planner import plan_nodes
from lab.cluster.sim import SimProvider
from lab.cluster.steps import ProvisionError
from lab.versions.release import KubeVersion

KUBECTL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "kubectl"
CP_ID = ProviderID("aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1")
FAST = {"lease_renew_interval": 10, "status_report_interval": 30}  # lab seconds, at 100x


def spec(*nodes: NodeSpec, version: str = "1.29") -> ClusterSpec:
    return ClusterSpec("lab", KubeVersion.parse(version), nodes)


def kubectl(provider: SimProvider, *args: str) -> str:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(provider.kubeconfig()), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout


@dataclass(frozen=True)
class ReadyState:
    name: str
    ready: bool


def ready_states(provider: SimProvider) -> list[ReadyState]:
    from kubernetes import client

    from lab.cluster.kubeapi import raw

    items = raw(client.CoreV1Api(provider.api_client()).list_node(_preload_content=False))
    states = []
    for node in items["items"]:
        (cond,) = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        states.append(
            ReadyState(node["metadata"]["name"], {"True": True}.get(cond["status"], False))
        )
    return states


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[SimProvider]:
    p = SimProvider(
        "lab",
        state_dir=tmp_path / "lab",
        kubelet_options=FAST,
        dataplane_options={"node_monitor_grace_period": 50},
        clock=ScaledClock(100),
    )
    yield p
    p.delete()


def test_plan_fills_kind_names_and_consecutive_ips() -> None:
    planned = plan_nodes(
        spec(
            NodeSpec(Role.CONTROL_PLANE),
            NodeSpec(Role.WORKER, ip="172.18.0.2"),
            NodeSpec(Role.WORKER),
            NodeSpec(Role.WORKER, name="custom"),
        ),
        subnets=[(None, "172.18.0.0/16")],
        first_host=2,
    )
    assert [(n.name, n.ip) for n in planned] == [
        ("lab-control-plane", "172.18.0.3"),
        ("lab-worker", "172.18.0.2"),
        ("lab-worker2", "172.18.0.4"),
        ("custom", "172.18.0.5"),
    ]


def test_plan_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match=r"node names repeat: \['x'\]"):
        plan_nodes(
            spec(NodeSpec(Role.CONTROL_PLANE, name="x"), NodeSpec(Role.WORKER, name="x")),
            subnets=[(None, "10.0.0.0/24")],
        )


def test_provision_nodes_kubectl_heartbeat_logs_delete(
    provider: SimProvider, tmp_path: Path
) -> None:
    provider.provision(
        spec(
            NodeSpec(Role.CONTROL_PLANE, provider_id=CP_ID),
            NodeSpec(Role.WORKER, ip="10.0.1.20"),
            NodeSpec(Role.WORKER),
        )
    )
    nodes = provider.nodes()
    assert [(n.name, n.role, n.ip, n.provider_id) for n in nodes] == [
        (NodeName("lab-control-plane"), Role.CONTROL_PLANE, "172.18.0.2", CP_ID),
        (NodeName("lab-worker"), Role.WORKER, "10.0.1.20", None),
        (NodeName("lab-worker2"), Role.WORKER, "172.18.0.3", None),
    ]
    table = kubectl(provider, "get", "nodes", "--no-headers")
    assert sorted(line.split()[0] for line in table.splitlines()) == [
        "lab-control-plane", "lab-worker", "lab-worker2",
    ]  # fmt: skip
    # multi-node: the control plane keeps kubeadm's taint, like kind
    taints = json.loads(kubectl(provider, "get", "node", "lab-control-plane", "-o", "json"))
    assert [t["key"] for t in taints["spec"]["taints"]] == [
        "node-role.kubernetes.io/control-plane",
        "node.cloudprovider.kubernetes.io/uninitialized",
    ]
    assert provider.capabilities().stop_node_heartbeat

    provider.stop_heartbeat("lab-worker2")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        n.name == "lab-worker2" and n.ready is False for n in ready_states(provider)
    ):
        time.sleep(0.05)
    rows = dict(line.split()[:2] for line in kubectl(provider, "get", "nodes").splitlines()[1:])
    assert rows == {"lab-control-plane": "Ready", "lab-worker": "Ready", "lab-worker2": "NotReady"}

    logs = provider.logs(tmp_path / "logs")
    assert json.loads((logs / "pods.json").read_text())["items"] == []
    dumped = json.loads((logs / "nodes.json").read_text())
    assert len(dumped["items"]) == 3
    assert (logs / "apiserver-handler-errors.txt").read_text() == ""
    assert (logs / "kubelet-stand-in-errors.txt").read_text() == ""

    url = provider.require_simulator().url
    provider.delete()
    assert provider.simulator is None
    with pytest.raises(urllib.error.URLError, match="refused"):
        urllib.request.urlopen(url + "/readyz", timeout=2)
    provider.delete()  # idempotent


def test_data_plane_runs_pods_and_survives_reset(provider: SimProvider) -> None:
    provider.provision(spec(NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER), version="1.26"))
    assert provider.require_dataplane().version == KubeVersion.parse("1.26")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"nodeName": "lab-worker", "containers": [{"name": "c", "image": "nginx"}]},
    }
    kubectl_apply(provider, pod)
    wait_running = time.monotonic() + 10
    while time.monotonic() < wait_running and "Running" not in kubectl(provider, "get", "pod", "p"):
        time.sleep(0.05)
    assert "Running" in kubectl(provider, "get", "pod", "p")
    before = provider.require_dataplane()
    provider.reset_objects()
    assert provider.require_dataplane() is not before  # a fresh data plane on the fresh store
    kubectl_apply(provider, pod)
    wait_running = time.monotonic() + 10
    while time.monotonic() < wait_running and "Running" not in kubectl(provider, "get", "pod", "p"):
        time.sleep(0.05)
    assert "Running" in kubectl(provider, "get", "pod", "p")
    assert provider.take_internal_errors() == []


def test_without_a_data_plane_nothing_runs_pods(tmp_path: Path) -> None:
    bare = SimProvider("lab", state_dir=tmp_path / "bare", dataplane=False, clock=ScaledClock(100))
    try:
        bare.provision(spec(NodeSpec(Role.CONTROL_PLANE)))
        assert bare.dataplane is None
        with pytest.raises(RuntimeError, match="runs no data plane"):
            bare.require_dataplane()
    finally:
        bare.delete()


def kubectl_apply(provider: SimProvider, obj: dict) -> None:
    subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(provider.kubeconfig()), "apply", "-f", "-"],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


@pytest.mark.parametrize(("version", "excluded"), [("1.22", True), ("1.33", False)])
def test_single_node_cluster_looks_like_kind_made_it(
    provider: SimProvider, version: str, excluded: bool
) -> None:
    provider.provision(spec(NodeSpec(Role.CONTROL_PLANE), version=version))
    node = json.loads(kubectl(provider, "get", "node", "lab-control-plane", "-o", "json"))
    assert [t["key"] for t in node["spec"]["taints"]] == [
        "node.cloudprovider.kubernetes.io/uninitialized"
    ]
    labels = node["metadata"]["labels"]
    assert ("node.kubernetes.io/exclude-from-external-load-balancers" in labels) is excluded


def test_bad_ip_is_refused_before_anything_starts(provider: SimProvider) -> None:
    with pytest.raises(ValueError, match=r"nodes\[1\]\.ip='10\.0\.1' is not an IP address"):
        provider.provision(spec(NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER, ip="10.0.1")))
    assert provider.simulator is None
    assert not provider.kubeconfig().exists()


#: a name the API server refuses (not a DNS subdomain): registration fails mid-way
BAD_NAME = "Bad_Name"


def test_failed_registration_undoes_everything(provider: SimProvider) -> None:
    with pytest.raises(ProvisionError) as info:
        provider.provision(spec(NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER, name=BAD_NAME)))
    err = info.value
    assert err.step == "register-nodes"
    assert BAD_NAME in str(err)
    assert err.undone == ("register-nodes", "start-kubelets", "write-kubeconfig", "start-apiserver")
    assert provider.simulator is None
    assert provider.kubelet is None
    assert not provider.kubeconfig().exists()


def test_failed_registration_with_retain_keeps_cluster_for_post_mortem(
    provider: SimProvider,
) -> None:
    with pytest.raises(ProvisionError) as info:
        provider.provision(
            spec(NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER, name=BAD_NAME)), retain=True
        )
    assert info.value.retained
    assert provider.kubeconfig().exists()
    # the node registered before the failure is there to inspect
    assert [n.name for n in provider.nodes()] == ["lab-control-plane"]
    provider.delete()
    assert provider.simulator is None
    assert not provider.kubeconfig().exists()


def test_spec_name_must_match(tmp_path: Path) -> None:
    p = SimProvider("other", state_dir=tmp_path)
    with pytest.raises(ValueError, match=r"spec\.name 'lab' differs from provider name 'other'"):
        p.provision(spec(NodeSpec(Role.CONTROL_PLANE)))
