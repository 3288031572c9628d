"""EC2's rules-per-security-group quota in the lab (fidelity setting ``sg_rules_quota``).

AWS's quota "Inbound or outbound rules per security group" is 60 by default and raised on
request up to 1,000; moto fixes it at 60. A cluster with hundreds of NLB Services (each adds
rules to the node group) needs the raised quota on AWS, and so in the lab
(``benchmarks/controller.py --nlb`` at 500 Services, issue 28). The quota counts each CIDR
range and each group a rule names, per direction, as moto and AWS do; a call past it is refused
whole, storing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsControlError, AwsServer
from lab.aws.fidelity_config import FidelityConfig


def _tcp(port: int, *cidrs: str) -> dict[str, Any]:
    ranges = [{"CidrIp": c} for c in cidrs or ("10.0.0.0/16",)]
    return {"IpProtocol": "tcp", "FromPort": port, "ToPort": port, "IpRanges": ranges}


@pytest.fixture
def group(aws: AwsServer) -> Iterator[str]:
    ec2 = aws.client("ec2")
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    yield ec2.create_security_group(GroupName="quota", Description="q", VpcId=vpc)["GroupId"]
    aws.control.set_fidelity(sg_rules_quota=60)


def _ingress(aws: AwsServer, group_id: str) -> int:
    found = aws.client("ec2").describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    return sum(len(p.get("IpRanges", [])) for p in found["IpPermissions"])


def _refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return str(caught.value.response["Error"]["Code"])


def test_the_default_is_awss_60(aws: AwsServer, group: str) -> None:
    ec2 = aws.client("ec2")
    assert aws.control.fidelity().sg_rules_quota == 60
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[_tcp(p) for p in range(60)])
    code = _refused(ec2.authorize_security_group_ingress, GroupId=group, IpPermissions=[_tcp(1000)])
    assert code == "RulesPerSecurityGroupLimitExceeded"
    assert _ingress(aws, group) == 60


def test_a_raised_quota_takes_rules_up_to_it_and_refuses_past_it_whole(
    aws: AwsServer, group: str
) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(sg_rules_quota=150)
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[_tcp(p) for p in range(140)])
    # two ranges in one permission count as two rules: 140 + 5 x 2 = 150 fits
    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[_tcp(2000 + p, "10.1.0.0/16", "10.2.0.0/16") for p in range(5)],
    )
    assert _ingress(aws, group) == 150
    code = _refused(ec2.authorize_security_group_ingress, GroupId=group, IpPermissions=[_tcp(3000)])
    assert code == "RulesPerSecurityGroupLimitExceeded"
    assert _ingress(aws, group) == 150
    # outbound rules have a quota of their own, the same number
    ec2.revoke_security_group_egress(
        GroupId=group, IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    )
    ec2.authorize_security_group_egress(GroupId=group, IpPermissions=[_tcp(p) for p in range(150)])
    code = _refused(ec2.authorize_security_group_egress, GroupId=group, IpPermissions=[_tcp(9)])
    assert code == "RulesPerSecurityGroupLimitExceeded"


def test_the_quota_holds_with_the_fixes_off(aws: AwsServer, group: str) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(sg_rules_quota=80, enabled=False)
    try:
        ec2.authorize_security_group_ingress(
            GroupId=group, IpPermissions=[_tcp(p) for p in range(80)]
        )
        assert _ingress(aws, group) == 80
    finally:
        aws.control.set_fidelity(enabled=True)


@pytest.mark.parametrize("value", [0, 1001, -5, True, "100", 60.0, None])
def test_a_bad_quota_is_refused_naming_the_setting_and_changes_nothing(
    aws: AwsServer, value: Any
) -> None:
    with pytest.raises(AwsControlError, match=r"sg_rules_quota.*1\.\.1000"):
        aws.control.set_fidelity(sg_rules_quota=value)
    assert aws.control.fidelity().sg_rules_quota == 60


def test_an_endpoint_started_with_a_raised_quota_has_it() -> None:
    with AwsServer(fidelity=FidelityConfig(sg_rules_quota=1000)) as aws:
        assert aws.control.fidelity().sg_rules_quota == 1000
