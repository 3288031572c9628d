"""The existing provider: attaches to any kubeconfig, never creates or deletes a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lab.cluster.base import ClusterSpec, NodeSpec, Role
from lab.cluster.existing import ExistingProvider
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.cluster.steps import ProvisionError
from lab.exec import RecordingRunner
from lab.kube.server import KubeServer
from lab.versions.release import KubeVersion

SPEC = ClusterSpec("any", KubeVersion.parse("1.29"), (NodeSpec(Role.CONTROL_PLANE),))


def test_attaches_lists_nodes_and_leaves_cluster_alone(tmp_path: Path) -> None:
    with KubeServer() as sim:
        KubeletStandIn(sim.api_client()).register(
            NodeRegistration(name="n1", ip="10.0.0.5", version=KubeVersion.parse("1.29"))
        )
        runner = RecordingRunner()
        provider = ExistingProvider(sim.kubeconfig_path, runner=runner)
        provider.provision(SPEC)
        assert [(n.name, n.ip) for n in provider.nodes()] == [("n1", "10.0.0.5")]
        assert not provider.capabilities().provisions
        provider.logs(tmp_path / "dump")
        assert runner.argvs == [
            (
                "kubectl", "--kubeconfig", str(sim.kubeconfig_path),
                "cluster-info", "dump", "--output-directory", str(tmp_path / "dump"),
            )
        ]  # fmt: skip
        provider.delete()
        provider.delete()
        again = ExistingProvider(sim.kubeconfig_path)
        assert [n.name for n in again.nodes()] == ["n1"]  # delete() did not touch the cluster


def test_unreachable_cluster_fails_the_check_step(tmp_path: Path) -> None:
    with KubeServer() as sim:
        config = yaml.safe_load(sim.kubeconfig_path.read_text())
    # the simulator is stopped: its address refuses connections now
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ProvisionError) as info:
        ExistingProvider(path).provision(SPEC)
    assert info.value.step == "check-api-reachable"


def test_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.yaml"):
        ExistingProvider(tmp_path / "nope.yaml")
