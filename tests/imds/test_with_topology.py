"""A seeded topology served by the IMDS: each node's metadata matches its seeded instance."""

from __future__ import annotations

import json

from lab.aws import AwsServer
from lab.aws.seeding import seed_topology
from lab.aws.topology import NodeSpec, TopologySpec, ec2_client
from lab.imds import INSTANCE_HEADER, ImdsServer
from tests.imds.conftest import botocore_region, get

SPEC = TopologySpec(
    cluster_id="imds-lab",
    region="us-west-2",
    zones=("us-west-2a", "us-west-2b"),
    nodes=(
        NodeSpec("cp", "10.0.0.10", "us-west-2a"),
        NodeSpec("w1", "10.0.16.11", "us-west-2b", instance_type="t3.large"),
    ),
)


def test_every_node_sees_its_own_instance(aws_endpoint: AwsServer) -> None:
    aws_endpoint.reset()
    # the endpoint's default region is us-east-1; this topology lives in us-west-2
    ec2 = ec2_client(aws_endpoint.url, SPEC.region)
    topo = seed_topology(ec2, SPEC)
    with ImdsServer(aws_endpoint.url, SPEC.region, cache_ttl=0) as imds:
        for node in SPEC.nodes:
            info = topo.instances[node.name]
            imds.control.map_source_address("127.0.0.1", info.instance_id)
            region = botocore_region(imds.url)
            assert region == "us-west-2"

            def md(path: str, iid: str = info.instance_id) -> str:
                reply = get(imds.url, f"latest/meta-data/{path}", **{INSTANCE_HEADER: iid})
                assert reply.status == 200, (path, reply)
                return reply.body

            assert md("instance-id") == info.instance_id
            assert md("local-ipv4") == node.private_ip
            assert (
                md("local-hostname")
                == f"ip-{node.private_ip.replace('.', '-')}.us-west-2.compute.internal"
            )
            assert md("placement/availability-zone") == node.zone
            assert md("instance-type") == node.instance_type
            assert md("security-groups") == "nodes.imds-lab"
            mac = md("mac")
            assert (
                md(f"network/interfaces/macs/{mac}/subnet-id") == topo.subnets[node.zone].subnet_id
            )
            assert md(f"network/interfaces/macs/{mac}/vpc-id") == topo.vpc_id
            assert md(f"network/interfaces/macs/{mac}/security-group-ids") == (
                topo.node_security_group.group_id
            )
            doc = json.loads(get(imds.url, "latest/dynamic/instance-identity/document").body)
            assert doc["instanceId"] == info.instance_id
            assert doc["privateIp"] == node.private_ip
            assert doc["region"] == "us-west-2"
