"""The Node/Lease a kubelet with --cloud-provider=external registers, per Kubernetes version."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1Lease, V1Node

from lab.cluster.base import Role
from lab.cluster.node_shapes import (
    NodeIPFlag,
    lease_manifest,
    micro_time,
    node_manifest,
)

NOW = datetime(2026, 11, 22, 13, 0, 0, 123456, tzinfo=UTC)
UNINIT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
MASTER = "node-role.kubernetes.io/master"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
BASE_LABELS = {
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
}


def cp(version: str, **kwargs: Any) -> dict[str, Any]:
    return dict(
        node_manifest(
            version=version, name="cp", ip="10.0.1.10", role=Role.CONTROL_PLANE, now=NOW, **kwargs
        )
    )


def worker(version: str, **kwargs: Any) -> dict[str, Any]:
    return dict(node_manifest(version=version, name="w1", ip="10.0.1.11", now=NOW, **kwargs))


# version -> (control-plane role labels, control-plane taint keys, kubeletVersion)
ROLE_CASES = {
    "1.20": ({MASTER: "", CONTROL_PLANE: ""}, [MASTER], "v1.20.0"),
    "1.22": ({MASTER: "", CONTROL_PLANE: "", EXCLUDE: ""}, [MASTER], "v1.22.17"),
    "1.29": ({CONTROL_PLANE: "", EXCLUDE: ""}, [CONTROL_PLANE], "v1.29.2"),
    "1.33": ({CONTROL_PLANE: "", EXCLUDE: ""}, [CONTROL_PLANE], "v1.33.1"),
    "latest": ({CONTROL_PLANE: "", EXCLUDE: ""}, [CONTROL_PLANE], "v1.36.1"),
}


@pytest.mark.parametrize("version", list(ROLE_CASES))
def test_control_plane_shape(version: str) -> None:
    role_labels, taint_keys, kubelet_version = ROLE_CASES[version]
    node = cp(version, provider_id="aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1")
    assert node["metadata"]["name"] == "cp"
    assert node["metadata"]["labels"] == {
        **BASE_LABELS,
        "kubernetes.io/hostname": "cp",
        **role_labels,
    }
    assert node["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.10"
    assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1"
    expected_taints = [{"key": k, "effect": "NoSchedule"} for k in taint_keys] + [UNINIT]
    assert node["spec"]["taints"] == expected_taints
    assert node["status"]["nodeInfo"]["kubeletVersion"] == kubelet_version
    assert node["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.1.10"},
        {"type": "Hostname", "address": "cp"},
    ]


@pytest.mark.parametrize("version", list(ROLE_CASES))
def test_worker_shape(version: str) -> None:
    node = worker(version)
    assert node["metadata"]["labels"] == {**BASE_LABELS, "kubernetes.io/hostname": "w1"}
    assert node["spec"] == {"taints": [UNINIT]}  # no providerID until the CCM sets it
    conditions = {c["type"]: c for c in node["status"]["conditions"]}
    assert [c["type"] for c in node["status"]["conditions"]] == [
        "MemoryPressure", "DiskPressure", "PIDPressure", "Ready",
    ]  # fmt: skip
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Ready"]["reason"] == "KubeletReady"
    assert conditions["MemoryPressure"]["status"] == "False"
    assert conditions["Ready"]["lastHeartbeatTime"] == "2026-11-22T13:00:00Z"
    status = node["status"]
    assert status["capacity"]["pods"] == "110"
    assert status["allocatable"] == status["capacity"]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}


def test_1_24_applies_both_taints_and_drops_master_label() -> None:
    node = cp("1.24")
    assert MASTER not in node["metadata"]["labels"]
    assert [t["key"] for t in node["spec"]["taints"]] == [
        MASTER, CONTROL_PLANE, "node.cloudprovider.kubernetes.io/uninitialized",
    ]  # fmt: skip


def test_1_19_is_master_only() -> None:
    labels = cp("1.19")["metadata"]["labels"]
    assert MASTER in labels
    assert CONTROL_PLANE not in labels
    assert EXCLUDE not in labels


def test_single_node_kind_control_plane_keeps_only_the_uninitialized_taint() -> None:
    assert cp("1.29", control_plane_taints=False)["spec"]["taints"] == [UNINIT]


@pytest.mark.parametrize(
    ("version", "flag", "seeded"),
    [
        ("1.22", NodeIPFlag.ABSENT, True),
        ("1.28", NodeIPFlag.ABSENT, True),
        ("1.29", NodeIPFlag.ABSENT, False),
        ("1.33", NodeIPFlag.ABSENT, False),
        ("1.28", NodeIPFlag.UNSPECIFIED, True),
        ("1.29", NodeIPFlag.UNSPECIFIED, False),
        ("1.30", NodeIPFlag.UNSPECIFIED, True),
        ("latest", NodeIPFlag.UNSPECIFIED, True),
        ("1.20", NodeIPFlag.SPECIFIC, True),
        ("latest", NodeIPFlag.SPECIFIC, True),
    ],
)
def test_initial_addresses_by_version_and_node_ip_flag(
    version: str, flag: NodeIPFlag, seeded: bool
) -> None:
    node = worker(version, node_ip_flag=flag)
    expected = [
        {"type": "InternalIP", "address": "10.0.1.11"},
        {"type": "Hostname", "address": "w1"},
    ]
    assert node["status"]["addresses"] == (expected if seeded else [])
    annotations = node["metadata"]["annotations"]
    if flag is NodeIPFlag.SPECIFIC:
        assert annotations["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.11"
    else:
        assert "alpha.kubernetes.io/provided-node-ip" not in annotations


def test_kube_proxy_version_reported_only_by_older_kubelets() -> None:
    assert worker("1.29")["status"]["nodeInfo"]["kubeProxyVersion"] == "v1.29.2"
    assert worker("1.32")["status"]["nodeInfo"]["kubeProxyVersion"] == "v1.32.0"
    assert worker("1.33")["status"]["nodeInfo"]["kubeProxyVersion"] == ""


def test_grace_period_default_by_version() -> None:
    from lab.versions.provisioning import node_monitor_grace_period
    from lab.versions.release import KubeVersion

    assert node_monitor_grace_period(KubeVersion.parse("1.31")) == 40.0
    assert node_monitor_grace_period(KubeVersion.parse("1.32")) == 50.0


def test_extra_labels_and_capacity() -> None:
    node = worker(
        "1.29",
        labels={"topology.kubernetes.io/zone": "us-east-1a"},
        capacity={"cpu": "4", "memory": "16Gi", "pods": "58"},
    )
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "us-east-1a"
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "58"}


def test_bad_ip_names_node_and_value() -> None:
    with pytest.raises(ValueError, match=r"node 'w1': ip '10\.0\.1' is not an IP address"):
        node_manifest(version="1.29", name="w1", ip="10.0.1")


@pytest.mark.parametrize("version", list(ROLE_CASES))
def test_manifests_validate_against_the_official_client_models(version: str) -> None:
    # The kubernetes client's pydantic models forbid unknown fields: a typo fails here.
    assert V1Node.from_dict(cp(version, provider_id="aws:///a/i-1")) is not None
    assert V1Node.from_dict(worker(version)) is not None


def test_lease_shape() -> None:
    lease = lease_manifest(name="w1", node_uid="uid-1", now=NOW)
    assert lease["metadata"] == {
        "name": "w1",
        "namespace": "kube-node-lease",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "w1", "uid": "uid-1"}],
    }
    assert lease["spec"] == {
        "holderIdentity": "w1",
        "leaseDurationSeconds": 40,
        "renewTime": "2026-11-22T13:00:00.123456Z",
    }
    assert V1Lease.from_dict(dict(lease)) is not None
    assert micro_time(NOW) == "2026-11-22T13:00:00.123456Z"


def test_kind_single_node_adjustments() -> None:
    from lab.versions.provisioning import kind_single_node_keeps_exclusion_label
    from lab.versions.release import KubeVersion

    node = cp("1.33", control_plane_taints=False, exclusion_label=False)
    assert EXCLUDE not in node["metadata"]["labels"]
    assert CONTROL_PLANE in node["metadata"]["labels"]
    assert node["spec"]["taints"] == [UNINIT]
    # kind v0.20.0 (the 1.22 pairing) kept the label; v0.22.0+ removes it
    assert kind_single_node_keeps_exclusion_label(KubeVersion.parse("1.22"))
    assert not kind_single_node_keeps_exclusion_label(KubeVersion.parse("1.29"))
    assert not kind_single_node_keeps_exclusion_label(KubeVersion.parse("1.30"))  # unpinned
