"""Upstream's remaining table tests of ``aws_loadbalancer_test.go``, as data.

Source: kubernetes/cloud-provider-aws tag v1.33.0 (commit
40f1f7ac233535fb55d9ab888f64d1650d2f6415), ``pkg/providers/v1/aws_loadbalancer_test.go``:
``TestElbProtocolsAreEqual``, ``TestAWSARNEquals``, ``TestSyncElbListeners``,
``TestElbListenersAreEqual``, ``TestFilterTargetNodes``, ``TestCloud_findInstancesForELB``,
``TestCloud_chunkTargetDescriptions``, ``TestCloud_diffTargetGroupTargets`` and
``TestCloud_computeTargetGroupExpectedTargets``. Inputs and expected outputs only; the adapters
are in ``test_upstream_lb``. ``None`` stands for Go's nil pointer.
"""

from __future__ import annotations

_ARN = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"

#: ``TestElbProtocolsAreEqual``: (left, right, equal)
PROTOCOLS_EQUAL: list[tuple[str | None, str | None, bool]] = [
    ("http", "http", True),
    ("HTTP", "http", True),
    ("HTTP", "TCP", False),
    ("", "TCP", False),
    ("", "", True),
    (None, "", False),
    ("", None, False),
    (None, None, True),
]

#: ``TestAWSARNEquals``: (left, right, equal)
ARNS_EQUAL: list[tuple[str | None, str | None, bool]] = [
    (_ARN, _ARN, True),
    (_ARN.upper(), _ARN, True),
    (_ARN, "", False),
    ("", "", True),
    (None, "", False),
    ("", None, False),
    (None, None, True),
]

#: A Classic ELB listener: (Protocol, LoadBalancerPort, InstanceProtocol, InstancePort,
#: SSLCertificateId or None when unset)
Listener = tuple[str, int, str, int, str | None]

#: ``TestSyncElbListeners``: (case, wanted listeners, the ELB's listener descriptions (None:
#: a description without a listener), expected listeners to create, expected ports to delete)
SYNC_LISTENERS: list[
    tuple[str, list[Listener], list[Listener | None], list[Listener], list[int]]
] = [
    ("no edge cases",
     [("HTTP", 443, "HTTP", 443, "abc-123"), ("TCP", 80, "TCP", 80, "def-456"),
      ("TCP", 8443, "TCP", 8443, "def-456")],
     [("TCP", 80, "TCP", 80, None), ("TCP", 8443, "TCP", 8443, "def-456")],
     [("HTTP", 443, "HTTP", 443, "abc-123"), ("TCP", 80, "TCP", 80, "def-456")],
     [80]),
    ("no listeners to delete",
     [("HTTP", 443, "HTTP", 443, "abc-123"), ("TCP", 80, "TCP", 80, "def-456")],
     [("HTTP", 443, "HTTP", 443, "abc-123")],
     [("TCP", 80, "TCP", 80, "def-456")],
     []),
    ("no listeners to create",
     [("HTTP", 443, "HTTP", 443, "abc-123")],
     [("TCP", 80, "TCP", 80, None), ("HTTP", 443, "HTTP", 443, "abc-123")],
     [],
     [80]),
    ("nil actual listener",
     [("HTTP", 443, "HTTP", 443, None)],
     [("HTTP", 443, "HTTP", 443, "abc-123"), None],
     [("HTTP", 443, "HTTP", 443, None)],
     [443]),
]  # fmt: skip

#: ``TestElbListenersAreEqual``: (case, expected, actual, equal)
LISTENERS_EQUAL: list[tuple[str, Listener, Listener, bool]] = [
    ("should be equal", ("TCP", 80, "TCP", 80, None), ("TCP", 80, "TCP", 80, None), True),
    ("instance port should be different",
     ("TCP", 80, "TCP", 443, None), ("TCP", 80, "TCP", 80, None), False),
    ("instance protocol should be different",
     ("TCP", 80, "HTTP", 80, None), ("TCP", 80, "TCP", 80, None), False),
    ("load balancer port should be different",
     ("TCP", 443, "TCP", 443, None), ("TCP", 80, "TCP", 443, None), False),
    ("protocol should be different",
     ("TCP", 80, "TCP", 443, None), ("HTTP", 80, "TCP", 443, None), False),
]  # fmt: skip

_TNL = "service.beta.kubernetes.io/aws-load-balancer-target-node-labels"

