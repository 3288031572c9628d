"""Upstream ``aws_test.go`` table tests at v1.33.0 not covered by the earlier ports, as data.

Source: kubernetes/cloud-provider-aws tag v1.33.0 (commit
40f1f7ac233535fb55d9ab888f64d1650d2f6415), ``pkg/providers/v1/aws_test.go``:
``TestCheckProtocol``, ``TestCheckMixedProtocol`` and ``TestReadAWSCloudConfigNodeIPFamilies``.
Inputs and expected outputs only; the adapters are in ``test_upstream_aws_v133``.
"""

from __future__ import annotations

#: ``TestCheckProtocol``: (case, NLB (else Classic), the port's protocol, refused)
CHECK_PROTOCOL: list[tuple[str, bool, str, bool]] = [
    ("TCP with ELB", False, "TCP", False),
    ("TCP with NLB", True, "TCP", False),
    ("UDP with ELB", False, "UDP", True),
    ("UDP with NLB", True, "UDP", False),
]

#: ``TestCheckMixedProtocol``: (case, NLB (else Classic), ports as (protocol, port), expected
#: error text or "")
CHECK_MIXED_PROTOCOL: list[tuple[str, bool, list[tuple[str, int]], str]] = [
    ("TCP", False, [("TCP", 8080)], ""),
    ("UDP", True, [("UDP", 8080)], ""),
    ("TCP and UDP", True, [("UDP", 53), ("TCP", 53)],
     "mixed protocol is not supported for LoadBalancer"),
]  # fmt: skip

#: ``TestReadAWSCloudConfigNodeIPFamilies``: (case, config text, expected families)
NODE_IP_FAMILIES: list[tuple[str, str, tuple[str, ...]]] = [
    ("Single IP family", "[global]\nNodeIPFamilies = ipv6", ("ipv6",)),
    ("Multiple IP families", "[global]\nNodeIPFamilies = ipv6\nNodeIPFamilies = ipv4",
     ("ipv6", "ipv4")),
]  # fmt: skip
