"""kind config rendering per Kubernetes version, parsed back and checked field by field."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.cluster.base import NodeSpec, ProviderID, Role
from lab.cluster.kind_config import config_document, kind_node_names, render_config
from lab.versions.release import LATEST, KubeVersion, node_image

EXAMPLES = Path(__file__).resolve().parents[2] / "kind" / "examples"

CP_ID = ProviderID("aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1")
W1_ID = ProviderID("aws:///us-east-1a/i-0bbbbbbbbbbbbbbb2")
W2_ID = ProviderID("aws:///us-east-1b/i-0ccccccccccccccc3")
NODES = (
    NodeSpec(Role.CONTROL_PLANE, provider_id=CP_ID),
    NodeSpec(Role.WORKER, provider_id=W1_ID),
    NodeSpec(Role.WORKER, provider_id=W2_ID),
)


def render(version: str) -> dict[str, Any]:
    text = render_config(cluster_name="ccm-lab", version=version, nodes=NODES)
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def patches(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Cluster-wide patches keyed by kubeadm kind, each parsed from its YAML string."""
    parsed = [yaml.safe_load(p) for p in doc["kubeadmConfigPatches"]]
    return {p["kind"]: p for p in parsed}


def node_patches(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [yaml.safe_load(p) for p in node.get("kubeadmConfigPatches", [])]


def args_as_dict(value: Any) -> dict[str, str]:
    """Normalise map-style (<= v1beta3) and list-style (v1beta4) extraArgs for comparison."""
    if isinstance(value, list):
        return {item["name"]: item["value"] for item in value}
    assert isinstance(value, dict)
    return value


# (version, kubeadm api, apiserver flag expected, image tag, extraArgs are lists)
CASES = [
    ("1.22", "kubeadm.k8s.io/v1beta2", True, "v1.22.17", False),
    ("1.29", "kubeadm.k8s.io/v1beta3", True, "v1.29.2", False),
    ("1.33", "kubeadm.k8s.io/v1beta3", False, "v1.33.1", False),
    ("latest", "kubeadm.k8s.io/v1beta4", False, "v1.36.1", True),
]


@pytest.mark.parametrize(("version", "api", "apiserver_flag", "tag", "lists"), CASES)
def test_rendered_config_fields(
    version: str, api: str, apiserver_flag: bool, tag: str, lists: bool
) -> None:
    doc = render(version)
    assert doc["kind"] == "Cluster"
    assert doc["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert doc["name"] == "ccm-lab"
    assert doc["networking"] == {"apiServerAddress": "127.0.0.1"}

    cluster = patches(doc)
    assert set(cluster) == {"ClusterConfiguration", "InitConfiguration", "JoinConfiguration"}
    for kind, patch in cluster.items():
        assert patch["apiVersion"] == api, kind
    cc = cluster["ClusterConfiguration"]
    kcm_args = cc["controllerManager"]["extraArgs"]
    assert isinstance(kcm_args, list) is lists
    assert args_as_dict(kcm_args) == {"cloud-provider": "external"}
    if apiserver_flag:
        assert args_as_dict(cc["apiServer"]["extraArgs"]) == {"cloud-provider": "external"}
    else:
        assert "apiServer" not in cc  # the flag is gone in 1.33: setting it breaks the apiserver
    for kind in ("InitConfiguration", "JoinConfiguration"):
        kubelet_args = cluster[kind]["nodeRegistration"]["kubeletExtraArgs"]
        assert isinstance(kubelet_args, list) is lists
        assert args_as_dict(kubelet_args) == {"cloud-provider": "external"}

    nodes = doc["nodes"]
    assert [n["role"] for n in nodes] == ["control-plane", "worker", "worker"]
    image = node_image(version)
    for node in nodes:
        assert node["image"] == f"kindest/node:{tag}@sha256:{image.digest}"
        assert len(image.digest) == 64
    expected = [
        ("InitConfiguration", CP_ID),
        ("JoinConfiguration", W1_ID),
        ("JoinConfiguration", W2_ID),
    ]
    for node, (kind, provider_id) in zip(nodes, expected, strict=True):
        (patch,) = node_patches(node)
        assert patch["kind"] == kind
        assert patch["apiVersion"] == api
        extra = patch["nodeRegistration"]["kubeletExtraArgs"]
        assert isinstance(extra, list) is lists
        # only provider-id: kind's own node-ip / node-labels must survive the merge
        assert args_as_dict(extra) == {"provider-id": provider_id}


def test_kubeadm_api_boundaries() -> None:
    def api_of(version: str) -> str:
        return str(patches(render(version))["ClusterConfiguration"]["apiVersion"])

    assert api_of("1.22") == "kubeadm.k8s.io/v1beta2"
    assert api_of("1.27") == "kubeadm.k8s.io/v1beta3"
    assert api_of("1.32") == "kubeadm.k8s.io/v1beta3"
    assert api_of("1.35") == "kubeadm.k8s.io/v1beta3"
    assert api_of("1.36") == "kubeadm.k8s.io/v1beta4"


def test_apiserver_flag_boundary() -> None:
    assert "apiServer" in patches(render("1.32"))["ClusterConfiguration"]
    assert "apiServer" not in patches(render("1.33"))["ClusterConfiguration"]


def test_node_without_provider_id_keeps_kinds_default() -> None:
    doc = config_document(
        cluster_name="c",
        version="1.29",
        nodes=[NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER, provider_id=W1_ID)],
    )
    assert "kubeadmConfigPatches" not in doc["nodes"][0]
    assert "kubeadmConfigPatches" in doc["nodes"][1]


def test_explicit_image_labels_and_feature_gates() -> None:
    doc = config_document(
        cluster_name="c",
        version="1.30",  # no pinned image for 1.30: an explicit image is fine
        nodes=[NodeSpec(Role.CONTROL_PLANE)],
        image="kindest/node:v1.30.0",
        node_labels={"topology.kubernetes.io/zone": "us-east-1a"},
        feature_gates={"SomeGate": True},
    )
    assert doc["nodes"][0]["image"] == "kindest/node:v1.30.0"
    assert doc["nodes"][0]["labels"] == {"topology.kubernetes.io/zone": "us-east-1a"}
    assert doc["featureGates"] == {"SomeGate": True}


def test_unpinned_version_without_image_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"no pinned kindest/node image for kubernetes v1\.30"):
        config_document(cluster_name="c", version="1.30", nodes=[NodeSpec(Role.CONTROL_PLANE)])


