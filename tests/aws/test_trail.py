"""The call trail over a realistic load balancer sequence, its queries, export and rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer, load_jsonl
from lab.aws.render import format_trail
from lab.aws.trail import summarize_params
from tests.aws import builders as b

SEQUENCE = [
    "CreateSecurityGroup",
    "CreateSecurityGroup",
    "AuthorizeSecurityGroupIngress",
    "AuthorizeSecurityGroupIngress",
    "RunInstances",
    "CreateLoadBalancer",
    "RegisterInstancesWithLoadBalancer",
    "DeleteLoadBalancer",
    "DeleteSecurityGroup",
    "RevokeSecurityGroupIngress",
    "DeleteSecurityGroup",
]


def _run_sequence(aws: AwsServer) -> dict[str, str]:
    """The write-up's path: ELB group + node rule, ELB, register, delete, group teardown."""
    ec2, elb = aws.client("ec2"), aws.client("elb")
    vpc, subnet = b.default_vpc(ec2), b.first_subnet(ec2)
    start = aws.trail.last_seq
    nodes = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
    lb_sg = ec2.create_security_group(GroupName="k8s-elb-a1", Description="elb", VpcId=vpc)[
        "GroupId"
    ]
    ec2.authorize_security_group_ingress(
        GroupId=lb_sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 80,
                "ToPort": 80,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )
    ec2.authorize_security_group_ingress(
        GroupId=nodes,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": lb_sg}]}],
    )
    node = ec2.run_instances(
        ImageId=b.AMI, MinCount=1, MaxCount=1, SecurityGroupIds=[nodes], SubnetId=subnet
    )["Instances"][0]["InstanceId"]
    elb.create_load_balancer(
        LoadBalancerName="a1",
        Listeners=[
            {
                "Protocol": "TCP",
                "LoadBalancerPort": 80,
                "InstanceProtocol": "TCP",
                "InstancePort": 30080,
            }
        ],
        Subnets=[subnet],
        SecurityGroups=[lb_sg, nodes],
    )
    elb.register_instances_with_load_balancer(
        LoadBalancerName="a1", Instances=[{"InstanceId": node}]
    )
    elb.delete_load_balancer(LoadBalancerName="a1")
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupId=lb_sg)  # the node rule still references it
    ec2.revoke_security_group_ingress(
        GroupId=nodes,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": lb_sg}]}],
    )
    ec2.delete_security_group(GroupId=lb_sg)
    return {"nodes": nodes, "lb_sg": lb_sg, "node": node, "start": str(start)}


def test_trail_records_the_load_balancer_sequence(aws: AwsServer) -> None:
    ids = _run_sequence(aws)
    events = aws.trail.calls(since_seq=int(ids["start"]))
    assert [e.action for e in events] == SEQUENCE
    assert [e.service for e in events] == ["ec2"] * 5 + ["elb"] * 3 + ["ec2"] * 3
    by_action = {e.action: e for e in events}
    assert events[0].params == {
        "GroupName": "nodes",
        "VpcId": b.default_vpc(aws.client("ec2")),
        "GroupDescription": "nodes",
    }
    assert events[0].response == {"GroupId": ids["nodes"]}
    assert events[2].params == {
        "GroupId": ids["lb_sg"],
        "IpPermissions": ["tcp 80-80 from 0.0.0.0/0"],
    }
    assert events[3].params == {
        "GroupId": ids["nodes"],
        "IpPermissions": [f"all from {ids['lb_sg']}"],
    }
    assert by_action["RunInstances"].response == {"InstanceIds": [ids["node"]]}
    create = by_action["CreateLoadBalancer"]
    assert create.params["LoadBalancerName"] == "a1"
    assert create.params["SecurityGroups"] == [ids["lb_sg"], ids["nodes"]]
    assert create.params["Listeners"] == ["TCP:80->TCP:30080"]
    assert create.response["DNSName"] == "a1.us-east-1.elb.amazonaws.com"
    assert by_action["RegisterInstancesWithLoadBalancer"].params["Instances"] == [ids["node"]]
    deletes = aws.trail.calls("DeleteSecurityGroup", params={"GroupId": ids["lb_sg"]})
    assert [(e.status, e.error_code) for e in deletes] == [
        (400, "DependencyViolation"),
        (200, None),
    ]
    assert deletes[0].error_message == f"resource {ids['lb_sg']} has a dependent object"
    assert deletes[0].answered_by == f"fidelity:sg_dependency:rule:{ids['nodes']}"
    assert deletes[1].answered_by == "moto"
    for event in events:
        assert event.latency_ms > 0
        assert event.source.startswith("127.0.0.1:")
        assert "Boto3" in event.user_agent
        assert event.region == "us-east-1"
        assert event.request_id
        assert not event.injected
    assert [e.seq for e in events] == sorted(e.seq for e in events)


