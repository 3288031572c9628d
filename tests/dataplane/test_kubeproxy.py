"""The kube-proxy model: R7 (the eTP=Local health check answer from hand-written slices),
R8 (KEP-3836 /healthz), routing by traffic policy, the terminating fallback per version, and
traffic after an IP is reused (#109414 as a user sees it)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest

from lab.dataplane.kubeproxy import ConnectionRefused, Drop, Endpoint, PodTarget, categorize
from lab.versions.dataplane import parse_feature_gates
from tests.dataplane.conftest import Cluster, wait

SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"


def ep(
    ip: str,
    node: str,
    *,
    ready: bool = True,
    serving: bool | None = None,
    terminating: bool = False,
) -> Endpoint:
    return Endpoint(
        ip, 8080, node, ready, ready if serving is None else serving, terminating, "default/p"
    )


def test_categorize_per_policy_and_fallback() -> None:
    eps = [ep("a", "w1"), ep("b", "w2"), ep("c", "w2", ready=False, serving=True, terminating=True)]
    assert [e.ip for e in categorize(eps, node="w1", local=False, fallback=True)] == ["a", "b"]
    assert [e.ip for e in categorize(eps, node="w1", local=True, fallback=True)] == ["a"]
    only_terminating = [
        ep("c", "w2", ready=False, serving=True, terminating=True),
        ep("d", "w2", ready=False, serving=False, terminating=True),
    ]
    assert [e.ip for e in categorize(only_terminating, node="w2", local=False, fallback=True)] == [
        "c"
    ]
    assert categorize(only_terminating, node="w2", local=False, fallback=False) == []
    assert categorize(only_terminating, node="w1", local=True, fallback=True) == []


def lb_service(
    cluster: Cluster, name: str = "hc", *, selector: dict | None = None, **spec: object
) -> dict:
    svc = cluster.create_service(
        name,
        selector=selector,
        type="LoadBalancer",
        ports=[{"port": 80, "targetPort": 8080}],
        **spec,
    )
    return svc


def slice_state(cluster: Cluster, service: str) -> str:
    """Where a hand-written slice is: the API, the shared informer, kube-proxy's endpoints."""
    proxy = cluster.plane.kube_proxy
    slices = proxy.slices
    return (
        f"API: {cluster.get(f'{SLICES}/{service}-manual')}"
        f"\ninformer: running={slices.running} synced={slices.synced} "
        f"rv={slices.resource_version} errors={slices.errors} "
        f"indexed={slices.by_index('service', f'default/{service}')} "
        f"all={[o['metadata']['name'] for o in slices.objects()]}"
        f"\nendpoints: {proxy.endpoints('default', service)}"
    )


def manual_slice(
    cluster: Cluster, service: str, conditions: dict, node: str = "w1", ip: str = "10.244.200.10"
) -> None:
    body = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-manual",
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "lab.example.com",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "nodeName": node, "conditions": conditions}],
    }
    if cluster.get(f"{SLICES}/{service}-manual") is None:
        cluster.api.create(SLICES, body)
    else:
        cluster.api.patch(f"{SLICES}/{service}-manual", {"endpoints": body["endpoints"]})


@pytest.mark.parametrize("version", ["1.26", "1.33"])
def test_r7_health_check_node_port_from_hand_written_slices(
    make_cluster: Callable[..., Cluster], version: str
) -> None:
    cluster = make_cluster(version)
    svc = lb_service(cluster, selector={}, externalTrafficPolicy="Local")  # no selector
    hcp = svc["spec"]["healthCheckNodePort"]
    proxy = cluster.plane.kube_proxy
    manual_slice(cluster, "hc", {"ready": True})
    cluster.settle()
    # kube-proxy opens the port once its informer has the Service
    assert proxy.services.get("default", "hc"), "the health check port is not open"
    code, body = proxy.health_check_node_port(node="w1", port=hcp)
    assert code == 200, f"{code} {body} on w1\n{slice_state(cluster, 'hc')}"
    assert body["service"] == {"namespace": "default", "name": "hc"}
    assert body["localEndpoints"] == 1
    assert ("serviceProxyHealthy" in body) is (version != "1.26")
    assert proxy.health_check_node_port(node="w2", port=hcp)[0] == 503
    manual_slice(cluster, "hc", {"ready": False, "serving": True, "terminating": True})
    cluster.settle()
    code, body = proxy.health_check_node_port(node="w1", port=hcp)
    assert code == 503, f"terminating endpoints never count, got {code} {body}"
    assert body["localEndpoints"] == 0
    manual_slice(cluster, "hc", {"ready": True})  # what a buggy controller writes for a Failed pod
    cluster.settle()
    code, body = proxy.health_check_node_port(node="w1", port=hcp)
    assert code == 200, f"not 200 again: {code} {body}\n{slice_state(cluster, 'hc')}"
    with pytest.raises(ConnectionRefused, match="no health check listens on tcp/1 on w1"):
        proxy.health_check_node_port(node="w1", port=1)


