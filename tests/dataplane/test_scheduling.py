"""kube-scheduler stand-in: the filter predicates alone, then binding through the simulator
(nodeName, nodeSelector, taints/tolerations, cordon, NotReady nodes, the Unschedulable message)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from lab.dataplane.scheduling import (
    filter_reason,
    quantity,
    selector_matches,
    tolerates,
    unschedulable_message,
)
from tests.dataplane.conftest import Cluster


def node(
    name: str = "n",
    *,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
    pods: str = "110",
    cpu: str = "2",
) -> dict:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"pods": pods, "cpu": cpu, "memory": "8Gi"}},
    }


def pod(**spec: object) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_quantities() -> None:
    assert quantity("100m") == pytest.approx(0.1)
    assert quantity("1Gi") == 2**30
    assert quantity("2") == 2
    assert quantity("1e3") == 1000
    with pytest.raises(ValueError, match="not a resource quantity: 'lots'"):
        quantity("lots")


def test_selectors_and_tolerations() -> None:
    sel = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
    }
    assert selector_matches(sel, {"app": "web", "tier": "b"})
    assert not selector_matches(sel, {"app": "web"})
    assert selector_matches({}, {"any": "thing"})
    assert not selector_matches(None, {})
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates({"key": "k", "operator": "Equal", "value": "v"}, taint)
    assert not tolerates({"key": "k", "value": "w"}, taint)
    assert tolerates({"operator": "Exists"}, taint)
    assert not tolerates({"key": "k", "operator": "Exists", "effect": "NoExecute"}, taint)


def test_filter_reasons_in_the_schedulers_words() -> None:
    tainted = node(
        taints=[
            {
                "key": "node.cloudprovider.kubernetes.io/uninitialized",
                "value": "true",
                "effect": "NoSchedule",
            }
        ]
    )
    assert filter_reason(pod(), tainted, []) == (
        "node(s) had untolerated taint {node.cloudprovider.kubernetes.io/uninitialized: true}"
    )
    assert filter_reason(pod(tolerations=[{"operator": "Exists"}]), tainted, []) is None
    prefer = node(taints=[{"key": "x", "effect": "PreferNoSchedule"}])
    assert filter_reason(pod(), prefer, []) is None
    assert filter_reason(pod(), node(unschedulable=True), []) == "node(s) were unschedulable"
    assert filter_reason(pod(nodeSelector={"disk": "ssd"}), node(), []) == (
        "node(s) didn't match Pod's node affinity/selector"
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}
                ]
            }
        }
    }
    assert filter_reason(pod(affinity=affinity), node(labels={"zone": "a"}), []) is not None
    assert filter_reason(pod(affinity=affinity), node(labels={"zone": "b"}), []) is None
    assert filter_reason(pod(), node(pods="1"), [pod()]) == "Too many pods"
    big = pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}])
    assert filter_reason(big, node(cpu="2"), [big]) == "Insufficient cpu"
    hp = pod(containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}])
    assert (
        filter_reason(hp, node(), [hp])
        == "node(s) didn't have free ports for the requested pod ports"
    )
    assert unschedulable_message(3, {"b": 2, "a": 1}) == "0/3 nodes are available: 1 a, 2 b."


def test_pending_pods_are_bound_spread_and_ready_nodes_only(cluster: Cluster) -> None:
    for i in range(6):
        cluster.create_pod(f"p{i}")
    cluster.settle()
    pods = cluster.pods()
    assert [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")] == []
    spread = Counter(p["spec"]["nodeName"] for p in pods)
    assert spread == {"w1": 3, "w2": 3}  # the control plane is tainted NoSchedule
    scheduled = [c for c in pods[0]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled
    assert scheduled[0]["status"] == "True"


def test_node_name_selector_tolerations_and_cordon(cluster: Cluster) -> None:
    cluster.api.patch("/api/v1/nodes/w2", {"metadata": {"labels": {"disk": "ssd"}}})
    cluster.create_pod(
        "direct", spec={"nodeName": "cp", "containers": [{"name": "c", "image": "nginx"}]}
    )
    cluster.create_pod(
        "ssd",
        spec={"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "nginx"}]},
    )
    cluster.create_pod(
        "anywhere",
        spec={
            "tolerations": [{"operator": "Exists"}],
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
            "containers": [{"name": "c", "image": "nginx"}],
        },
    )
    cluster.settle()
    assert all(cluster.running(n) for n in ("direct", "ssd", "anywhere"))
    assert cluster.pod("direct")["spec"]["nodeName"] == "cp"  # nodeName: never scheduled
    assert cluster.pod("ssd")["spec"]["nodeName"] == "w2"
    assert cluster.pod("anywhere")["spec"]["nodeName"] == "cp"
    # cordon both workers: a new pod stays Pending with the scheduler's message
    for name in ("w1", "w2"):
        cluster.api.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
    # kube-scheduler decides from its node informer, which lags the API: a pod created before
    # the cordons reach it may still be bound (so would it be in a real cluster)
    cluster.settle()
    nodes = cluster.plane.scheduler.nodes
    assert all(
        ((nodes.get("", n) or {}).get("spec") or {}).get("unschedulable") for n in ("w1", "w2")
    ), "the scheduler's node informer does not show both cordons once the lab settled"
    cluster.create_pod("waiting")
    cluster.settle()  # the scheduler marks a pod that fits nowhere in its sync, no binding
    waiting = cluster.pod("waiting") or {}
    message = next(
        (
            c.get("message")
            for c in waiting.get("status", {}).get("conditions") or []
            if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
        ),
        None,
    )
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 node(s) were unschedulable."
    )
    cluster.api.patch("/api/v1/nodes/w1", {"spec": {"unschedulable": False}})
    cluster.settle()  # bound once w1 is uncordoned
    pod = cluster.pod("waiting")
    assert pod is not None
    assert pod["spec"].get("nodeName") == "w1"


def test_not_ready_node_gets_no_new_pods(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(speed=100)
    cluster.kubelet.report_not_ready("w1")
    cluster.settle()  # the NoSchedule taint follows the Ready=False condition in reaction
    taints = cluster.get("/api/v1/nodes/w1")["spec"].get("taints") or []
    assert any(t["key"] == "node.kubernetes.io/not-ready" for t in taints), taints
    for i in range(3):
        cluster.create_pod(f"p{i}")
    cluster.settle()
    assert {p["spec"].get("nodeName") for p in cluster.pods()} == {"w2"}
