"""The controller against the topology the lab seeds for e2e runs (``lab.aws.topology``),
started from the lab's instance metadata exactly as a controller on a node would be."""

from __future__ import annotations

import pytest

from controller.aws import load_cloud_config, new_cloud
from controller.cloud import Node, Service, ServicePort
from lab.aws import AwsServer
from lab.aws.seeding import seed_topology
from lab.aws.topology import NodeSpec, TopologySpec
from lab.imds import ImdsServer
from tests.controller.aws.conftest import REGION


def test_ensure_and_delete_on_lab_topology(aws: AwsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = TopologySpec(
        cluster_id="e2e",
        region=REGION,
        zones=(f"{REGION}a", f"{REGION}b"),
        nodes=(
            NodeSpec("node-a", "10.0.0.10", f"{REGION}a"),
            NodeSpec("node-b", "10.0.16.10", f"{REGION}b"),
        ),
    )
    topo = seed_topology(aws.client("ec2"), spec)
    overrides = "".join(
        f'[ServiceOverride "{i}"]\nService = {svc}\nRegion = {REGION}\nURL = {aws.url}\n'
        f"SigningRegion = {REGION}\n"
        for i, svc in enumerate(("ec2", "elasticloadbalancing"))
    )
    cfg, warnings = load_cloud_config(f"[Global]\nRegion = {REGION}\n{overrides}")
    assert warnings == []
    self_id = topo.instances["node-a"].instance_id
    with ImdsServer(aws.url, REGION, instance_id=self_id, cache_ttl=0) as imds:
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
        cloud = new_cloud(cfg, sg_delete_interval=0.05, sg_delete_timeout=2.0)
    assert (cloud.cluster_id, cloud.vpc_id) == ("e2e", topo.vpc_id)

    svc = Service(
        namespace="default",
        name="web",
        uid="0a0b0c0d-1111-2222-3333-444455556666",
        ports=(ServicePort(port=80, node_port=31000),),
    )
    nodes = [Node(name=n, provider_id=i.provider_id) for n, i in topo.instances.items()]
    lb = cloud.load_balancer()
    status = lb.ensure_load_balancer("kubernetes", svc, nodes)
    assert status.ingress[0].hostname.endswith(".elb.amazonaws.com")
    elb = aws.client("elb").describe_load_balancers()["LoadBalancerDescriptions"][0]
    assert sorted(elb["Subnets"]) == sorted(s.subnet_id for s in topo.subnets.values())
    assert sorted(i["InstanceId"] for i in elb["Instances"]) == sorted(
        i.instance_id for i in topo.instances.values()
    )
    node_b = topo.instances["node-b"]
    md = cloud.instances_v2().instance_metadata(Node(name=node_b.private_dns_name))
    assert md.provider_id == node_b.provider_id
    assert md.node_addresses[0].address == node_b.private_ip
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    node_sg = topo.node_security_group.group_id
    perms = aws.client("ec2").describe_security_groups(GroupIds=[node_sg])["SecurityGroups"][0][
        "IpPermissions"
    ]
    assert [p["UserIdGroupPairs"][0]["GroupId"] for p in perms] == [node_sg]  # self rule only
    assert aws.trail.count("DeleteSecurityGroup", ok=True) == 1
