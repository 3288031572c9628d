"""``DescribeInstanceTopology``: stock moto 5.2.5 does not implement it; the lab answers it
from moto's instances (``lab/aws/instance_topology.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer

AMI = "ami-12c6146b"


def _run(ec2: Any, instance_type: str, *, zone: str = "us-east-1a", count: int = 1) -> list[str]:
    resp = ec2.run_instances(
        ImageId=AMI,
        InstanceType=instance_type,
        MinCount=count,
        MaxCount=count,
        Placement={"AvailabilityZone": zone},
    )
    return [i["InstanceId"] for i in resp["Instances"]]


def test_stock_moto_does_not_implement_it(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    [iid] = _run(ec2, "trn1.32xlarge")
    aws.control.set_fidelity(instance_topology=False)
    with pytest.raises(ClientError) as err:
        ec2.describe_instance_topology(InstanceIds=[iid])
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    [internal] = aws.take_internal_errors()
    assert "describe_instance_topology action has not been implemented" in internal
    aws.control.set_fidelity(instance_topology=True)
    [listed] = ec2.describe_instance_topology(InstanceIds=[iid])["Instances"]
    assert listed["InstanceId"] == iid
    [event] = aws.trail.calls("DescribeInstanceTopology")[-1:]
    assert event.answered_by == "fidelity:instance_topology"


def test_supported_running_instances_only_with_their_layers(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    [trn] = _run(ec2, "trn1.32xlarge")
    [b200] = _run(ec2, "p6-b200.48xlarge")
    [small] = _run(ec2, "t3.large")
    [stopped] = _run(ec2, "p5.48xlarge")
    ec2.stop_instances(InstanceIds=[stopped])
    found = ec2.describe_instance_topology(InstanceIds=[trn, b200, small, stopped, "i-0123"])
    by_id = {i["InstanceId"]: i for i in found["Instances"]}
    assert sorted(by_id) == sorted([trn, b200])  # unsupported type, stopped, unknown: left out
    assert len(by_id[trn]["NetworkNodes"]) == 3
    assert len(by_id[b200]["NetworkNodes"]) == 4
    zones = {
        z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
    }
    for item in by_id.values():
        assert item["AvailabilityZone"] == "us-east-1a"
        assert item["ZoneId"] == zones["us-east-1a"]
        assert all(n.startswith("nn-") and len(n) == 20 for n in item["NetworkNodes"])
    # same zone, no placement group: the upper layers are shared, the last is the instance's
    assert by_id[trn]["NetworkNodes"][:2] == by_id[b200]["NetworkNodes"][:2]
    assert by_id[trn]["NetworkNodes"][2] != by_id[b200]["NetworkNodes"][2]
    again = ec2.describe_instance_topology(InstanceIds=[trn])["Instances"][0]
    assert again["NetworkNodes"] == by_id[trn]["NetworkNodes"]  # stable


def test_filters_and_pages(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    in_a = _run(ec2, "trn1.2xlarge", count=3)
    in_b = _run(ec2, "hpc7g.4xlarge", zone="us-east-1b")
    by_type = ec2.describe_instance_topology(
        Filters=[{"Name": "instance-type", "Values": ["trn1*"]}]
    )["Instances"]
    assert sorted(i["InstanceId"] for i in by_type) == sorted(in_a)
    by_zone = ec2.describe_instance_topology(
        Filters=[{"Name": "availability-zone", "Values": ["us-east-1b"]}]
    )["Instances"]
    assert [i["InstanceId"] for i in by_zone] == in_b
    seen: list[str] = []
    page = ec2.describe_instance_topology(MaxResults=2)
    seen += [i["InstanceId"] for i in page["Instances"]]
    assert len(seen) == 2
    assert page.get("NextToken")
    page = ec2.describe_instance_topology(MaxResults=2, NextToken=page["NextToken"])
    seen += [i["InstanceId"] for i in page["Instances"]]
    assert "NextToken" not in page
    assert sorted(seen) == sorted(in_a + in_b)


def test_max_results_with_instance_ids_is_refused(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    [iid] = _run(ec2, "trn1.2xlarge")
    with pytest.raises(ClientError) as err:
        ec2.describe_instance_topology(InstanceIds=[iid], MaxResults=5)
    assert err.value.response["Error"]["Code"] == "InvalidParameterCombination"
    with pytest.raises(ClientError) as err:
        ec2.describe_instance_topology(InstanceIds=[f"i-{n:017x}" for n in range(101)])
    assert err.value.response["Error"]["Code"] == "InvalidParameterValue"
