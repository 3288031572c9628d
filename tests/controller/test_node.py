"""Cloud node controller: initialisation, provided-node-ip, label reconcile, address refresh."""

from __future__ import annotations

import pytest

from controller.cloud import TAINT_UNINITIALIZED, NodeAddress
from controller.fake import FakeInstance
from controller.nodeutil import NodeIPError, addresses_for_node_ip
from tests.controller.builders import (
    NodeHarness,
    edit,
    labelled,
    make_node,
    provided_ip,
    provider_id,
    uninitialized,
)

INSTANCE = FakeInstance("i-0abc", private_ip="10.0.1.5", public_ip="54.1.2.3")


@pytest.fixture
def h() -> NodeHarness:
    harness = NodeHarness()
    harness.cloud.add_instance(INSTANCE, node_name="ip-10-0-1-5.ec2.internal")
    return harness


def test_initializes_tainted_node_from_instance_metadata(h: NodeHarness) -> None:
    h.kube.create("nodes", make_node("ip-10-0-1-5.ec2.internal", uninitialized()))
    assert [r.outcome for r in h.nodes.drain()] == ["success", "success"]
    node = h.kube.get("nodes", "ip-10-0-1-5.ec2.internal")
    assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0abc"
    assert node["spec"]["taints"] == []
    labels = node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert labels["beta.kubernetes.io/instance-type"] == "m5.large"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert labels["failure-domain.beta.kubernetes.io/zone"] == "us-east-1a"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["failure-domain.beta.kubernetes.io/region"] == "us-east-1"
    assert labels["topology.k8s.aws/zone-id"] == "use1-az1"
    assert node["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.1.5"},
        {"type": "ExternalIP", "address": "54.1.2.3"},
        {"type": "InternalDNS", "address": "ip-10-0-1-5.ec2.internal"},
        {"type": "Hostname", "address": "ip-10-0-1-5.ec2.internal"},
    ]
    [synced] = h.kube.events_for("ip-10-0-1-5.ec2.internal", "Synced")
    assert synced["message"] == "Node synced successfully"
    assert synced["source"] == {"component": "cloud-node-controller"}
    assert synced["metadata"]["namespace"] == "default"


def test_existing_provider_id_and_labels_are_kept(h: NodeHarness) -> None:
    h.kube.create(
        "nodes",
        make_node(
            "n1",
            uninitialized(),
            provider_id("aws:///us-east-1a/i-0abc"),
            labelled("topology.k8s.aws/zone-id", "mine"),
        ),
    )
    h.nodes.drain()
    node = h.kube.get("nodes", "n1")
    assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0abc"
    assert node["metadata"]["labels"]["topology.k8s.aws/zone-id"] == "mine"


def test_untainted_nodes_are_not_initialized(h: NodeHarness) -> None:
    h.kube.create("nodes", make_node("ip-10-0-1-5.ec2.internal"))
    h.nodes.drain()
    assert h.cloud.calls_of("instance_metadata") == []


def test_provided_node_ip_mismatch_keeps_taint_and_retries() -> None:
    """Catalog provided-node-ip (reproduce): the kubelet's IP is not a cloud address."""
    h = NodeHarness()
    h.cloud.add_instance(INSTANCE, node_name="kind-worker")
    h.kube.create("nodes", make_node("kind-worker", uninitialized(), provided_ip("172.18.0.2")))
    [result] = h.nodes.drain()
    assert result.outcome == "error"
    assert result.requeue_after == 5.0
    expected = (
        "failed to get node modifiers from cloud provider: provided node ip for node "
        '"kind-worker" is not valid: failed to get node address from cloud provider that '
        "matches ip: 172.18.0.2"
    )
    assert str(result.error) == expected
    node = h.kube.get("nodes", "kind-worker")
    assert [t["key"] for t in node["spec"]["taints"]] == [TAINT_UNINITIALIZED]
    assert "providerID" not in node["spec"]
    assert "node.kubernetes.io/instance-type" not in node["metadata"]["labels"]
    [event] = h.kube.events_for("kind-worker", "SyncNodeFailed")
    assert event["type"] == "Warning"
    assert expected in event["message"]
    h.clock.advance(5)
    [again] = h.nodes.drain()
    assert again.requeue_after == 10.0  # still failing, backing off

    # Fixed (write-up: patch the annotation to the instance's private IP).
    node = h.kube.get("nodes", "kind-worker")
    h.kube.update("nodes", edit(node, provided_ip("10.0.1.5")))
    h.nodes.drain()
    node = h.kube.get("nodes", "kind-worker")
    assert node["spec"]["taints"] == []
    assert node["spec"]["providerID"] == "aws:///us-east-1a/i-0abc"
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "10.0.1.5"}