def test_trail_queries_counts_and_export(aws: AwsServer, tmp_path: Path) -> None:
    ids = _run_sequence(aws)
    trail = aws.trail
    assert trail.count("DeleteSecurityGroup") == 2
    assert trail.count("DeleteSecurityGroup", ok=False) == 1
    assert trail.counts()["CreateSecurityGroup"] == 2
    assert trail.calls(error_code="DependencyViolation")[0].action == "DeleteSecurityGroup"
    assert trail.actions(service="elb") == [
        "CreateLoadBalancer",
        "RegisterInstancesWithLoadBalancer",
        "DeleteLoadBalancer",
    ]
    path = tmp_path / "trail.jsonl"
    assert trail.export_jsonl(path) == len(trail)
    lines = path.read_text().splitlines()
    assert all(json.loads(line)["action"] for line in lines)
    assert load_jsonl(lines) == trail.events()
    # the same events over the control plane
    assert aws.control.trail() == trail.events()
    remote = aws.control.trail("DeleteSecurityGroup", error_code="DependencyViolation")
    assert [e.seq for e in remote] == [e.seq for e in trail.calls(error_code="DependencyViolation")]
    assert aws.control.trail_events() == trail.events()
    revoked = aws.control.trail(params={"IpPermissions": f"all from {ids['lb_sg']}"})
    assert [e.action for e in revoked] == [
        "AuthorizeSecurityGroupIngress",
        "RevokeSecurityGroupIngress",
    ]
    aws.control.clear_trail()
    assert aws.control.trail() == []


def test_trail_file_sink_streams_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "sink" / "trail.jsonl"
    with AwsServer(trail_path=path) as endpoint:
        endpoint.client("ec2").describe_security_groups()
        endpoint.client("elb").describe_load_balancers()
        [first, second] = load_jsonl(path.read_text().splitlines())
    assert (first.action, second.action) == ("DescribeSecurityGroups", "DescribeLoadBalancers")


def test_render_trail_reads_like_a_console(aws: AwsServer) -> None:
    ids = _run_sequence(aws)
    text = format_trail(aws.trail.calls("DeleteSecurityGroup"), width=220)
    assert text.count("DeleteSecurityGroup") == 2
    assert "400 DependencyViolation [fidelity]" in text
    assert f"GroupId={ids['lb_sg']}" in text


def test_summaries_of_filters_and_elb_members() -> None:
    params = {
        "Filter.1.Name": "ip-permission.group-id",
        "Filter.1.Value.1": "sg-1",
        "Filter.2.Name": "vpc-id",
        "Filter.2.Value.1": "vpc-1",
        "Filter.2.Value.2": "vpc-2",
        "GroupId.1": "sg-a",
        "GroupId.2": "sg-b",
        "Instances.member.1.InstanceId": "i-1",
        "Instances.member.2.InstanceId": "i-2",
        "IpPermissions.1.IpProtocol": "icmp",
        "IpPermissions.1.FromPort": "3",
        "IpPermissions.1.ToPort": "4",
        "IpPermissions.1.IpRanges.1.CidrIp": "10.0.0.0/8",
    }
    assert summarize_params(params) == {
        "GroupIds": ["sg-a", "sg-b"],
        "Instances": ["i-1", "i-2"],
        "Filters": ["ip-permission.group-id=sg-1", "vpc-id=vpc-1,vpc-2"],
        "IpPermissions": ["icmp 3-4 from 10.0.0.0/8"],
    }
