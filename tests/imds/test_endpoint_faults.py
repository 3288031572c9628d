"""The IMDS on a failing AWS endpoint: an EC2 error becomes a 502, and its calls are traceable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.aws import AwsServer
from lab.imds import ImdsServer
from tests.imds.conftest import get


@pytest.fixture
def faults(aws_endpoint: AwsServer) -> Iterator[AwsServer]:
    yield aws_endpoint
    aws_endpoint.control.clear_faults()


def test_throttled_describe_is_a_502_naming_the_call(imds: ImdsServer, faults: AwsServer) -> None:
    assert get(imds.url, "latest/meta-data/instance-id").status == 200
    faults.control.add_fault(
        action="DescribeInstances", code="RequestLimitExceeded", status=503, count=2
    )
    reply = get(imds.url, "latest/meta-data/instance-id")
    assert reply.status == 502
    assert reply.headers["X-Ccm-Lab-Error"] == "Ec2Error"
    assert "RequestLimitExceeded" in reply.body
    assert get(imds.url, "latest/meta-data/instance-id").status == 200  # fault exhausted


def test_imds_calls_are_marked_in_the_trail(imds: ImdsServer, faults: AwsServer) -> None:
    since = max((e.seq for e in faults.control.trail()), default=0)
    assert get(imds.url, "latest/meta-data/local-ipv4").status == 200
    calls = faults.control.trail("DescribeInstances", since_seq=since)
    assert calls
    assert all("ccm-lab-imds" in call.user_agent for call in calls)
