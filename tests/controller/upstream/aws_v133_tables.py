"""Upstream ``aws_test.go`` table tests at v1.33.0 not covered by the earlier ports, as data.

Source: kubernetes/cloud-provider-aws tag v1.33.0 (commit
40f1f7ac233535fb55d9ab888f64d1650d2f6415), ``pkg/providers/v1/aws_test.go``:
``TestCheckProtocol``, ``TestCheckMixedProtocol``, ``TestReadAWSCloudConfigNodeIPFamilies``,
``TestCloud_sortELBSecurityGroupList``, ``Test_findELBSubnets``, ``TestNodeAddresses``,
``TestNodeAddressesByProviderID``, ``TestFindInstanceByNodeNameExcludesTerminatedInstances`` and
``Test_getLoadBalancerSubnets`` (the cases resolved through EC2).
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

_SG = "service.beta.kubernetes.io/aws-load-balancer-security-groups"
_EXTRA_SG = "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups"

#: ``TestCloud_sortELBSecurityGroupList``: (case, the ELB's groups, annotations, groups tagged
#: for the load balancer, expected order)
SORT_ELB_SECURITY_GROUPS: list[tuple[str, list[str], dict[str, str], set[str], list[str]]] = [
    ("with no annotation", ["sg-1"], {}, set(), ["sg-1"]),
    ("with service.beta.kubernetes.io/aws-load-balancer-security-groups",
     ["sg-2", "sg-1", "sg-3"], {_SG: "sg-3,sg-2,sg-1"}, set(), ["sg-3", "sg-2", "sg-1"]),
    ("with service.beta.kubernetes.io/aws-load-balancer-extra-security-groups",
     ["sg-2", "sg-1", "sg-3", "sg-4"], {_EXTRA_SG: "sg-3,sg-2,sg-1"}, set(),
     ["sg-4", "sg-3", "sg-2", "sg-1"]),
    ("with both annotation",
     ["sg-2", "sg-1", "sg-3", "sg-4", "sg-5", "sg-6"],
     {_SG: "sg-3,sg-2,sg-1", _EXTRA_SG: "sg-6,sg-5"}, set(),
     ["sg-3", "sg-2", "sg-1", "sg-4", "sg-6", "sg-5"]),
    ("with an untagged, and unknown security group", ["sg-2", "sg-1"], {}, {"sg-1"},
     ["sg-1", "sg-2"]),
]  # fmt: skip

#: The cluster id of upstream's fake cloud (``TestClusterID``).
TEST_CLUSTER_ID = "clusterid.test"
_OWNED = {"kubernetes.io/cluster/" + TEST_CLUSTER_ID: "owned"}
_ROLE_ELB = {"kubernetes.io/role/elb": "1"}
_ROLE_INTERNAL = {"kubernetes.io/role/internal-elb": "1"}

#: ``Test_findELBSubnets``' subnets: id -> (zone, tags)
ELB_SUBNETS: dict[str, tuple[str, dict[str, str]]] = {
    "subnet-a0000001": ("us-west-2a", _ROLE_ELB),
    "subnet-a0000002": ("us-west-2a", _ROLE_ELB),
    "subnet-a0000003": ("us-west-2a", {**_OWNED, **_ROLE_INTERNAL}),
    "subnet-b0000001": ("us-west-2b", {**_OWNED, **_ROLE_ELB}),
    "subnet-b0000002": ("us-west-2b", {**_OWNED, **_ROLE_INTERNAL}),
    "subnet-c0000001": ("us-west-2c", {**_OWNED, **_ROLE_INTERNAL}),
    "subnet-other": ("us-west-2c",
                     {"kubernetes.io/cluster/clusterid.other": "owned", **_ROLE_INTERNAL}),
    "subnet-notag": ("us-west-2c", {}),
    "subnet-in-local-zone": ("az-local", _OWNED),
    "subnet-in-wavelength-zone": ("az-wavelength", _OWNED),
}  # fmt: skip

#: Upstream's fake ``DescribeAvailabilityZones``: zone name -> ZoneType
ELB_ZONE_TYPES: dict[str, str] = {
    "us-west-2a": "availability-zone",
    "us-west-2b": "availability-zone",
    "us-west-2c": "availability-zone",
    "az-local": "local-zone",
    "az-wavelength": "wavelength",
}

#: ``Test_findELBSubnets``: (case, subnets, per-subnet route table (True: a route to an
#: internet gateway, False: to a virtual private gateway; besides, the main table routes to
#: an internet gateway), internal, expected subnets (any order))
FIND_ELB_SUBNETS: list[tuple[str, list[str], dict[str, bool], bool, list[str]]] = [
    ("no subnets", [], {}, False, []),
    ("single tagged subnet", ["subnet-a0000001"], {"subnet-a0000001": True}, False,
     ["subnet-a0000001"]),
    ("no matching public subnet", ["subnet-a0000002"], {"subnet-a0000002": False}, False, []),
    ("prefer role over cluster tag", ["subnet-a0000001", "subnet-a0000003"],
     {"subnet-a0000001": True, "subnet-a0000003": True}, False, ["subnet-a0000001"]),
    ("prefer cluster tag", ["subnet-c0000001", "subnet-notag"], {}, False, ["subnet-c0000001"]),
    ("include untagged", ["subnet-a0000001", "subnet-notag"],
     {"subnet-a0000001": True, "subnet-notag": True}, False,
     ["subnet-a0000001", "subnet-notag"]),
    ("ignore some other cluster owned subnet", ["subnet-b0000001", "subnet-other"],
     {"subnet-b0000001": True, "subnet-other": True}, False, ["subnet-b0000001"]),
    ("prefer matching role", ["subnet-b0000001", "subnet-b0000002"],
     {"subnet-b0000001": False, "subnet-b0000002": False}, True, ["subnet-b0000002"]),
    ("choose lexicographic order", ["subnet-a0000001", "subnet-a0000002"],
     {"subnet-a0000001": True, "subnet-a0000002": True}, False, ["subnet-a0000001"]),
    ("everything",
     ["subnet-a0000001", "subnet-a0000002", "subnet-b0000001", "subnet-b0000002",
      "subnet-c0000001", "subnet-notag", "subnet-other"],
     dict.fromkeys(("subnet-a0000001", "subnet-a0000002", "subnet-b0000001",
                    "subnet-b0000002", "subnet-c0000001", "subnet-notag", "subnet-other"), True),
     False, ["subnet-a0000001", "subnet-b0000001", "subnet-c0000001"]),
    ("exclude subnets from local and wavelenght zones",
     ["subnet-a0000001", "subnet-b0000001", "subnet-c0000001", "subnet-in-local-zone",
      "subnet-in-wavelength-zone"], {}, False,
     ["subnet-a0000001", "subnet-b0000001", "subnet-c0000001"]),
]  # fmt: skip

_V6 = ["2a05:d014:aa7:911:fc7e:1600:fc4d:ab2", "2a05:d014:aa7:911:9f44:e737:1aa0:6489"]

#: ``TestNodeAddresses`` and ``TestNodeAddressesByProviderID`` (the addresses of the instance
#: found): (case, private IP, public IP, private DNS, public DNS, IPv6s, one in-use interface
#: with the private IP (and the first IPv6), IPv6 only, expected number of addresses)
NODE_ADDRESSES: list[tuple[str, str, str, str, str, list[str], bool, bool, int]] = [
    ("TestNodeAddresses: ipv4 w/public IP", "192.168.0.1", "1.2.3.4",
     "instance-same.ec2.internal", "instance-same.ec2.external", [], True, False, 5),
    ("TestNodeAddresses: ipv4 w/private IP only", "192.168.0.1", "1.2.3.4",
     "instance-other.ec2.internal", "", [], False, False, 3),
    ("TestNodeAddresses: ipv6 only", "192.168.0.3", "", "instance-ipv6.ec2.internal",
     "instance-same.ec2.external", _V6, True, True, 1),
    ("TestNodeAddresses: resource based naming using FQDN", "192.168.0.4", "1.2.3.4",
     "i-00000000000000004.ec2.internal", "", [], True, False, 4),
    ("TestNodeAddresses: resource based naming using hostname only", "192.168.0.5", "1.2.3.4",
     "i-00000000000000005", "", [], True, False, 4),
    ("TestNodeAddressesByProviderID: ipv4 w/public IP", "192.168.0.1", "1.2.3.4",
     "instance-same.ec2.internal", "instance-same.ec2.external", [], True, False, 5),
    ("TestNodeAddressesByProviderID: ipv4 w/private IP only", "192.168.0.2", "",
     "instance-same.ec2.internal", "", [], False, False, 2),
    ("TestNodeAddressesByProviderID: ipv4 w/public IP and no public DNS", "192.168.0.1",
     "1.2.3.4", "instance-other.ec2.internal", "", [], False, False, 3),
    ("TestNodeAddressesByProviderID: ipv6 only", "192.168.0.3", "",
     "instance-ipv6.ec2.internal", "", _V6, True, True, 1),
]  # fmt: skip

#: ``TestFindInstanceByNodeNameExcludesTerminatedInstances``: (instance state, found by its
#: node name (the PrivateDnsName))
FIND_BY_NODE_NAME_STATES: list[tuple[str, bool]] = [
    ("pending", True),
    ("running", True),
    ("shutting-down", True),
    ("terminated", False),
    ("stopping", True),
    ("stopped", True),
]

#: ``Test_getLoadBalancerSubnets``, the cases that resolve through EC2: (case, subnets in the
#: VPC as (Name tag, zone), the annotation (``{0}``, ``{1}``: the ids of those subnets),
#: expected subnets by Name tag, or the error text). Upstream's fake ignores the filters and
#: returns every subnet; the lab's EC2 filters by ``tag:Name`` as AWS does, so the subnets
#: carry the names the annotation uses.
LOAD_BALANCER_SUBNETS_EC2: list[tuple[str, list[tuple[str, str]], str, list[str], str]] = [
    ("subnet ids", [("My Subnet 1", "us-east-1c"), ("My Subnet 2", "us-east-1b")],
     "{0}, {1}", ["My Subnet 1", "My Subnet 2"], ""),
    ("subnet names", [("My Subnet 1", "us-east-1c"), ("My Subnet 2", "us-east-1b")],
     "My Subnet 1, My Subnet 2 ", ["My Subnet 1", "My Subnet 2"], ""),
    ("unable to find all subnets", [("My Subnet 1", "us-east-1c")],
     "My Subnet 1, My Subnet 2, Test Subnet ", [], "expected to find 3, but found 1 subnets"),
]  # fmt: skip

#: ``TestDescribeInstances``: (case, the lookup, expected ``MaxResults`` on the wire or None
#: when absent). Upstream's cases are inputs of its EC2 wrapper; ours are the three kinds of
#: DescribeInstances the controller sends: every cluster instance (the load balancers'
#: instance cache), by PrivateDnsName filter, by instance id.
DESCRIBE_INSTANCES: list[tuple[str, str, str | None]] = [
    ("MaxResults set on empty DescribeInstancesInput and NextToken respected.", "all", "1000"),
    # upstream's "MaxResults only set if empty DescribeInstancesInput" keeps a caller's own
    # MaxResults, which ours never sets; in its place the rule for a filtered input
    ("MaxResults set on a filtered DescribeInstancesInput", "private-dns", "1000"),
    ("MaxResults not set if instance IDs are provided", "ids", None),
]

#: The region upstream's fake instance metadata answers (``newMockedFakeAWSServices``).
METADATA_REGION = "us-west-2"

#: ``TestNewAWSCloud``: (case, config text, expected region, deviation reason or "")
NEW_AWS_CLOUD: list[tuple[str, str, str, str]] = [
    ("Config specifies valid zone", "[global]\nzone = eu-west-1a", "eu-west-1", ""),
    ("Gets zone from metadata when not in config", "[global]\n", METADATA_REGION, ""),
]  # fmt: skip
