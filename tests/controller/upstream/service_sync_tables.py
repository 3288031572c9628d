"""Upstream's service-controller sync tests, as data.

Source: kubernetes/cloud-provider ``controllers/service/controller_test.go`` at commit
46666112f47d004d76fb91406104f94e6a504b2f: ``TestSyncLoadBalancerIfNeeded``,
``TestNodeChangesForStableNodeSetEnabled``, ``TestProcessServiceDeletion``. Run by
``test_upstream_service_sync`` against our ``ServiceController`` on the fake Kubernetes
(``controller.fake.FakeKube``, which deletes a Service when its last finalizer goes, as the
apiserver does; upstream's fake client keeps it) and the fake cloud.
"""

from __future__ import annotations

from typing import Any

#: ``TestSyncLoadBalancerIfNeeded``: (case, service name, service tweaks, lbExists, expectOp,
#: expectCreateAttempt, expectDeleteAttempt, expectPatchStatus, expectPatchFinalizer).
#: Tweaks: ("type", t), ("ports", protocol), ("class", name), ("ingress", ip),
#: ("finalizer",), ("deleting",).
SYNC_LOAD_BALANCER_IF_NEEDED: list[
    tuple[str, str, tuple[tuple[Any, ...], ...], bool, str, bool, bool, bool, bool]
] = [
    ("service doesn't want LB", "no-external-balancer", (("type", "ClusterIP"),),
     False, "delete", False, False, False, False),
    ("udp service that wants LB", "udp-service", (("ports", "UDP"),),
     False, "ensure", True, False, True, True),
    ("tcp service that wants LB", "basic-service1", (),
     False, "ensure", True, False, True, True),
    ("sctp service that wants LB", "sctp-service", (("ports", "SCTP"),),
     False, "ensure", True, False, True, True),
    ("service specifies loadBalancerClass", "with-external-balancer",
     (("class", "custom-loadbalancer"),), False, "delete", False, False, False, False),
    ("service with finalizer that no longer wants LB", "no-external-balancer",
     (("type", "ClusterIP"), ("ingress", "8.8.8.8"), ("finalizer",)),
     True, "delete", False, True, True, True),
    ("service that needs cleanup", "basic-service1",
     (("ingress", "8.8.8.8"), ("finalizer",), ("deleting",)),
     True, "delete", False, True, True, True),
    ("service with finalizer that wants LB", "basic-service1", (("finalizer",),),
     False, "ensure", True, False, True, False),
]  # fmt: skip

#: ``TestNodeChangesForStableNodeSetEnabled``: (case, initial nodes, state changes, expected
#: update calls). A node is a name with an optional variant ("NotReady", "Tainted" (the
#: ToBeDeletedByClusterAutoscaler taint), "SpuriousChange" (another taint), "Exclude" (the
#: exclusion label), "Deleted" (a deletionTimestamp)); a state change is (nodes, the update
#: call fails); an expected call is (service, hosts). The three services are upstream's ``s0``,
#: ``s1`` (both externalTrafficPolicy Local) and ``external-balancer``.
SERVICES = ("s0", "s1", "external-balancer")
N123 = ("node1", "node2", "node3")


def _all(*hosts: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(svc, hosts) for svc in SERVICES]


NODE_CHANGES: list[
    tuple[
        str,
        tuple[str, ...],
        list[tuple[tuple[str, ...], bool]],
        list[tuple[str, tuple[str, ...]]],
    ]
] = [
    ("No node changes", N123, [(N123, False)], []),
    ("1 new node gets added", ("node1", "node2"), [(N123, False)], _all(*N123)),
    ("1 new node gets added - with retries", ("node1", "node2"),
     [(N123, True), (N123, False)], _all(*N123)),
    ("1 node goes NotReady", N123, [(("node1", "node2:NotReady", "node3"), False)], []),
    ("1 node gets Tainted", N123, [(("node1", "node2:Tainted", "node3"), False)],
     _all("node1", "node3")),
    ("1 node goes Ready", ("node1", "node2:NotReady", "node3"), [(N123, False)], []),
    ("1 node get excluded", N123, [(("node1", "node2:Exclude", "node3"), False)],
     _all("node1", "node3")),
    ("1 old node gets deleted", N123, [(("node1", "node2"), False)], _all("node1", "node2")),
    ("1 node marked for deletion", N123, [(("node1", "node2:Deleted", "node3"), False)],
     _all("node1", "node3")),
    ("1 spurious node update", N123, [(("node1", "node2:SpuriousChange", "node3"), False)], []),
]  # fmt: skip

#: ``TestProcessServiceDeletion``: (case, the Service was cached (ensured), the cloud's
#: delete fails with this text ("" = it succeeds), the error expected ("" = none)).
PROCESS_SERVICE_DELETION: list[tuple[str, bool, str, str]] = [
    ("If a non-existent service is deleted", False, "", ""),
    ("If cloudprovided failed to delete the service", True,
     "error Deleting the Loadbalancer", "error Deleting the Loadbalancer"),
    ("If delete was successful", True, "", ""),
]  # fmt: skip
