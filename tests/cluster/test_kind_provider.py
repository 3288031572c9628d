"""The kind provider through its seams: fake ``kind``/``docker`` executables on PATH record
their argv; the tests assert the exact commands, node discovery, and undo on failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.cluster.base import ClusterSpec, NodeInfo, NodeName, NodeSpec, ProviderID, Role
from lab.cluster.kind import KindProvider, KindVersionError, check_kind_version, parse_kind_version
from lab.cluster.steps import ProvisionError
from lab.cluster.versions import KubeVersion
from lab.exec import CommandError

from .fakecli import FakeCLI, container

CP_ID = ProviderID("aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1")
W_ID = ProviderID("aws:///us-east-1b/i-0bbbbbbbbbbbbbbb2")


def spec(version: str = "1.29", name: str = "lab1") -> ClusterSpec:
    return ClusterSpec(
        name,
        KubeVersion.parse(version),
        (NodeSpec(Role.CONTROL_PLANE, provider_id=CP_ID), NodeSpec(Role.WORKER, provider_id=W_ID)),
    )


@pytest.fixture
def fake(tmp_path: Path) -> FakeCLI:
    cli = FakeCLI(tmp_path / "fake")
    cli.set(
        kind_version="kind v0.22.0 go1.20.13 linux/amd64",
        containers=[
            container("lab1-control-plane", "control-plane", "lab1", "10.0.1.2", "ccm-lab-lab1"),
            container("lab1-worker", "worker", "lab1", "10.0.1.3", "ccm-lab-lab1"),
        ],
    )
    return cli


def provider(fake: FakeCLI, tmp_path: Path, **kwargs: Any) -> KindProvider:
    return KindProvider("lab1", state_dir=tmp_path / "state", runner=fake.runner(), **kwargs)


def test_provision_runs_exact_commands_and_reports_nodes(fake: FakeCLI, tmp_path: Path) -> None:
    seen: list[list[NodeInfo]] = []
    p = provider(
        fake,
        tmp_path,
        network_subnet="10.0.0.0/16",
        images_to_load=["ccm-lab/controller:dev-1"],
        on_nodes=lambda nodes: seen.append(list(nodes)),
    )
    p.provision(spec())
    state = tmp_path / "state"
    assert fake.calls() == [
        ["kind", "version"],
        ["docker", "network", "inspect", "ccm-lab-lab1"],
        [
            "docker", "network", "create", "--driver", "bridge", "--subnet", "10.0.0.0/16",
            "--label", "io.x-k8s.ccm-lab.cluster=lab1", "ccm-lab-lab1",
        ],
        [
            "kind", "create", "cluster", "--name", "lab1",
            "--config", str(state / "kind-config.yaml"),
            "--kubeconfig", str(state / "kubeconfig"),
            "--wait", "120s", "--retain",
        ],
        ["docker", "ps", "--all", "--filter", "label=io.x-k8s.kind.cluster=lab1",
         "--format", "{{.Names}}"],
        ["docker", "inspect", "lab1-control-plane", "lab1-worker"],
        ["kind", "load", "docker-image", "ccm-lab/controller:dev-1", "--name", "lab1"],
    ]  # fmt: skip
    # kind is pointed at the dedicated network only for the create call
    envs = fake.network_envs()
    assert envs[3] == "ccm-lab-lab1"
    assert envs[0] is None
    # the config handed to kind is the version-aware rendering
    config = yaml.safe_load((state / "kind-config.yaml").read_text())
    assert config["name"] == "lab1"
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker"]
    assert p.kubeconfig().read_text().startswith("apiVersion: v1")
    expected = [
        NodeInfo(NodeName("lab1-control-plane"), Role.CONTROL_PLANE, "10.0.1.2", CP_ID),
        NodeInfo(NodeName("lab1-worker"), Role.WORKER, "10.0.1.3", W_ID),
    ]
    assert seen == [expected]
    assert p.nodes() == expected
    assert p.capabilities().host_address_for_nodes == "172.30.0.1"  # from docker inspect


def test_default_network_is_kinds_and_no_network_steps(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(
        containers=[
            container("lab1-control-plane", "control-plane", "lab1", "172.18.0.2"),
            container("lab1-worker", "worker", "lab1", "172.18.0.3"),
        ]
    )
    p = provider(fake, tmp_path)
    p.provision(spec())
    commands = [c[:3] for c in fake.calls()]
    assert ["docker", "network", "create"] not in commands
    assert all(env is None for env in fake.network_envs())
    assert [n.ip for n in p.nodes()] == ["172.18.0.2", "172.18.0.3"]


def test_create_failure_undoes_cluster_and_network_in_reverse(
    fake: FakeCLI, tmp_path: Path
) -> None:
    fake.set(fail_create=True)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError) as info:
        p.provision(spec())
    err = info.value
    assert err.step == "create-cluster"
    assert err.undone == ("create-cluster", "write-config", "ensure-network", "check-kind-version")
    cause = err.cause
    assert isinstance(cause, CommandError)
    assert "failed to init node with kubeadm" in str(cause)
    assert "kind create cluster --name lab1" in str(cause)  # pasteable command
    state = tmp_path / "state"
    assert fake.calls()[-2:] == [
        ["kind", "delete", "cluster", "--name", "lab1", "--kubeconfig", str(state / "kubeconfig")],
        ["docker", "network", "rm", "ccm-lab-lab1"],
    ]
    assert fake.network_envs()[-2] == "ccm-lab-lab1"  # delete targets the same network


def test_create_failure_with_retain_leaves_everything(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(fail_create=True)
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError) as info:
        p.provision(spec(), retain=True)
    assert info.value.retained
    verbs = [c[:3] for c in fake.calls()]
    assert ["kind", "delete", "cluster"] not in verbs
    assert ["docker", "network", "rm"] not in verbs


def test_existing_network_is_reused_and_not_removed_on_failure(
    fake: FakeCLI, tmp_path: Path
) -> None:
    fake.set(fail_create=True, networks=["ccm-lab-lab1"])
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    with pytest.raises(ProvisionError):
        p.provision(spec())
    verbs = [c[:3] for c in fake.calls()]
    assert ["docker", "network", "create"] not in verbs
    assert ["docker", "network", "rm"] not in verbs
    assert ["kind", "delete", "cluster"] in verbs


def test_external_load_balancer_container_is_not_a_node(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(
        containers=[
            container("lab1-external-load-balancer", "external-load-balancer", "lab1", "10.0.1.9"),
            container("lab1-control-plane", "control-plane", "lab1", "10.0.1.2"),
            container("lab1-control-plane2", "control-plane", "lab1", "10.0.1.4"),
        ]
    )
    p = provider(fake, tmp_path)
    assert [(n.name, n.role) for n in p.nodes()] == [
        ("lab1-control-plane", Role.CONTROL_PLANE),
        ("lab1-control-plane2", Role.CONTROL_PLANE),
    ]


def test_missing_node_container_fails_discovery_and_deletes(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(containers=[container("lab1-control-plane", "control-plane", "lab1", "172.18.0.2")])
    p = provider(fake, tmp_path)
    with pytest.raises(ProvisionError, match=r"missing: \['lab1-worker'\]") as info:
        p.provision(spec())
    assert info.value.step == "discover-nodes"
    assert ["kind", "delete", "cluster"] in [c[:3] for c in fake.calls()]


def test_old_kind_is_refused_before_anything_is_created(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(kind_version="kind v0.20.0 go1.20.4 linux/amd64")
    p = provider(fake, tmp_path)
    with pytest.raises(ProvisionError, match=r"built by kind v0\.29\.0.*install kind v0\.29\.0"):
        p.provision(spec("1.33"))
    assert fake.calls() == [["kind", "version"]]


def test_delete_logs_load_and_host_address(fake: FakeCLI, tmp_path: Path) -> None:
    fake.set(networks=["ccm-lab-lab1"], owned_networks=["ccm-lab-lab1"], gateway="10.0.0.1")
    p = provider(fake, tmp_path, network_subnet="10.0.0.0/16")
    assert p.host_address() == "10.0.0.1"
    logs = p.logs(tmp_path / "logs")
    assert (logs / "kind-version.txt").exists()
    p.load_image("img:1", nodes=["lab1-worker"])
    p.delete()
    state = tmp_path / "state"
    assert fake.calls() == [
        ["docker", "network", "inspect", "ccm-lab-lab1", "--format",
         "{{range .IPAM.Config}}{{.Gateway}} {{end}}"],
        ["kind", "export", "logs", str(tmp_path / "logs"), "--name", "lab1"],
        ["kind", "load", "docker-image", "img:1", "--name", "lab1", "--nodes", "lab1-worker"],
        ["kind", "delete", "cluster", "--name", "lab1", "--kubeconfig", str(state / "kubeconfig")],
        ["docker", "network", "ls", "--filter", "label=io.x-k8s.ccm-lab.cluster=lab1",
         "--format", "{{.Name}}"],
        ["docker", "network", "rm", "ccm-lab-lab1"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "version", "explicit", "problem"),
    [
        ((0, 20, 0), "1.22", False, None),
        ((0, 29, 0), "1.22", False, r"only known to work with kind v0\.20\.0"),
        ((0, 22, 0), "1.29", False, None),
        ((0, 32, 0), "1.29", False, None),
        ((0, 21, 0), "1.29", False, r"older"),
        ((0, 31, 0), "1.36", False, r"v1beta4"),
        ((0, 31, 0), "1.36", True, r"v1beta4"),
        ((0, 10, 0), "1.29", True, None),
        ((0, 32, 0), "latest", False, None),
    ],
)
def test_kind_version_pairing(
    kind: tuple[int, int, int], version: str, explicit: bool, problem: str | None
) -> None:
    kube = KubeVersion.parse(version)
    if problem is None:
        check_kind_version(kind, kube, explicit_image=explicit)
    else:
        with pytest.raises(KindVersionError, match=problem):
            check_kind_version(kind, kube, explicit_image=explicit)


def test_parse_kind_version() -> None:
    assert parse_kind_version("kind v0.33.0-alpha.12+fed268827e21ab go1.24 linux/arm64") == (
        0,
        33,
        0,
    )
    with pytest.raises(KindVersionError, match="cannot read a version"):
        parse_kind_version("something else")
