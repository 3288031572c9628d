"""The settle barrier over a whole sim data plane: it returns when the stand-ins are done, says
who is not, and catches a component that keeps itself busy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lab.settle import SettleTimeout
from tests.dataplane.conftest import Cluster

PROBED = {
    "name": "app",
    "image": "nginx",
    "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 2},
}


def test_a_terminating_pod_whose_probes_stopped_lets_the_lab_settle(
    make_cluster: Callable[..., Cluster],
) -> None:
    """1.22.8's kubelet stops probing a terminating pod (#110309). Its probe time was left in
    the past, so the pod was requeued at once, over and over, until its container exited: the
    lab never settled and a core was burnt meanwhile."""
    cluster = make_cluster("1.22.8")
    cluster.create_pod(
        "slow-exit",
        annotations={"sim.ccm-lab.io/shutdown-seconds": "120"},
        spec={"nodeName": "w1", "terminationGracePeriodSeconds": 180, "containers": [PROBED]},
    )
    cluster.settle()
    cluster.clock.sleep(4)  # two probe periods: Ready
    cluster.settle()
    assert cluster.condition(cluster.pod("slow-exit"), "Ready") == "True"
    cluster.api.delete("/api/v1/namespaces/default/pods/slow-exit")
    cluster.settle(timeout=10)  # it timed out here, naming kubelet-pods syncing the pod
    pod = cluster.pod("slow-exit")
    assert pod is not None
    assert pod["metadata"].get("deletionTimestamp")
    assert cluster.condition(pod, "Ready") == "True"  # frozen: the bug this release has


def test_settle_passes_a_held_back_controller_and_names_a_pending_follow_up(
    cluster: Cluster,
) -> None:
    cluster.create_service("web")
    cluster.settle()
    slices = cluster.plane.endpoint_slices
    with slices.paused():
        cluster.create_pod(
            "web-0", spec={"nodeName": "w1", "containers": [{"name": "c", "image": "nginx"}]}
        )
        cluster.settle()  # held back on purpose: the rest settles, the slice lags
        assert "10.244" not in str(cluster.slice_endpoints("web"))
    cluster.settle()
    assert len(cluster.slice_endpoints("web")) == 1
    cluster.create_pod(
        "late",
        annotations={"sim.ccm-lab.io/start-seconds": "100000"},
        spec={"nodeName": "w1", "containers": [{"name": "c", "image": "nginx"}]},
    )
    with pytest.raises(SettleTimeout, match=r"kubelet-pods: follow-up for \('default', 'late'\)"):
        cluster.settle(timeout=0.5)