#: ``TestFilterTargetNodes``: (case, node labels, Service annotations, node targeted)
FILTER_TARGET_NODES: list[tuple[str, dict[str, str], dict[str, str], bool]] = [
    ("when no filter is provided, node should be targeted", {"k1": "v1"}, {}, True),
    ("when all key-value filters match, node should be targeted",
     {"k1": "v1", "k2": "v2"}, {_TNL: "k1=v1,k2=v2"}, True),
    ("when all just-key filter match, node should be targeted",
     {"k1": "v1", "k2": "v2"}, {_TNL: "k1,k2"}, True),
    ("when some filters do not match, node should not be targeted",
     {"k1": "v1"}, {_TNL: "k1=v1,k2"}, False),
    ("when no filter matches, node should not be targeted",
     {"k1": "v1", "k2": "v2"}, {_TNL: "k3=v3"}, False),
]  # fmt: skip

#: ``TestCloud_findInstancesForELB``: the steps on one cloud, in order: (step, nodes asked
#: for (the seeded self instance, and a second instance launched before this step when
#: listed), whether the instance cache is aged past its maximum first, expected instances,
#: expected ``DescribeInstances`` calls in the step). Upstream checks the cache's timestamp;
#: the calls are how a client sees the cache being used or refreshed.
FIND_INSTANCES_FOR_ELB: list[tuple[str, tuple[str, ...], bool, tuple[str, ...], int]] = [
    ("the self instance", ("self",), False, ("self",), 1),
    ("add a new EC2 instance", ("self", "new"), False, ("self", "new"), 1),
    ("verify existing instance cache gets used", ("self", "new"), False, ("self", "new"), 0),
    ("force cache expiry and verify cache gets updated", ("self", "new"), True,
     ("self", "new"), 1),
]  # fmt: skip

_T = [("i-abcdefg1", 8080), ("i-abcdefg2", 8080), ("i-abcdefg3", 8080), ("i-abcdefg4", 8080)]

#: ``TestCloud_chunkTargetDescriptions``: (case, targets, chunk size, expected chunks;
#: upstream's nil is no chunks)
CHUNK_TARGETS: list[tuple[str, list[tuple[str, int]], int, list[list[tuple[str, int]]]]] = [
    ("can be evenly chunked", _T, 2, [_T[:2], _T[2:]]),
    ("cannot be evenly chunked", _T, 3, [_T[:3], _T[3:]]),
    ("chunkSize equal to total count", _T, 4, [_T]),
    ("chunkSize greater than total count", _T, 10, [_T]),
    ("chunk nil slice", [], 2, []),
    ("chunk empty slice", [], 2, []),
]

#: ``TestCloud_diffTargetGroupTargets``: (case, expected targets, actual targets, to register,
#: to deregister); all on port 8080, given by instance id
DIFF_TARGETS: list[tuple[str, list[str], list[str], list[str], list[str]]] = [
    ("all targets to register", ["i-abcdef1", "i-abcdef2"], [], ["i-abcdef1", "i-abcdef2"], []),
    ("all targets to deregister", [], ["i-abcdef1", "i-abcdef2"], [], ["i-abcdef1", "i-abcdef2"]),
    ("some targets to register and deregister",
     ["i-abcdef1", "i-abcdef4", "i-abcdef5"], ["i-abcdef1", "i-abcdef2", "i-abcdef3"],
     ["i-abcdef4", "i-abcdef5"], ["i-abcdef2", "i-abcdef3"]),
    ("both expected and actual targets are empty", [], [], [], []),
    ("expected and actual targets equals",
     ["i-abcdef1", "i-abcdef2", "i-abcdef3"], ["i-abcdef1", "i-abcdef2", "i-abcdef3"], [], []),
]  # fmt: skip

#: ``TestCloud_computeTargetGroupExpectedTargets``: (case, instance ids, port, expected targets)
EXPECTED_TARGETS: list[tuple[str, list[str], int, list[tuple[str, int]]]] = [
    ("no instance", [], 8080, []),
    ("one instance", ["i-abcdef1"], 8080, [("i-abcdef1", 8080)]),
    ("multiple instances", ["i-abcdef1", "i-abcdef2", "i-abcdef3"], 8080,
     [("i-abcdef1", 8080), ("i-abcdef2", 8080), ("i-abcdef3", 8080)]),
]  # fmt: skip