def test_lookup_failure_is_retried_with_backoff() -> None:
    h = NodeHarness()
    h.kube.create("nodes", make_node("node00.k8s.internal", uninitialized()))
    [result] = h.nodes.drain()
    assert result.outcome == "error"
    assert "no instance found for node 'node00.k8s.internal'" in str(result.error)
    assert h.kube.reasons("node00.k8s.internal") == ["SyncNodeFailed"]


def test_beta_labels_are_copied_to_ga_on_initialized_nodes(h: NodeHarness) -> None:
    h.kube.create(
        "nodes",
        make_node("n1", labelled("failure-domain.beta.kubernetes.io/zone", "us-east-1b")),
    )
    h.nodes.drain()
    labels = h.kube.get("nodes", "n1")["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"


def test_conflict_on_put_is_retried_with_fresh_object(h: NodeHarness) -> None:
    from controller.runtime.kube import Conflict

    h.kube.fail("replace_node", Conflict("stale"), Conflict("stale"))
    h.kube.create("nodes", make_node("ip-10-0-1-5.ec2.internal", uninitialized()))
    assert h.nodes.drain()[0].outcome == "success"
    assert [v for v, _ in h.kube.requests].count("replace_node") == 3


def test_periodic_refresh_patches_changed_addresses(h: NodeHarness) -> None:
    h.kube.create("nodes", make_node("ip-10-0-1-5.ec2.internal", uninitialized()))
    h.nodes.drain()
    h.cloud.add_instance(
        FakeInstance("i-0abc", private_ip="10.0.1.5", public_ip="3.3.3.3"),
        node_name="ip-10-0-1-5.ec2.internal",
    )
    before = [v for v, _ in h.kube.requests].count("patch_node_addresses")
    h.nodes.update_node_addresses()
    addresses = h.kube.get("nodes", "ip-10-0-1-5.ec2.internal")["status"]["addresses"]
    assert {"type": "ExternalIP", "address": "3.3.3.3"} in addresses
    h.nodes.update_node_addresses()  # unchanged: no second patch
    assert [v for v, _ in h.kube.requests].count("patch_node_addresses") == before + 1


def test_addresses_for_node_ip_puts_match_first_and_drops_same_type() -> None:
    cloud = (
        NodeAddress("InternalIP", "10.0.0.1"),
        NodeAddress("InternalIP", "10.0.0.2"),
        NodeAddress("ExternalIP", "1.1.1.1"),
        NodeAddress("Hostname", "h"),
    )
    assert addresses_for_node_ip(cloud, "10.0.0.2") == (
        NodeAddress("InternalIP", "10.0.0.2"),
        NodeAddress("ExternalIP", "1.1.1.1"),
        NodeAddress("Hostname", "h"),
    )
    with pytest.raises(NodeIPError, match=r"matches ip: 9\.9\.9\.9"):
        addresses_for_node_ip(cloud, "9.9.9.9")
    # Kubernetes ParseNodeIPAnnotation: one IP or an IPv4/IPv6 pair, each item exactly an IP
    for bad in ("10.0.0.1,10.0.0.2", "10.0.0.1,", " 10.0.0.2", "", "fe80::1%eth0", "0.0.0.0,::1"):
        with pytest.raises(NodeIPError, match="failed to parse node IP"):
            addresses_for_node_ip(cloud, bad)


def test_provided_node_ip_is_compared_as_an_ip() -> None:
    """The IPv6 form the kubelet wrote need not be the cloud's form; before, ours compared
    text, so ``2600:1f14::ba3d`` did not match ``2600:1f14:0:0:0:0:0:ba3d``. IPv4 octets with
    leading zeros and IPv4-mapped IPv6 compare as Go's ParseIPSloppy / net.IP.Equal do."""
    cloud = (
        NodeAddress("InternalIP", "10.0.0.1"),
        NodeAddress("InternalIP", "2600:1f14:0:0:0:0:0:ba3d"),
        NodeAddress("Hostname", "h"),
    )
    assert addresses_for_node_ip(cloud, "2600:1f14::BA3D") == (
        NodeAddress("InternalIP", "2600:1f14:0:0:0:0:0:ba3d"),
        NodeAddress("Hostname", "h"),
    )
    assert addresses_for_node_ip(cloud, "010.0.0.001")[0] == NodeAddress("InternalIP", "10.0.0.1")
    assert addresses_for_node_ip(cloud, "::ffff:10.0.0.1")[0] == NodeAddress(
        "InternalIP", "10.0.0.1"
    )
