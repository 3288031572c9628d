"""Fault rules scoped to a caller (a User-Agent substring) hit only that client."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from lab.aws import AwsControlError, AwsServer


def _ec2(aws: AwsServer, app_id: str) -> Any:
    return boto3.client(
        "ec2",
        endpoint_url=aws.url,
        region_name=aws.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(user_agent_appid=app_id, retries={"total_max_attempts": 1}),
    )


def test_caller_scoped_fault_hits_only_that_client(aws: AwsServer) -> None:
    rule = aws.control.add_fault(
        action="DescribeInstances", code="InternalError", status=500, caller="app/victim"
    )
    assert rule.caller == "app/victim"
    victim, bystander = _ec2(aws, "victim"), _ec2(aws, "bystander")
    with pytest.raises(ClientError) as err:
        victim.describe_instances()
    assert err.value.response["Error"]["Code"] == "InternalError"
    bystander.describe_instances()
    events = aws.trail.calls("DescribeInstances")
    assert [e.error_code for e in events] == ["InternalError", None]
    assert events[0].injected
    assert not events[1].injected


def test_caller_must_be_text(aws: AwsServer) -> None:
    with pytest.raises(AwsControlError, match="caller"):
        aws.control.add_fault(action="DescribeInstances", code="Throttling", caller="")
