"""Fault injection: errors in the right wire shape, by count, by seeded probability, latency."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from tests.aws import builders as b


def _outcomes(aws: AwsServer, action: str) -> list[str | None]:
    return [e.error_code for e in aws.trail.calls(action)]


def test_fault_by_count_then_recovers(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "victim")
    rule = aws.control.add_fault(action="DeleteSecurityGroup", code="Throttling", count=2)
    assert (rule.count, rule.status, rule.fired) == (2, 400, 0)
    for _ in range(2):
        with pytest.raises(ClientError) as err:
            ec2.delete_security_group(GroupId=sg)
        response = err.value.response
        assert response["Error"]["Code"] == "Throttling"
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    ec2.delete_security_group(GroupId=sg)  # third call reaches moto
    assert _outcomes(aws, "DeleteSecurityGroup") == ["Throttling", "Throttling", None]
    injected = aws.trail.calls("DeleteSecurityGroup", injected=True)
    assert [e.answered_by for e in injected] == [f"fault:{rule.id}"] * 2
    assert aws.control.faults()[0].fired == 2
    # an injected error never reached moto: the group was still there for the third call
    assert aws.trail.calls("DeleteSecurityGroup")[-1].answered_by == "moto"


def test_elb_faults_use_the_elb_error_shape(aws: AwsServer) -> None:
    aws.control.add_fault(action="DescribeLoadBalancers", code="InternalError", count=1)
    with pytest.raises(ClientError) as err:
        aws.client("elb").describe_load_balancers()
    error = dict(err.value.response["Error"])
    assert error == {"Type": "Receiver", "Code": "InternalError", "Message": "Injected by ccm-lab"}
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    # elbv2 is a different service with the same action name: rule fired once, now retired
    aws.client("elbv2").describe_load_balancers()


def test_service_filter_and_custom_message(aws: AwsServer) -> None:
    aws.control.add_fault(
        action="DescribeLoadBalancers",
        service="elbv2",
        code="ThrottlingException",
        message="Rate exceeded",
    )
    aws.client("elb").describe_load_balancers()
    with pytest.raises(ClientError) as err:
        aws.client("elbv2").describe_load_balancers()
    assert err.value.response["Error"]["Code"] == "ThrottlingException"
    assert err.value.response["Error"]["Message"] == "Rate exceeded"
    assert dict(err.value.response["Error"])["Type"] == "Sender"


def test_seeded_probability_is_deterministic(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")

    def run() -> list[bool]:
        aws.control.clear_faults()
        aws.control.add_fault(
            action="DescribeSecurityGroups", code="RequestLimitExceeded", probability=0.4, seed=7
        )
        failed: list[bool] = []
        for _ in range(30):
            try:
                ec2.describe_security_groups()
                failed.append(False)
            except ClientError as exc:
                failed.append(exc.response["Error"]["Code"] == "RequestLimitExceeded")
        return failed

    first = run()
    assert first == run()
    assert 3 <= sum(first) <= 27  # both outcomes happen
    aws.control.clear_faults()
    ec2.describe_security_groups()


def test_latency_fault_slows_the_call_and_is_flagged(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    ec2.describe_vpcs()
    aws.control.add_latency(action="DescribeVpcs", latency_ms=300, count=1)
    started = time.perf_counter()
    assert ec2.describe_vpcs()["Vpcs"]
    assert time.perf_counter() - started >= 0.3
    slow = aws.trail.calls("DescribeVpcs")[-1]
    assert slow.injected
    assert slow.ok
    assert slow.latency_ms >= 300


def test_wildcard_fault_and_removal(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    rule = aws.control.add_fault(action="*", code="InternalError", status=503)
    with pytest.raises(ClientError) as err:
        ec2.describe_vpcs()
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    aws.control.remove_fault(rule.id)
    assert aws.control.faults() == []
    ec2.describe_vpcs()


def test_dependency_violation_can_be_injected_on_demand(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "free")  # nothing depends on it, yet the delete fails
    aws.control.add_fault(
        action="DeleteSecurityGroup",
        code="DependencyViolation",
        message=f"resource {sg} has a dependent object",
        count=1,
    )
    with pytest.raises(ClientError, match="has a dependent object"):
        ec2.delete_security_group(GroupId=sg)
    ec2.delete_security_group(GroupId=sg)


def test_fault_matching_parameters_hits_only_that_group(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    keep, other = b.group(ec2, "keep"), b.group(ec2, "other")
    aws.control.add_fault(
        action="DeleteSecurityGroup", code="DependencyViolation", match={"GroupId": keep}
    )
    ec2.delete_security_group(GroupId=other)
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupId=keep)
    aws.control.add_fault(
        action="DescribeSecurityGroups", code="Throttling", match={"GroupIds": keep}
    )
    ec2.describe_security_groups()
    with pytest.raises(ClientError, match="Throttling"):
        ec2.describe_security_groups(GroupIds=[keep])
    assert [r.fired for r in aws.control.faults()] == [1, 1]


@pytest.mark.parametrize(
    ("fault", "names"),
    [
        ({"action": ""}, "action=''"),
        ({"action": "X"}, "code=None"),
        ({"action": "X", "code": "Throttling", "count": 0}, "count=0"),
        ({"action": "X", "code": "Throttling", "probability": 1.5}, "probability=1.5"),
        ({"action": "X", "code": "Throttling", "status": 200}, "status=200"),
        ({"action": "X", "code": "Throttling", "latency_ms": -1}, "latency_ms=-1"),
        ({"action": "X", "code": "Throttling", "latency_ms": 600_001}, "latency_ms=600001"),
        ({"action": "X", "code": "Throttling", "latency_ms": 1e12}, "latency_ms=1000000000000.0"),
        ({"action": "X", "code": "Throttling", "latency_ms": float("nan")}, "latency_ms=nan"),
        ({"action": "X", "code": "Throttling", "count": True}, "count=True"),
        ({"action": "X", "code": "Throttling", "count": 1.5}, "count=1.5"),
        ({"action": "X", "code": "Throttling", "probability": -0.1}, "probability=-0.1"),
        ({"action": "X", "code": "Throttling", "probability": float("nan")}, "probability=nan"),
        ({"action": "X", "code": "Throttling", "match": {"GroupId": 1}}, "match={'GroupId': 1}"),
        ({"action": "X", "code": "Throttling", "seed": "7"}, "seed='7'"),
        ({"action": "X", "code": "Throttling", "colour": "red"}, "colour='red'"),
        ({"action": "X", "effect": "sometimes"}, "effect='sometimes'"),
        ({"action": "X", "effect": "latency"}, "latency_ms=0"),
        ({"action": "X", "effect": "latency", "latency_ms": 5, "code": "Throttling"}, "code="),
    ],
)
def test_bad_fault_is_refused_naming_the_field(
    aws: AwsServer, fault: dict[str, object], names: str
) -> None:
    request = urllib.request.Request(
        f"{aws.url}/_lab/faults",
        data=json.dumps(fault).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    with err.value as reply:
        assert reply.code == 400
        assert names in json.loads(reply.read())["error"]
    assert aws.control.faults() == []  # nothing was added


def test_count_and_probability_combine(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    rule = aws.control.add_fault(action="DescribeVpcs", code="Throttling", probability=1, count=2)
    outcomes = []
    for _ in range(4):
        try:
            ec2.describe_vpcs()
            outcomes.append("ok")
        except ClientError as exc:
            outcomes.append(exc.response["Error"]["Code"])
    assert outcomes == ["Throttling", "Throttling", "ok", "ok"]
    (listed,) = aws.control.faults()
    assert (listed.id, listed.fired, listed.exhausted) == (rule.id, 2, True)


def test_latency_rules_add_up_and_an_error_rule_still_answers(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    aws.control.add_latency(action="*", latency_ms=150, count=1)
    aws.control.add_fault(action="DescribeVpcs", code="InternalError", count=1)
    started = time.perf_counter()
    with pytest.raises(ClientError, match="InternalError"):
        ec2.describe_vpcs()
    assert time.perf_counter() - started >= 0.15
    assert [r.fired for r in aws.control.faults()] == [1, 1]
