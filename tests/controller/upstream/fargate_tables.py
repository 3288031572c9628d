"""Upstream's Fargate-node tests, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4 (``TestNodeAddressesForFargate*``,
``TestInstance(Not)ExistsByProviderID*ForFargate``, ``TestInstanceShutdown*ForFargate``,
``TestInstanceTypeByProviderIDForFargate``, ``TestGetZoneByProviderIDForFargate``), run
through ``InstancesV2`` against the lab's EC2. Upstream's fake EC2 answers every lookup with
one ENI (``1.2.3.4`` in ``us-west-2c``); here a real ENI is attached in the test VPC and the
node ids name its address (``fargate-<ip>`` or ``fargate-ip-<dashed ip>.<domain>``), or an
address nothing has (``fargate-not-found``).
"""

from __future__ import annotations

#: (upstream test, node id after ``fargate-``: "ip" = the ENI's IP, "dns" = ``ip-<dashed
#: IP>.<region>.compute.internal``, anything else literally; IP families (and "nodns": the VPC
#: has DNS hostnames off; EKS requires them on, so they are on otherwise); what is asked:
#: "addresses" | "exists" | "shutdown" | "type" | "zone"; expected: for addresses the address
#: kinds in order, else the value)
FARGATE: list[tuple[str, str, tuple[str, ...], str, object]] = [
    ("TestNodeAddressesForFargate", "dns", ("ipv4",), "addresses",
     [("InternalIP", "ipv4"), ("InternalDNS", "dns")]),
    ("TestNodeAddressesForFargateIPV6Family", "dns", ("ipv6",), "addresses",
     [("InternalIP", "ipv6"), ("InternalDNS", "dns")]),
    # upstream's fake ENI has no PrivateDnsName for this name: here the VPC has DNS hostnames
    # off, so EC2 gives the ENI none ("nodns")
    ("TestNodeAddressesForFargatePrivateIP", "ip", ("ipv4", "nodns"), "addresses",
     [("InternalIP", "ipv4")]),
    ("TestInstanceExistsByProviderIDForFargate", "ip", ("ipv4",), "exists", True),
    ("TestInstanceExistsByProviderIDWithNodeNameForFargate", "dns", ("ipv4",), "exists", True),
    ("TestInstanceNotExistsByProviderIDForFargate", "not-found", ("ipv4",), "exists", False),
    ("TestInstanceShutdownByProviderIDForFargate", "ip", ("ipv4",), "shutdown", True),
    ("TestInstanceShutdownNotExistsByProviderIDForFargate", "not-found", ("ipv4",), "shutdown",
     False),
    # asked as upstream asks it: InstanceTypeByProviderID of
    # "aws:///us-west-2c/1abc-2def/fargate-not-found", "" without any lookup
    ("TestInstanceTypeByProviderIDForFargate", "not-found", ("ipv4",), "type", ""),
    ("TestGetZoneByProviderIDForFargate", "ip", ("ipv4",), "zone", "zone"),
]  # fmt: skip
