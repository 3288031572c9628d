"""The endpoint component: lifecycle, boto3 access, reset, seed, account and region."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer


def test_boto3_clients_talk_to_the_endpoint(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    vpcs = ec2.describe_vpcs()["Vpcs"]
    assert [v["IsDefault"] for v in vpcs] == [True]
    assert aws.url.startswith("http://127.0.0.1:")
    assert aws.client("elb").describe_load_balancers()["LoadBalancerDescriptions"] == []
    assert aws.client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    assert aws.client("sts").get_caller_identity()["Account"] == aws.account


def test_reset_clears_aws_state_and_trail(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    group = ec2.create_security_group(GroupName="web", Description="web")["GroupId"]
    assert aws.trail.count("CreateSecurityGroup") == 1
    aws.control.reset()
    assert len(aws.trail) == 0
    with pytest.raises(ClientError) as err:
        ec2.describe_security_groups(GroupIds=[group])
    assert err.value.response["Error"]["Code"] == "InvalidGroup.NotFound"


def test_seed_makes_resource_ids_repeat(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")

    def make_ids() -> list[str]:
        aws.control.seed(42)
        aws.control.reset()
        vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
        group = ec2.create_security_group(GroupName="g", Description="g")["GroupId"]
        return [vpc, group]

    first = make_ids()
    second = make_ids()
    assert first == second
    aws.control.seed(43)
    aws.control.reset()
    assert ec2.create_security_group(GroupName="g", Description="g")["GroupId"] != first[1]


def test_stop_is_idempotent_and_releases_the_port() -> None:
    endpoint = AwsServer(region="eu-west-1", account="210987654321")
    with endpoint:
        port = endpoint.port
        assert endpoint.control.health().region == "eu-west-1"
        assert endpoint.client("sts").get_caller_identity()["Account"] == "210987654321"
    endpoint.stop()
    assert not endpoint.running
    with socket.socket() as sock:
        # the kept-alive connections the server closed linger in TIME_WAIT, as TCP wants;
        # that is no listener, so a server (which sets SO_REUSEADDR) can bind the port again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))  # free again
    with pytest.raises(urllib.error.URLError, match="refused"):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_lab/health", timeout=2)
