"""Fixtures for the metadata-service tests: a moto EC2 endpoint, one seeded instance, an IMDS.

The AWS endpoint is the lab's ``AwsServer`` (moto plus fidelity layer, one per session);
moto's backends are process-global, so each test module starts from ``reset()`` and builds
one VPC/subnet/group; each test then runs its own instance (cheaper than a reset per test).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.utils import InstanceMetadataFetcher, InstanceMetadataRegionFetcher

from lab.aws import AwsServer
from lab.imds import ImdsServer

REGION = "us-east-1"
#: botocore fetcher timeout in tests: generous, so a loaded machine never turns an answer into a
#: timeout. The hop-limit tests stay fast because the IMDS closes a withheld token request after
#: ``HOLD`` seconds (botocore treats the closed connection like a timeout: v1 fallback).
CLIENT_TIMEOUT = 5
HOLD = 0.5


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
def aws_endpoint() -> Iterator[AwsServer]:
    with AwsServer(region=REGION) as aws:
        yield aws


@pytest.fixture
def aws_url(aws_endpoint: AwsServer) -> str:
    return aws_endpoint.url


@dataclass(frozen=True)
class World:
    """One VPC, subnet and node group shared by a test module (instances are per test)."""

    ec2: Any
    vpc_id: str
    subnet_id: str
    group_id: str
    zone: str


@pytest.fixture(scope="module")
def world(aws_endpoint: AwsServer) -> World:
    aws_endpoint.reset()  # moto's backends are process-global: each module starts from empty
    ec2 = aws_endpoint.client("ec2")
    zone = "us-east-1b"
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=zone)
    group = ec2.create_security_group(GroupName="nodes.lab", Description="nodes", VpcId=vpc)
    return World(ec2, vpc, subnet["Subnet"]["SubnetId"], group["GroupId"], zone)


@pytest.fixture
def ec2(world: World) -> Any:
    return world.ec2


_next_host = itertools.count(10)


def run_node(
    world: World,
    *,
    private_ip: str | None = None,
    http_tokens: str = "optional",
    hop_limit: int = 1,
    metadata_tags: str = "disabled",
    user_data: str | None = "#!/bin/sh\necho ccm-lab\n",
    tags: dict[str, str] | None = None,
) -> SeededInstance:
    """A new instance in ``world`` (a fresh private IP unless one is given)."""
    ip = private_ip or f"10.0.1.{next(_next_host) % 240 + 10}"
    all_tags = {"Name": "node-1", "kubernetes.io/cluster/lab": "owned", **(tags or {})}
    kwargs: dict[str, Any] = {}
    if user_data is not None:
        kwargs["UserData"] = user_data
    reply = world.ec2.run_instances(
        ImageId="ami-760aaa0f",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=world.subnet_id,
        PrivateIpAddress=ip,
        SecurityGroupIds=[world.group_id],
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
        private_ip=ip,
        zone=world.zone,
        subnet_id=world.subnet_id,
        vpc_id=world.vpc_id,
        group_id=world.group_id,
    )


@pytest.fixture
def node(world: World) -> SeededInstance:
    return run_node(world)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def imds(aws_url: str, node: SeededInstance, clock: FakeClock) -> Iterator[ImdsServer]:
    server = ImdsServer(
        aws_url, REGION, instance_id=node.instance_id, cache_ttl=0, clock=clock, hold_seconds=HOLD
    )
    with server:
        yield server
        errors = server.take_internal_errors()
        assert not errors, "the metadata service raised while serving:\n" + "\n".join(errors)


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


def botocore_region(url: str) -> str | None:
    """botocore's own region fetcher (token PUT, then GET placement/availability-zone/)."""
    return InstanceMetadataRegionFetcher(base_url=url, timeout=CLIENT_TIMEOUT).retrieve_region()


def botocore_credentials(url: str) -> dict[str, Any]:
    """botocore's own credential fetcher (token PUT, role name, then the role's credentials)."""
    fetcher = InstanceMetadataFetcher(base_url=url, timeout=CLIENT_TIMEOUT)
    result: dict[str, Any] = fetcher.retrieve_iam_role_credentials()
    return result


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
