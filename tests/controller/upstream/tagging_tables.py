"""Upstream's tagging controller tests, as data.

Source: kubernetes/cloud-provider-aws ``pkg/controllers/tagging/tagging_controller_test.go`` at
commit 63ec440c3275321b55afa45480e2fdfd2b0e93c4 (same at v1.33.0):
``Test_NodesJoiningAndLeaving`` (each case run with batching on and off),
``TestMultipleEnqueues``, and the checksums its cases label Nodes with. Upstream's fake EC2
(``pkg/providers/v1/aws_fakes.go``, ``CreateTags`` / ``DeleteTags``) answers by instance id:
``i-error`` fails, ``i-not-found`` is ``InvalidInstanceID.NotFound``, ``i-not-found-count-N-…``
is not found while its call count (counted after the call) is below N, ``i-invalid-id…`` is
``InvalidID``; our stub EC2 in ``test_upstream_tagging.py`` answers the same. Upstream's cases
assert log lines; each row here states what those lines mean, as calls made and the Node's
label.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the tags every case configures (``map[string]string{"key2": "value2", "key1": "value1"}``)
TAGS = {"key2": "value2", "key1": "value1"}
CHECKSUM_KEY1 = "9767c4972ba72e87ab553bad2afde741"  # MD5 for key1=value1
CHECKSUM_BOTH = "c812faa65d1d5e5aefa6b069b3da39df"  # MD5 for key1=value1,key2=value2
OLD = "2012-01-01T00:00:00Z"
NOW = "now"  # the case's Node is created at the test's current time
FARGATE = (
    "aws:///us-west-2a/2ea696a557-9e55466d21eb4f83a99a9aa396bbd134/"
    "fargate-ip-10-0-55-27.us-west-2.compute.internal"
)
ATTEMPTS_BEFORE_GIVING_UP = 10  # the first try and maxRequeuingCount (9) requeues


@dataclass(frozen=True)
class JoinLeaveCase:
    name: str
    node: str
    provider_id: str
    created: str
    label: str | None  # the Node's k8s.io/cloud-provider-aws label before the test
    action: str  # ADD (tc.enqueueNode(node, addTag)) or DELETE
    rate_limited: bool
    calls: int  # CreateTags (ADD) or DeleteTags (DELETE) calls made
    final_label: str | None  # the label afterwards
    upstream_messages: tuple[str, ...]


NODES_JOINING_AND_LEAVING: list[JoinLeaveCase] = [
    JoinLeaveCase(
        "node0 joins the cluster, but fail to tag.",
        "node0",
        "i-error",
        OLD,
        None,
        "ADD",
        False,
        ATTEMPTS_BEFORE_GIVING_UP,
        None,
        ("Error occurred while processing",),
    ),
    JoinLeaveCase(
        "node0 joins the cluster.",
        "node0",
        "i-0001",
        OLD,
        None,
        "ADD",
        False,
        1,
        CHECKSUM_BOTH,
        ("Successfully tagged i-0001", "to the workqueue (without any rate-limit)"),
    ),
    JoinLeaveCase(
        "node0 joins the cluster (rate-limited).",
        "node0",
        "i-0001",
        OLD,
        None,
        "ADD",
        True,
        1,
        CHECKSUM_BOTH,
        ("Successfully tagged i-0001", "to the workqueue (rate-limited)"),
    ),
    JoinLeaveCase(
        "node0 joins the cluster and was tagged earlier with different tags.",
        "node0",
        "i-0001",
        OLD,
        CHECKSUM_KEY1,
        "ADD",
        False,
        1,
        CHECKSUM_BOTH,
        ("Successfully tagged i-0001",),
    ),
    JoinLeaveCase(
        "node0 joins the cluster but isn't tagged because it was already tagged earlier.",
        "node0",
        "i-0001",
        OLD,
        CHECKSUM_BOTH,
        "ADD",
        False,
        0,
        CHECKSUM_BOTH,
        ("Skip tagging node node0 since it was already tagged earlier.",),
    ),
    JoinLeaveCase(
        "fargate node joins the cluster.",
        "fargatenode0",
        FARGATE,
        OLD,
        None,
        "ADD",
        False,
        0,
        None,
        (
            "Skip processing the node fargate-ip-10-0-55-27.us-west-2.compute.internal"
            " since it is a fargate node",
        ),
    ),
    JoinLeaveCase(
        "node0 leaves the cluster, failed to untag.",
        "node0",
        "i-error",
        OLD,
        None,
        "DELETE",
        False,
        ATTEMPTS_BEFORE_GIVING_UP,
        None,
        ("Error in untagging EC2 instance i-error for node node0",),
    ),
    JoinLeaveCase(
        "node0 leaves the cluster.",
        "node0",
        "i-0001",
        OLD,
        None,
        "DELETE",
        False,
        1,
        None,
        ("Successfully untagged i-0001",),
    ),
    JoinLeaveCase(
        "node0 is recently created and the instance is not found the first 3 CreateTags attempts",
        # the fake counts after the call: calls 1 and 2 are not found, call 3 tags
        "node0",
        "i-not-found-count-3-0001",
        NOW,
        None,
        "ADD",
        False,
        3,
        CHECKSUM_BOTH,
        (
            "Successfully tagged i-not-found-count-3-0001",
            "node is within eventual consistency grace period",
        ),
    ),
    JoinLeaveCase(
        "node0 is not recently created and the instance is not found",
        "node0",
        "i-not-found",
        OLD,
        None,
        "ADD",
        False,
        1,
        None,
        ("Skip tagging since EC2 instance i-not-found for node node0 does not exist",),
    ),
    JoinLeaveCase(
        "node with invalid instance ID (e.g. KWOK node) joins the cluster, skip tagging",
        "kwok-node0",
        "i-invalid-id-kwok-0001",
        OLD,
        None,
        "ADD",
        False,
        1,
        None,
        (
            "Skip tagging since EC2 instance i-invalid-id-kwok-0001 for node kwok-node0"
            " has an invalid instance ID",
        ),
    ),
    JoinLeaveCase(
        "node with invalid instance ID (e.g. KWOK node) leaves the cluster, skip untagging",
        "kwok-node0",
        "i-invalid-id-kwok-0001",
        OLD,
        None,
        "DELETE",
        False,
        1,
        None,
        (
            "Skip untagging since EC2 instance i-invalid-id-kwok-0001 for node kwok-node0"
            " has an invalid instance ID",
        ),
    ),
]

#: TestMultipleEnqueues: (node, provider id, action, queue length afterwards); then two
#: items are processed and the length drops to 2, then 1
MULTIPLE_ENQUEUES: list[tuple[str, str, str, int]] = [
    ("node0", "i-0001", "ADD", 1),
    ("node0", "i-0001", "ADD", 1),  # the same node and action: not queued twice
    ("node0", "i-0001", "DELETE", 2),  # the same node, another action: a second item
    ("node1", "i-0002", "ADD", 3),
]
