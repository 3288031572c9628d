"""The kind-only recipes' steps work on nodes as a reset leaves them.

A reset puts every node back as it registered, tainted uninitialized (on kind by the cluster
baseline, on sim by registering the nodes anew), so a recipe that schedules a pod must run the
controller first. K1 needs a real kubelet for its verdict and skips on sim; its steps run here
on the sim lab, whose nodes carry the same taint after a reset.
"""

from __future__ import annotations

from e2e.test_k8s_110309 import run_k1
from lab.compose import Lab


def test_k1_schedules_its_pod_on_nodes_as_a_reset_leaves_them(lab: Lab) -> None:
    # run_k1 waits for its pod running and ready (a TimeoutError while it stays Pending)
    ev = run_k1(lab, wait_not_serving=True)
    assert ev.states, "the pod ran, and its deletion was watched"
