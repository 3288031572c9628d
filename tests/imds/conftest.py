"""Fixtures for the metadata-service tests: a moto EC2 endpoint, one seeded instance, an IMDS.

The AWS endpoint is the lab's ``AwsEndpoint`` when ``lab.aws`` provides it, else moto's own
``ThreadedMotoServer`` on 127.0.0.1 port 0. moto's backends are process-global, so every test
starts from ``/moto-api/reset``.
"""

from __future__ import annotations

import base64
import contextlib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from lab.imds import ImdsServer

REGION = "us-east-1"


@dataclass(frozen=True)
class SeededInstance:
    instance_id: str
    private_ip: str
    zone: str
    subnet_id: str
    vpc_id: str
    group_id: str


class FakeClock:
    """Monotonic clock the token store reads; tests advance it instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def aws_url() -> Iterator[str]:
    try:
        from lab.aws import AwsEndpoint  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        AwsEndpoint = None
    if AwsEndpoint is not None:
        with AwsEndpoint(region=REGION) as aws:
            yield aws.url
        return
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server._server.server_port}"
    finally:
        server.stop()


@pytest.fixture
def ec2(aws_url: str) -> Any:
    urllib.request.urlopen(
        urllib.request.Request(f"{aws_url}/moto-api/reset", method="POST"), timeout=10
    ).close()
    return boto3.client(
        "ec2",
        endpoint_url=aws_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def run_node(
    ec2: Any,
    *,
    private_ip: str = "10.0.1.10",
    zone: str = "us-east-1b",
    http_tokens: str = "optional",
    hop_limit: int = 1,
    metadata_tags: str = "disabled",
    user_data: str | None = "#!/bin/sh\necho ccm-lab\n",
    tags: dict[str, str] | None = None,
) -> SeededInstance:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=zone)
    subnet_id = subnet["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="nodes.lab", Description="nodes", VpcId=vpc)
    all_tags = {"Name": "node-1", "kubernetes.io/cluster/lab": "owned", **(tags or {})}
    kwargs: dict[str, Any] = {}
    if user_data is not None:
        kwargs["UserData"] = user_data
    reply = ec2.run_instances(
        ImageId="ami-760aaa0f",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=subnet_id,
        PrivateIpAddress=private_ip,
        SecurityGroupIds=[group["GroupId"]],
        MetadataOptions={
            "HttpTokens": http_tokens,
            "HttpPutResponseHopLimit": hop_limit,
            "InstanceMetadataTags": metadata_tags,
        },
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [{"Key": k, "Value": v} for k, v in all_tags.items()],
            }
        ],
        **kwargs,
    )
    return SeededInstance(
        instance_id=reply["Instances"][0]["InstanceId"],
        private_ip=private_ip,
        zone=zone,
        subnet_id=subnet_id,
        vpc_id=vpc,
        group_id=group["GroupId"],
    )


@pytest.fixture
def node(ec2: Any) -> SeededInstance:
    return run_node(ec2)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def imds(aws_url: str, node: SeededInstance, clock: FakeClock) -> Iterator[ImdsServer]:
    server = ImdsServer(
        aws_url, REGION, instance_id=node.instance_id, cache_ttl=0, clock=clock, hold_seconds=3
    )
    with server:
        yield server


# -- raw HTTP helpers (for what botocore's fetchers cannot ask) ---------------------------------


@dataclass(frozen=True)
class Raw:
    status: int
    body: str
    headers: dict[str, str]


def http(
    method: str, url: str, *, headers: dict[str, str] | None = None, timeout: float = 5
) -> Raw:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return Raw(reply.status, reply.read().decode(), dict(reply.headers.items()))
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):
            return Raw(exc.code, exc.read().decode(), dict(exc.headers.items()))


def token(url: str, ttl: int = 21600, **headers: str) -> str:
    reply = http(
        "PUT",
        f"{url}/latest/api/token",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": str(ttl), **headers},
    )
    assert reply.status == 200, reply
    return reply.body


def get(url: str, path: str, tok: str | None = None, **headers: str) -> Raw:
    if tok is not None:
        headers["X-aws-ec2-metadata-token"] = tok
    return http("GET", f"{url}/{path.lstrip('/')}", headers=headers)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