def test_a_hand_written_slice_survives_the_slice_controller(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The EndpointSlice controller and kube-proxy index the shared slices informer, each by
    Service: under one index name the later one replaced the other, so the controller saw the
    hand-written slices of a selector-less Service as its own and deleted them on its next sync
    (the race behind R7's CI failures). Deterministic: sync that Service once the slice is in
    the cache."""
    cluster = make_cluster("1.33")
    lb_service(cluster, selector={}, externalTrafficPolicy="Local")
    manual_slice(cluster, "hc", {"ready": True})
    slices = cluster.plane.endpoint_slices.slices
    cluster.settle()
    assert slices.get("default", "hc-manual"), "the slice is not in the cache"
    cluster.plane.endpoint_slices.sync(("default", "hc"))
    assert cluster.get(f"{SLICES}/hc-manual") is not None
    assert [e.ip for e in cluster.plane.kube_proxy.endpoints("default", "hc")] == ["10.244.200.10"]
    with pytest.raises(ValueError, match="index 'kube-proxy:service' exists"):
        slices.add_index("kube-proxy:service", lambda o: [])


@pytest.mark.parametrize(("version", "drains"), [("1.27", False), ("1.30", True), ("1.33", True)])
def test_r8_healthz_on_a_node_tainted_for_deletion(
    make_cluster: Callable[..., Cluster], version: str, drains: bool
) -> None:
    cluster = make_cluster(version)
    proxy = cluster.plane.kube_proxy
    assert proxy.healthz(node="w1")[0] == 200
    taints = cluster.get("/api/v1/nodes/w1")["spec"].get("taints") or []
    cluster.api.patch(
        "/api/v1/nodes/w1",
        {
            "spec": {
                "taints": [
                    *taints,
                    {
                        "key": "ToBeDeletedByClusterAutoscaler",
                        "value": "1700000000",
                        "effect": "NoSchedule",
                    },
                ]
            }
        },
    )
    cluster.settle()  # kube-proxy's node informer has the taint
    code, body = proxy.healthz(node="w1")
    if drains:
        assert code == 503, body
        assert body["nodeEligible"] is False
        assert proxy.livez(node="w1")[0] == 200
    else:
        assert code == 200, body
        assert "nodeEligible" not in body
        with pytest.raises(ConnectionRefused, match="serves no /livez"):
            proxy.livez(node="w1")
    cluster.api.patch("/api/v1/nodes/w1", {"spec": {"taints": taints or None}})
    cluster.settle()
    assert proxy.healthz(node="w1")[0] == 200, "not 200 after untainting"


def run_pods(
    cluster: Cluster, count: int, node: str | None = None, app: str = "web", ns: str = "default"
) -> list[dict]:
    spec = {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 8080}]}]}
    if node:
        spec["nodeName"] = node
    for i in range(count):
        cluster.create_pod(f"{app}-{node or 'x'}-{i}", ns=ns, labels={"app": app}, spec=spec)

    def running() -> list[dict]:
        return [
            p for p in cluster.pods(ns, f"app={app}") if cluster.running(p["metadata"]["name"], ns)
        ]

    cluster.settle()
    pods = running()
    assert len(pods) >= count, [
        (p["metadata"]["name"], p.get("status")) for p in cluster.pods(ns, f"app={app}")
    ]
    return pods


def test_routing_cluster_and_local_policies(cluster: Cluster) -> None:
    run_pods(cluster, 2, node="w1")
    svc = lb_service(cluster, "web", selector={"app": "web"})
    port = svc["spec"]["ports"][0]["nodePort"]
    proxy = cluster.plane.kube_proxy
    cluster.settle()
    assert len(proxy.endpoints("default", "web")) == 2, proxy.endpoints("default", "web")
    rng = random.Random(1)
    answered = Counter(
        t.name for t in (proxy.route(node="w2", node_port=port, rng=rng) for _ in range(200))
    )
    assert set(answered) == {"web-w1-0", "web-w1-1"}
    assert min(answered.values()) > 60
    cluster.api.patch(
        "/api/v1/namespaces/default/services/web", {"spec": {"externalTrafficPolicy": "Local"}}
    )
    cluster.settle()
    assert proxy.route(node="w2", node_port=port, rng=rng) == Drop(
        "kube-proxy", "no local endpoint (externalTrafficPolicy=Local)"
    )
    assert isinstance(proxy.route(node="w1", node_port=port, rng=rng), PodTarget)
    with pytest.raises(ConnectionRefused, match="nothing listens on tcp/1 on w1"):
        proxy.route(node="w1", node_port=1, rng=rng)
    with pytest.raises(ConnectionRefused, match="no node 'nope'"):
        proxy.route(node="nope", node_port=port, rng=rng)


def test_client_ip_affinity_pins_a_source(cluster: Cluster) -> None:
    run_pods(cluster, 3)
    svc = lb_service(cluster, "web", selector={"app": "web"}, sessionAffinity="ClientIP")
    port = svc["spec"]["ports"][0]["nodePort"]
    proxy = cluster.plane.kube_proxy
    cluster.settle()
    assert len(proxy.endpoints("default", "web")) == 3, proxy.endpoints("default", "web")
    rng = random.Random(7)
    for source in ("198.51.100.1", "198.51.100.2"):
        targets = {
            proxy.route(node="w1", node_port=port, source_ip=source, rng=rng) for _ in range(20)
        }
        assert len(targets) == 1


@pytest.mark.parametrize(("version", "falls_back"), [("1.25", False), ("1.26", True)])
def test_terminating_fallback_and_a_pod_that_stopped_listening(
    make_cluster: Callable[..., Cluster], version: str, falls_back: bool
) -> None:
    """#110195 in the model: with only a terminating pod left, 1.26+ kube-proxy still sends
    traffic to it; what happens then depends on whether the app still listens."""
    cluster = make_cluster(version, speed=20)
    cluster.create_pod(
        "slow",
        labels={"app": "web"},
        annotations={
            "sim.ccm-lab.io/shutdown-seconds": "60",
            "sim.ccm-lab.io/serve-during-shutdown": "true",
        },
        spec={
            "terminationGracePeriodSeconds": 90,
            "containers": [{"name": "app", "image": "nginx"}],
        },
    )
    cluster.create_pod(
        "quick",
        labels={"app": "web"},
        annotations={"sim.ccm-lab.io/shutdown-seconds": "60"},
        spec={
            "terminationGracePeriodSeconds": 90,
            "containers": [{"name": "app", "image": "nginx"}],
        },
    )
    svc = lb_service(cluster, "web", selector={"app": "web"})
    port = svc["spec"]["ports"][0]["nodePort"]
    proxy = cluster.plane.kube_proxy
    cluster.settle()
    assert sum(e.ready for e in proxy.endpoints("default", "web")) == 2
    for name in ("slow", "quick"):
        cluster.api.delete(f"/api/v1/namespaces/default/pods/{name}")
    cluster.settle()  # well inside the 60 s the apps take to exit
    endpoints = proxy.endpoints("default", "web")
    assert len(endpoints) == 2, endpoints
    assert all(e.terminating for e in endpoints), endpoints
    results = {str(proxy.route(node="w1", node_port=port, rng=random.Random(i))) for i in range(30)}
    if not falls_back:
        assert results == {str(Drop("kube-proxy", "no endpoint for service default/web"))}
    else:
        assert any("name='slow'" in r for r in results)
        assert str(Drop("pod", "pod default/quick not listening (connection refused)")) in results


def test_reused_ip_sends_traffic_to_the_new_pod_109414(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster("1.22.8")  # buggy kubelet and controllers
    run_pods(cluster, 1, node="w1")
    svc = lb_service(cluster, "web", selector={"app": "web"})
    port = svc["spec"]["ports"][0]["nodePort"]
    proxy = cluster.plane.kube_proxy
    cluster.settle()
    (endpoint,) = proxy.endpoints("default", "web")
    cluster.plane.kubelet.evict("default", "web-w1-0", reason="OutOfcpu")
    cluster.settle()
    assert cluster.pod("web-w1-0")["status"]["phase"] == "Failed"
    run_pods(cluster, 1, node="w1", app="api", ns="kube-public")  # settles
    # the Failed pod's stale endpoint now answers as the new pod
    target = proxy.route(node="w2", node_port=port, rng=random.Random(0))
    assert isinstance(target, PodTarget), target
    assert (target.namespace, target.name, target.ip) == ("kube-public", "api-w1-0", endpoint.ip)


PROBED_APP = {
    "name": "app",
    "image": "nginx",
    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 2},
}


@pytest.mark.parametrize(
    ("version", "gates", "outcome"),
    [
        # #110309: probes stop at SIGTERM, Ready freezes at True: the pod that stopped
        # listening stays serving, and the Local fallback sends it connections it refuses.
        ("1.22.8", "ProxyTerminatingEndpoints=true", "refused"),
        # fixed: probes go on, the quitter turns not serving; only the draining pod is used.
        ("1.22.11", "ProxyTerminatingEndpoints=true", "drainer only"),
        # the alpha gate off (the default): no fallback, a node with only terminating pods
        # drops the Service's traffic whether or not the kubelet is fixed.
        ("1.22.8", "", "dropped"),
        ("1.22.11", "", "dropped"),
    ],
)
def test_local_terminating_fallback_and_frozen_readiness_110309(
    make_cluster: Callable[..., Cluster], version: str, gates: str, outcome: str
) -> None:
    cluster = make_cluster(version, speed=20, feature_gates=parse_feature_gates(gates, version))
    common = {"sim.ccm-lab.io/shutdown-seconds": "60"}
    cluster.create_pod(
        "drainer",
        labels={"app": "web"},
        annotations={
            **common,
            "sim.ccm-lab.io/serve-during-shutdown": "true",
            "sim.ccm-lab.io/ready-during-shutdown": "true",
        },
        spec={"nodeName": "w1", "terminationGracePeriodSeconds": 90, "containers": [PROBED_APP]},
    )
    cluster.create_pod(
        "quitter",
        labels={"app": "web"},
        annotations=common,
        spec={"nodeName": "w1", "terminationGracePeriodSeconds": 90, "containers": [PROBED_APP]},
    )
    svc = lb_service(cluster, "web", selector={"app": "web"}, externalTrafficPolicy="Local")
    port = svc["spec"]["ports"][0]["nodePort"]
    proxy = cluster.plane.kube_proxy
    cluster.settle()
    endpoints = proxy.endpoints("default", "web")
    assert sum(e.ready for e in endpoints) == 2, endpoints
    for name in ("drainer", "quitter"):
        cluster.api.delete(f"/api/v1/namespaces/default/pods/{name}")
    expected_quitter_serving = outcome == "refused" or (not gates and version == "1.22.8")

    def quitter_serving_as_expected() -> bool:
        eps = {e.target: e for e in proxy.endpoints("default", "web")}
        return (
            len(eps) == 2
            and all(e.terminating for e in eps.values())
            and any(
                "quitter" in t and e.serving == expected_quitter_serving for t, e in eps.items()
            )
        )

    # The fixed kubelet needs failureThreshold (3) probe periods to turn the quitter not
    # ready: lab time, so a wait for the evidence (on a settled lab each look).
    wait(
        "both terminating, the quitter's serving settled",
        quitter_serving_as_expected,
        cluster=cluster,
    )
    cluster.clock.sleep(3 * 2)  # three more probe periods: a frozen Ready stays frozen
    cluster.settle()
    assert quitter_serving_as_expected(), proxy.endpoints("default", "web")
    results = Counter(
        str(proxy.route(node="w1", node_port=port, rng=random.Random(i))) for i in range(40)
    )
    refused = str(Drop("pod", "pod default/quitter not listening (connection refused)"))
    drained = [r for r in results if "name='drainer'" in r]
    if outcome == "refused":
        assert results[refused] > 0, results
        assert drained, results
    elif outcome == "drainer only":
        assert sum(results[r] for r in drained) == 40, results
    else:
        assert results == Counter(
            {str(Drop("kube-proxy", "no local endpoint (externalTrafficPolicy=Local)")): 40}
        ), results