def test_first_node_must_be_control_plane_and_names_must_match_kind() -> None:
    with pytest.raises(ValueError, match=r"nodes\[0\]\.role must be control-plane"):
        config_document(cluster_name="c", version="1.29", nodes=[NodeSpec(Role.WORKER)])
    with pytest.raises(ValueError, match=r"nodes\[1\]\.name 'w1' differs.*'c-worker'"):
        config_document(
            cluster_name="c",
            version="1.29",
            nodes=[NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER, name="w1")],
        )


def test_kind_node_names_follow_kinds_namer() -> None:
    roles = [Role.CONTROL_PLANE, Role.CONTROL_PLANE, Role.WORKER, Role.WORKER, Role.WORKER]
    assert kind_node_names("lab", roles) == [
        "lab-control-plane",
        "lab-control-plane2",
        "lab-worker",
        "lab-worker2",
        "lab-worker3",
    ]


def test_version_parsing() -> None:
    assert KubeVersion.parse("v1.29.2") == KubeVersion(1, 29, 2)
    assert KubeVersion.parse("latest") == LATEST
    assert KubeVersion.parse("1.22") < KubeVersion.parse("1.22.1") < KubeVersion.parse("1.29")
    with pytest.raises(ValueError, match=r"'1\.x' is not of the form"):
        KubeVersion.parse("1.x")


@pytest.mark.parametrize("version", ["1.22", "1.29", "1.33", "latest"])
def test_checked_in_examples_match_the_renderer(version: str) -> None:
    """kind/examples/ are what users read; they must be exactly what the lab renders."""
    path = EXAMPLES / f"ccm-lab-{version}.yaml"
    text = render_config(cluster_name="ccm-lab", version=version, nodes=NODES)
    if os.environ.get("CCM_LAB_UPDATE_EXAMPLES") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text, "regenerate with CCM_LAB_UPDATE_EXAMPLES=1"


def test_per_node_labels_merge_over_cluster_labels() -> None:
    doc = config_document(
        cluster_name="c",
        version="1.29",
        nodes=[
            NodeSpec(Role.CONTROL_PLANE),
            NodeSpec(Role.WORKER, labels={"topology.kubernetes.io/zone": "us-east-1b"}),
        ],
        node_labels={"topology.kubernetes.io/zone": "us-east-1a", "tier": "lab"},
    )
    assert doc["nodes"][0]["labels"] == {"topology.kubernetes.io/zone": "us-east-1a", "tier": "lab"}
    assert doc["nodes"][1]["labels"] == {"topology.kubernetes.io/zone": "us-east-1b", "tier": "lab"}
