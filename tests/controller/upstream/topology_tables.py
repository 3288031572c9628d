"""Upstream's instance-topology tests, as data.

Source: kubernetes/cloud-provider-aws at commit 63ec440c3275321b55afa45480e2fdfd2b0e93c4:
``pkg/providers/v1/topology_test.go`` ``TestDoesInstanceTypeRequireResponse`` and
``TestGetNodeTopology``; ``pkg/providers/v1/instances_v2_test.go`` ``TestInstanceMetadata``
(its topology cases). Upstream answers EC2 from a mock; here the lab's endpoint answers and its
fault rules give the error codes.
"""

from __future__ import annotations

#: ``TestDoesInstanceTypeRequireResponse``: (configured pattern, "" for the default; instance
#: type; expected)
REQUIRES_RESPONSE: list[tuple[str, str, bool]] = [
    *(("", t, True) for t in (
        "hpc6a.48xlarge", "hpc6id.32xlarge", "hpc7a.12xlarge", "hpc7a.24xlarge",
        "hpc7a.48xlarge", "hpc7a.96xlarge", "hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge",
        "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge",
        "p5en.48xlarge", "p6e-gb200.36xlarge",
        "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge",
        "p6-b200.48xlarge",
    )),
    *(("", t, False) for t in ("m6g.large", "t3.large", "c3.large", "m5.large", "inf2.48xlarge")),
    ("t3.large", "t3.large", True),
    ("t3.large", "trn2.48xlarge", False),
]  # fmt: skip

#: ``TestGetNodeTopology``: (case, instance type, what DescribeInstanceTopology answers: an
#: error code or "empty", times asked, expected DescribeInstanceTopology calls, expect an
#: error each time). Region "some-region" and instance id "some-id" as upstream's.
GET_NODE_TOPOLOGY: list[tuple[str, str, str, int, int, bool]] = [
    ("Should skip nodes that don't have instance type set", "", "empty", 1, 0, False),
    ("Should handle unsupported regions and utilize cache",
     "some-type", "UnsupportedOperation", 2, 1, False),
    ("Should handle unsupported instance types and utilize cache",
     "some-type", "empty", 2, 1, False),
    ("Should handle unsupported instance IDs and utilize cache",
     "trn2.48xlarge", "empty", 2, 1, False),
    ("Should handle missing permissions to call DescribeInstanceTopology",
     "some-type", "UnauthorizedOperation", 2, 1, False),
    ("Should return error when exceeding request limits for DescribeInstanceTopology",
     "some-type", "RequestLimitExceeded", 2, 2, True),
    ("Should return unhandled errors", "some-type", "NOPE", 1, 1, True),
]  # fmt: skip

#: ``TestInstanceMetadata`` (topology cases): (case, instance type, the node already carries
#: the zone-id and layer labels, DescribeInstanceTopology error code or "" (the lab answers),
#: expected DescribeInstanceTopology calls, expected label keys or None for an error)
_LAYERS = [f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)]
INSTANCE_METADATA: list[tuple[str, str, bool, str, int, list[str] | None]] = [
    ("Should return populated InstanceMetadata",
     "trn1.32xlarge", False, "", 1, ["topology.k8s.aws/zone-id", *_LAYERS]),
    ("Should skip additional labels if already set", "trn1.32xlarge", True, "", 0, []),
    ("Should swallow errors if getting node topology fails if instance type not expected to be "
     "supported", "c3.large", False, "InvalidParameterValue", 1, ["topology.k8s.aws/zone-id"]),
    ("Should not swallow errors if getting node topology fails if instance type is expected to "
     "be supported", "trn1.32xlarge", False, "InvalidParameterValue", 1, None),
]  # fmt: skip
