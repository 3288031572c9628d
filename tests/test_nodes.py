"""lab.nodes: the hand-applied node fixes, as pure patch bodies and against the simulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from lab.cluster.base import Role
from lab.cluster.kubeapi import raw
from lab.cluster.node_shapes import node_manifest
from lab.kube.server import KubeServer
from lab.nodes import (
    NodeNotFound,
    ProviderIDImmutable,
    aws_provider_id,
    exclude,
    exclude_patch,
    fix_provided_ip,
    include,
    include_patch,
    provided_ip_patch,
    provider_id_patch,
    set_provider_id,
)

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
MASTER = "node-role.kubernetes.io/master"


# --- pure bodies -------------------------------------------------------------------------


def test_provided_ip_patch_bodies() -> None:
    key = "alpha.kubernetes.io/provided-node-ip"
    assert provided_ip_patch("10.0.1.5") == {"metadata": {"annotations": {key: "10.0.1.5"}}}
    assert provided_ip_patch("10.0.1.5, fd00::5") == {
        "metadata": {"annotations": {key: "10.0.1.5,fd00::5"}}
    }
    with pytest.raises(ValueError, match=r"'10\.0\.1' is not an IP address"):
        provided_ip_patch("10.0.1")
    with pytest.raises(ValueError, match="is unspecified"):
        provided_ip_patch("0.0.0.0")
    with pytest.raises(ValueError, match="expected one address"):
        provided_ip_patch("10.0.0.1,10.0.0.2,10.0.0.3")


def test_include_and_exclude_bodies() -> None:
    assert include_patch() == {
        "metadata": {
            "labels": {
                EXCLUDE: None,
                MASTER: None,
                "alpha.service-controller.kubernetes.io/exclude-balancer": None,
            }
        }
    }
    assert exclude_patch() == {"metadata": {"labels": {EXCLUDE: "true"}}}
    assert exclude_patch(legacy_master_label=True) == {
        "metadata": {"labels": {EXCLUDE: "true", MASTER: ""}}
    }


def test_provider_id_validation() -> None:
    assert aws_provider_id("us-east-1a", "i-0123456789abcdef0") == (
        "aws:///us-east-1a/i-0123456789abcdef0"
    )
    assert provider_id_patch("kind://docker/c/n") == {"spec": {"providerID": "kind://docker/c/n"}}
    assert provider_id_patch("aws:///z/i-0123abcd", resource_version="7") == {
        "spec": {"providerID": "aws:///z/i-0123abcd"},
        "metadata": {"resourceVersion": "7"},
    }
    with pytest.raises(ValueError, match=r"'i-0123456' is not of the form <scheme>://<id>"):
        provider_id_patch("i-0123456")  # what the seed 000 write-up passed
    with pytest.raises(ValueError, match="aws:///<availability-zone>/i-<hex>"):
        aws_provider_id("us-east-1a", "instance-1")


# --- against the simulator ------------------------------------------------------------------


@pytest.fixture
def core() -> Iterator[client.CoreV1Api]:
    with KubeServer() as sim:
        api = client.CoreV1Api(sim.api_client())
        for name, role in (("cp", Role.CONTROL_PLANE), ("w1", Role.WORKER)):
            manifest = node_manifest(version="1.20", name=name, ip="172.18.0.2", role=role)
            body = client.V1Node.from_dict(dict(manifest))
            assert body is not None
            api.create_node(body)
        yield api
        assert sim.internal_errors() == []


def labels(core: client.CoreV1Api, name: str) -> dict[str, Any]:
    node = raw(core.read_node(name, _preload_content=False))
    result = node["metadata"].get("labels") or {}
    assert isinstance(result, dict)
    return result


def test_fix_provided_ip(core: client.CoreV1Api) -> None:
    node = fix_provided_ip(core, "cp", "10.0.1.10")
    assert node["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.10"
    stored = raw(core.read_node("cp", _preload_content=False))
    assert stored["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] == "10.0.1.10"
    # other annotations untouched
    assert (
        "volumes.kubernetes.io/controller-managed-attach-detach"
        in stored["metadata"]["annotations"]
    )


def test_include_removes_master_and_exclusion_labels(core: client.CoreV1Api) -> None:
    assert MASTER in labels(core, "cp")  # kubeadm 1.20 control plane
    include(core, "cp")
    after = labels(core, "cp")
    assert MASTER not in after
    assert EXCLUDE not in after
    assert after["node-role.kubernetes.io/control-plane"] == ""  # role display kept
    include(core, "cp")  # idempotent


def test_exclude_then_include_worker(core: client.CoreV1Api) -> None:
    exclude(core, "w1", legacy_master_label=True)
    assert labels(core, "w1")[EXCLUDE] == "true"
    assert labels(core, "w1")[MASTER] == ""
    include(core, "w1")
    assert EXCLUDE not in labels(core, "w1")
    assert MASTER not in labels(core, "w1")


def test_set_provider_id_once_then_immutable(core: client.CoreV1Api) -> None:
    pid = aws_provider_id("us-east-1a", "i-0aaaaaaaaaaaaaaa1")
    node = set_provider_id(core, "w1", pid)
    assert node["spec"]["providerID"] == pid
    assert set_provider_id(core, "w1", pid)["spec"]["providerID"] == pid  # same value: no-op
    with pytest.raises(ProviderIDImmutable) as info:
        set_provider_id(core, "w1", aws_provider_id("us-east-1b", "i-0bbbbbbbbbbbbbbb2"))
    message = str(info.value)
    assert (
        'node "w1" already has spec.providerID "aws:///us-east-1a/i-0aaaaaaaaaaaaaaa1"' in message
    )
    assert "aws:///us-east-1b/i-0bbbbbbbbbbbbbbb2" in message


@pytest.mark.parametrize(
    ("action", "call"),
    [
        ("fix_provided_ip", lambda api: fix_provided_ip(api, "ghost", "10.0.0.1")),
        ("include", lambda api: include(api, "ghost")),
        ("exclude", lambda api: exclude(api, "ghost")),
        ("set_provider_id", lambda api: set_provider_id(api, "ghost", "aws:///z/i-0123abcd")),
    ],
)
def test_missing_node_is_named(core: client.CoreV1Api, action: str, call: Any) -> None:
    with pytest.raises(NodeNotFound, match=f'{action}: node "ghost" not found') as info:
        call(core)
    assert info.value.node == "ghost"
