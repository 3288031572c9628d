"""The provider contract's value types and the legacy-behaviour registry."""

from __future__ import annotations

import pytest

from controller.cloud import (
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    load_balancer_name,
)
from controller.legacy import BEHAVIORS, LegacyFlags, UnknownLegacyBehavior


def test_load_balancer_name_is_a_plus_uid_without_dashes_cut_to_32() -> None:
    svc = Service(namespace="default", name="web", uid="1f2e3d4c-5b6a-7988-a7b6-c5d4e3f2a1b0")
    name = load_balancer_name(svc)
    assert name == "a1f2e3d4c5b6a7988a7b6c5d4e3f2a1b"
    assert len(name) == 32


def test_node_from_api_reads_taints_readiness_and_provider_id() -> None:
    node = Node.from_api(
        {
            "metadata": {"name": "n1", "labels": {"a": "b"}},
            "spec": {
                "providerID": "aws:///us-east-1a/i-0123",
                "taints": [
                    {
                        "key": "node.cloudprovider.kubernetes.io/uninitialized",
                        "effect": "NoSchedule",
                    }
                ],
            },
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        }
    )
    assert node.provider_id == "aws:///us-east-1a/i-0123"
    assert node.has_taint("node.cloudprovider.kubernetes.io/uninitialized")
    assert node.ready is False
    assert not node.deleting


def test_service_from_api_reads_ports_and_annotations() -> None:
    svc = Service.from_api(
        {
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "annotations": {"x": "y"}},
            "spec": {
                "type": "LoadBalancer",
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
                "externalTrafficPolicy": "Local",
                "healthCheckNodePort": 31000,
            },
        }
    )
    assert svc.key == "shop/web"
    assert svc.ports[0].node_port == 30080
    assert svc.health_check_node_port == 31000
    assert svc.annotations == {"x": "y"}


def test_status_to_api_marks_ip_ingress_as_vip() -> None:
    status = LoadBalancerStatus((LoadBalancerIngress(hostname="a.elb.amazonaws.com"),))
    assert status.to_api() == {"ingress": [{"hostname": "a.elb.amazonaws.com"}]}
    assert LoadBalancerStatus((LoadBalancerIngress(ip="1.2.3.4"),)).to_api() == {
        "ingress": [{"ip": "1.2.3.4", "ipMode": "VIP"}]
    }
    assert LoadBalancerStatus().to_api() == {}


def test_legacy_flags_parse_comma_lists_and_reject_unknown_ids() -> None:
    flags = LegacyFlags.parse(["k8s-84926,k8s-84256", "shared-elb-sg"])
    assert flags.enabled("k8s-84926")
    assert flags.enabled("shared-elb-sg")
    assert not flags.enabled("k8s-81636")
    with pytest.raises(UnknownLegacyBehavior, match="'nope'"):
        LegacyFlags.parse(["nope"])
    with pytest.raises(UnknownLegacyBehavior):
        flags.enabled("typo")
    assert "k8s-84926" in BEHAVIORS
