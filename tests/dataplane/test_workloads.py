"""Deployment -> ReplicaSet -> Pods through the simulator: creation, scaling, rolling updates
within maxSurge/maxUnavailable, Recreate, the rollout status kubectl reads, and the garbage
collector for owners that are gone."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from lab.dataplane.deployments import resolve, surge_and_unavailable, template_hash
from tests.dataplane.conftest import Cluster

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICA_SETS = "/apis/apps/v1/namespaces/default/replicasets"


def deployment(
    name: str = "web", replicas: int = 3, image: str = "nginx:1.25", **spec: Any
) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
            **spec,
        },
    }


def rolled_out(cluster: Cluster, name: str = "web") -> dict | None:
    dep = cluster.get(f"{DEPLOYMENTS}/{name}") or {}
    spec, status = dep.get("spec") or {}, dep.get("status") or {}
    done = (
        status.get("observedGeneration") == dep.get("metadata", {}).get("generation")
        and status.get("updatedReplicas", 0) == spec.get("replicas")
        and status.get("replicas", 0) == spec.get("replicas")
        and status.get("availableReplicas", 0) == spec.get("replicas")
    )
    return dep if done else None


def settled_rollout(cluster: Cluster, name: str = "web") -> dict:
    """The Deployment once the lab settled: it must be rolled out by then."""
    cluster.settle()
    dep = rolled_out(cluster, name)
    assert dep is not None, (cluster.get(f"{DEPLOYMENTS}/{name}") or {}).get("status")
    return dep


def test_rolling_math_matches_upstream_rounding() -> None:
    assert resolve("25%", 3, round_up=True) == 1
    assert resolve("25%", 3, round_up=False) == 0
    assert resolve(2, 10, round_up=False) == 2
    assert surge_and_unavailable(deployment(replicas=4)) == (1, 1)
    zero = deployment(
        replicas=4,
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}},
    )
    assert surge_and_unavailable(zero) == (0, 1)  # both 0: one may be unavailable
    digest = template_hash({"spec": {"containers": [{"name": "a"}]}})
    assert digest
    assert set(digest) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert digest != template_hash({"spec": {"containers": [{"name": "b"}]}})


def test_deployment_creates_replica_set_and_pods_with_owner_chain(cluster: Cluster) -> None:
    cluster.api.create(DEPLOYMENTS, deployment())
    dep = settled_rollout(cluster)
    (rs,) = cluster.api.get(REPLICA_SETS)["items"]
    digest = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": digest}
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"
    (owner,) = rs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Deployment", "web", True)
    pods = cluster.pods(selector="app=web")
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"web-{digest}-")
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert pod["status"]["phase"] == "Running"
    progressing = {c["type"]: c for c in dep["status"]["conditions"]}
    assert progressing["Available"]["reason"] == "MinimumReplicasAvailable"
    assert progressing["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


def test_scale_up_down_deletes_least_valuable_pods(cluster: Cluster) -> None:
    cluster.api.create(DEPLOYMENTS, deployment(replicas=2))
    settled_rollout(cluster)
    cluster.api.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 5}})
    settled_rollout(cluster)
    assert len(cluster.pods(selector="app=web")) == 5
    cluster.api.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 1}})
    settled_rollout(cluster)
    assert len(cluster.pods(selector="app=web")) == 1
    # deleted pods are graceful: the kubelet stand-in ended them and removed the objects


def test_rolling_update_keeps_within_surge_and_unavailable(cluster: Cluster) -> None:
    spec = {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    }
    cluster.api.create(DEPLOYMENTS, deployment(replicas=4, **spec))
    settled_rollout(cluster)
    worst: dict[str, int] = {"total": 0, "available": 99}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            pods = [
                p
                for p in cluster.pods(selector="app=web")
                if not p["metadata"].get("deletionTimestamp")
            ]
            ready = [p for p in pods if cluster.condition(p, "Ready") == "True"]
            worst["total"] = max(worst["total"], len(pods))
            worst["available"] = min(worst["available"], len(ready))
            stop.wait(0.01)

    observer = threading.Thread(target=watch)
    observer.start()
    try:
        cluster.api.patch(
            f"{DEPLOYMENTS}/web",
            {
                "spec": {
                    "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.26"}]}}
                }
            },
        )
        dep = settled_rollout(cluster)
        assert dep["metadata"]["generation"] == 2
    finally:
        stop.set()
        observer.join()
    assert worst["total"] <= 5  # replicas + maxSurge
    assert worst["available"] >= 4  # replicas - maxUnavailable
    sets = sorted(
        cluster.api.get(REPLICA_SETS)["items"],
        key=lambda s: s["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
    )
    assert [
        (s["metadata"]["annotations"]["deployment.kubernetes.io/revision"], s["spec"]["replicas"])
        for s in sets
    ] == [("1", 0), ("2", 4)]
    images = {p["spec"]["containers"][0]["image"] for p in cluster.pods(selector="app=web")}
    assert images == {"nginx:1.26"}
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_recreate_takes_old_pods_down_first(cluster: Cluster) -> None:
    cluster.api.create(DEPLOYMENTS, deployment(replicas=2, strategy={"type": "Recreate"}))
    settled_rollout(cluster)
    old = {p["metadata"]["name"] for p in cluster.pods(selector="app=web")}
    seen_mixed = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            names = {
                p["metadata"]["name"]
                for p in cluster.pods(selector="app=web")
                if cluster.condition(p, "Ready") == "True"
            }
            if names & old and names - old:
                seen_mixed.set()
            stop.wait(0.01)

    observer = threading.Thread(target=watch)
    observer.start()
    try:
        cluster.api.patch(
            f"{DEPLOYMENTS}/web", {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}}
        )
        assert settled_rollout(cluster)["metadata"]["generation"] == 2
    finally:
        stop.set()
        observer.join()
    assert not seen_mixed.is_set()
    assert not old & {p["metadata"]["name"] for p in cluster.pods(selector="app=web")}


def test_replica_set_adopts_orphans_and_gc_deletes_dependents_of_missing_owners(
    cluster: Cluster,
) -> None:
    cluster.create_pod("orphan", labels={"app": "solo"})
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "solo"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "solo"}},
            "template": {
                "metadata": {"labels": {"app": "solo"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            },
        },
    }
    created = cluster.api.create(REPLICA_SETS, rs)
    cluster.settle()
    assert len(cluster.pods(selector="app=solo")) == 2
    assert all(p["metadata"].get("ownerReferences") for p in cluster.pods(selector="app=solo"))
    orphan = cluster.pod("orphan")
    assert orphan["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    # a ReplicaSet whose owner never existed is garbage: deleted, and its pods with it
    dangling = dict(
        rs,
        metadata={
            "name": "dangling",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "ghost",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        },
    )
    dangling["spec"] = {
        **rs["spec"],
        "selector": {"matchLabels": {"app": "ghost"}},
        "template": {
            "metadata": {"labels": {"app": "ghost"}},
            "spec": rs["spec"]["template"]["spec"],
        },
    }
    cluster.api.create(REPLICA_SETS, dangling)
    cluster.settle()
    assert cluster.get(f"{REPLICA_SETS}/dangling") is None  # collected
    assert not cluster.pods(selector="app=ghost")  # and its pods


def test_gc_strips_only_the_dangling_reference(cluster: Cluster) -> None:
    svc = cluster.create_service("keeper")
    refs = [
        {"apiVersion": "v1", "kind": "Service", "name": "keeper", "uid": svc["metadata"]["uid"]},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "name": "gone",
            "uid": "11111111-1111-1111-1111-111111111111",
        },
    ]
    cluster.api.create(
        "/api/v1/namespaces/default/pods",
        {
            "metadata": {"name": "two-owners", "ownerReferences": refs},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    cluster.settle()
    pod = cluster.pod("two-owners")
    assert pod is not None
    assert [r["name"] for r in pod["metadata"]["ownerReferences"]] == ["keeper"]


@pytest.mark.parametrize("replicas", [0])
def test_scale_to_zero(make_cluster: Callable[..., Cluster], replicas: int) -> None:
    cluster = make_cluster(speed=100)
    cluster.api.create(DEPLOYMENTS, deployment(replicas=2))
    settled_rollout(cluster)
    cluster.api.patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": replicas}})
    cluster.settle()
    assert not cluster.pods(selector="app=web")
    dep = cluster.get(f"{DEPLOYMENTS}/web")
    assert dep is not None
    assert "replicas" not in dep["status"]
    assert dep["status"]["observedGeneration"] == 2
