"""The real-cluster reset (``lab.cluster.restore``): what it removes where."""

from __future__ import annotations

from kubernetes import client

from lab.cluster.restore import ClusterBaseline
from lab.kube.server import KubeServer


def _pod(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
    }


def test_only_a_cluster_the_lab_made_loses_its_pods_and_new_namespaces_contents() -> None:
    """On an existing cluster a reset removes the tests' Services and the Events, never a pod
    or anything in a namespace somebody else created meanwhile; on kind (``sweep_pods``) the
    pods created since go too."""
    with KubeServer() as sim:
        api = sim.api_client()
        core = client.CoreV1Api(api)
        existing, ours = ClusterBaseline(), ClusterBaseline(sweep_pods=True)
        existing.take(api)
        ours.take(api)
        core.create_namespaced_pod("default", _pod("someones-job"))
        core.create_namespace({"metadata": {"name": "team-a"}})
        core.create_namespaced_pod("team-a", _pod("api-0"))
        core.create_namespaced_service("default", {"metadata": {"name": "web"},
                                                   "spec": {"ports": [{"port": 80}]}})  # fmt: skip
        existing.restore(api)
        assert [s.metadata.name for s in core.list_namespaced_service("default").items] == [
            "kubernetes"
        ]
        assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == [
            "someones-job"
        ]
        assert [p.metadata.name for p in core.list_namespaced_pod("team-a").items] == ["api-0"]
        ours.restore(api)
        assert core.list_namespaced_pod("default").items == []
        assert core.list_namespaced_pod("team-a").items == []
