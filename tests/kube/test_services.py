"""Service defaulting and allocation [apiserver-spec.md 9].

ClusterIPs from 10.96.0.0/16, nodePorts and healthCheckNodePorts from one 30000-32767 pool,
real error texts for duplicates and out-of-range values, release on delete and type change.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer


def lb(name: str, *ports: int, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": f"p{p}", "port": p} for p in ports or (80,)],
            **spec,
        },
    }


def body(exc: ApiException) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(exc.body)
    return out


def test_defaults(core: client.CoreV1Api) -> None:
    svc = core.create_namespaced_service(
        "default", {"metadata": {"name": "d"}, "spec": {"ports": [{"port": 80}]}}
    )
    s = svc.spec
    assert (s.type, s.session_affinity, s.internal_traffic_policy) == (
        "ClusterIP",
        "None",
        "Cluster",
    )
    assert s.external_traffic_policy is None
    assert (s.ip_family_policy, s.ip_families) == ("SingleStack", ["IPv4"])
    assert s.ports[0].protocol == "TCP"
    assert s.ports[0].target_port == 80
    assert ipaddress.ip_address(s.cluster_ip) in ipaddress.ip_network("10.96.0.0/16")
    assert s.cluster_ips == [s.cluster_ip]
    lbs = core.create_namespaced_service("default", lb("l")).spec
    assert lbs.external_traffic_policy == "Cluster"
    assert lbs.allocate_load_balancer_node_ports is True
    headless = core.create_namespaced_service(
        "default", {"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}
    ).spec
    assert headless.cluster_ips == ["None"]
    assert headless.ip_family_policy == "RequireDualStack"


def test_many_load_balancers_get_unique_node_ports_and_ips(core: client.CoreV1Api) -> None:
    ports: list[int] = []
    ips: list[str] = []
    for i in range(40):
        s = core.create_namespaced_service("default", lb(f"lb-{i}", 80, 443)).spec
        ports += [p.node_port for p in s.ports]
        ips.append(s.cluster_ip)
    assert len(set(ports)) == 80
    assert all(30000 <= p <= 32767 for p in ports)
    assert len(set(ips)) == 40


def test_duplicate_and_out_of_range_node_ports(core: client.CoreV1Api) -> None:
    first = core.create_namespaced_service("default", lb("web", 80))
    taken = first.spec.ports[0].node_port
    dup = lb("web-dup", 80)
    dup["spec"]["ports"][0]["nodePort"] = taken
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", dup)
    b = body(info.value)
    assert info.value.status == 422
    assert b["reason"] == "Invalid"
    assert b["message"] == (
        f'Service "web-dup" is invalid: spec.ports[0].nodePort: Invalid value: '
        f"{taken}: provided port is already allocated"
    )
    assert b["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.ports[0].nodePort",
            "message": f"Invalid value: {taken}: provided port is already allocated",
        }
    ]
    dup["spec"]["ports"][0]["nodePort"] = 29999
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", dup)
    assert body(info.value)["message"].endswith(
        "provided port is not in the valid range. The range of valid ports is 30000-32767"
    )
    cip = {"metadata": {"name": "cip"}, "spec": {"ports": [{"port": 80, "nodePort": 30001}]}}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", cip)
    assert (
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"
        in info.value.body
    )


def test_delete_and_type_change_free_ports(core: client.CoreV1Api) -> None:
    s = core.create_namespaced_service("default", lb("free", 80)).spec
    port, ip = s.ports[0].node_port, s.cluster_ip
    core.delete_namespaced_service("free", "default")
    again = lb("again", 80)
    again["spec"]["ports"][0]["nodePort"] = port
    again["spec"]["clusterIP"] = ip
    made = core.create_namespaced_service("default", again).spec
    assert (made.ports[0].node_port, made.cluster_ip) == (port, ip)
    out = core.patch_namespaced_service("again", "default", {"spec": {"type": "ClusterIP"}})
    assert out.spec.ports[0].node_port is None
    assert out.spec.allocate_load_balancer_node_ports is None
    other = lb("other", 80)
    other["spec"]["ports"][0]["nodePort"] = port
    assert core.create_namespaced_service("default", other).spec.ports[0].node_port == port


def test_health_check_node_port_for_local_policy(core: client.CoreV1Api) -> None:
    s = core.create_namespaced_service(
        "default", lb("local", 80, externalTrafficPolicy="Local")
    ).spec
    hc = s.health_check_node_port
    assert hc
    assert 30000 <= hc <= 32767
    assert hc != s.ports[0].node_port
    clash = lb("clash", 80, externalTrafficPolicy="Local", healthCheckNodePort=hc)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", clash)
    assert info.value.status == 500
    assert body(info.value)["message"] == (
        f"Internal error occurred: failed to allocate requested "
        f"HealthCheck NodePort {hc}: provided port is already allocated"
    )
    bad = {
        "metadata": {"name": "bad"},
        "spec": {"type": "NodePort", "healthCheckNodePort": 31000, "ports": [{"port": 80}]},
    }
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", bad)
    assert (
        "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"
        in info.value.body
    )
    out = core.patch_namespaced_service(
        "local", "default", {"spec": {"externalTrafficPolicy": "Cluster"}}
    )
    assert out.spec.health_check_node_port is None
    reuse = lb("reuse", 80)
    reuse["spec"]["ports"][0]["nodePort"] = hc
    assert core.create_namespaced_service("default", reuse).spec.ports[0].node_port == hc


def test_cluster_ip_requests_and_immutability(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "dns2"},
                "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 53}]},
            },
        )
    assert body(info.value)["message"] == (
        'Service "dns2" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.10"}: '
        "failed to allocate IP 10.96.0.10: provided IP is already allocated"
    )
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "far"},
                "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 53}]},
            },
        )
    assert (
        "the provided IP (10.0.0.1) is not in the valid range. "
        "The range of valid IPs is 10.96.0.0/16" in info.value.body
    )
    svc = core.create_namespaced_service(
        "default", {"metadata": {"name": "imm"}, "spec": {"ports": [{"port": 1}]}}
    )
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_service(
            "imm",
            "default",
            {"spec": {"clusterIP": "10.96.200.200", "clusterIPs": ["10.96.200.200"]}},
        )
    assert info.value.status == 422
    assert "may not change once set" in info.value.body
    # a PUT that omits allocated values keeps them (patchAllocatedValues)
    put = {"metadata": {"name": "imm"}, "spec": {"ports": [{"port": 2}]}}
    assert (
        core.replace_namespaced_service("imm", "default", put).spec.cluster_ip
        == svc.spec.cluster_ip
    )


def test_shared_port_number_shares_node_port_and_validation(core: client.CoreV1Api) -> None:
    dns = {
        "metadata": {"name": "dns"},
        "spec": {
            "type": "NodePort",
            "ports": [
                {"name": "udp", "port": 53, "protocol": "UDP"},
                {"name": "tcp", "port": 53, "protocol": "TCP"},
            ],
        },
    }
    ports = core.create_namespaced_service("default", dns).spec.ports
    assert ports[0].node_port == ports[1].node_port
    two = {"metadata": {"name": "two"}, "spec": {"ports": [{"port": 1}, {"port": 2}]}}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("default", two)
    assert body(info.value)["message"] == (
        'Service "two" is invalid: '
        "[spec.ports[0].name: Required value, spec.ports[1].name: Required value]"
    )


def test_dry_run_does_not_claim_ports(sim: KubeServer, core: client.CoreV1Api) -> None:
    spec = lb("dry", 80)
    spec["spec"]["ports"][0]["nodePort"] = 30500
    dry = core.create_namespaced_service("default", spec, dry_run="All")
    assert dry.spec.ports[0].node_port == 30500
    assert core.create_namespaced_service("default", spec).spec.ports[0].node_port == 30500


def test_load_balancer_status_ip_mode_and_validation(core: client.CoreV1Api) -> None:
    core.create_namespaced_service("default", lb("st", 80))
    out = core.patch_namespaced_service_status(
        "st",
        "default",
        {
            "status": {
                "loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}
            }
        },
    )
    ing = out.status.load_balancer.ingress
    assert (ing[0].ip_mode, ing[1].ip_mode) == ("VIP", None)
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_service_status(
            "st", "default", {"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}}
        )
    assert info.value.status == 422
    assert "status.loadBalancer.ingress[0].ip" in info.value.body
