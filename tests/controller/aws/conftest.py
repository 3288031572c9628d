"""Fixtures for the AWS controller tests: the lab's AWS endpoint (moto + fidelity + trail),
reset per test, a seeded topology and a cloud built by ``new_cloud`` against it.

The cloud reaches the endpoint only through ``[ServiceOverride]`` sections of its cloud config,
the way a user would point it at any AWS-compatible endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest

from controller.aws import AWSCloud, load_cloud_config, new_cloud
from controller.legacy import LegacyFlags
from lab.aws import AwsServer
from tests.controller.aws.topology import CLUSTER, Topology, seed

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def _quiet_sdk_logs() -> Iterator[None]:
    """botocore's DEBUG records (every header, every body) dominate test time when pytest
    captures logs; the controller's own loggers stay at their levels."""
    names = ("botocore", "boto3", "urllib3", "moto", "werkzeug")
    saved = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.WARNING)
    yield
    for n, level in saved.items():
        logging.getLogger(n).setLevel(level)


@pytest.fixture(scope="session")
def aws_endpoint() -> Iterator[AwsServer]:
    with AwsServer(region=REGION) as endpoint:
        yield endpoint


@pytest.fixture
def aws(aws_endpoint: AwsServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsServer]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    aws_endpoint.reset()
    yield aws_endpoint
    errors = aws_endpoint.take_internal_errors()
    assert not errors, f"the endpoint raised internally during the test: {errors}"


@pytest.fixture
def topo(aws: AwsServer) -> Topology:
    topology = seed(aws.client("ec2"), region=REGION)
    aws.control.clear_trail()
    return topology


def cloud_config_text(url: str, topo: Topology, extra: str = "") -> str:
    overrides = "".join(
        f'[ServiceOverride "{i}"]\nService = {svc}\nRegion = {REGION}\nURL = {url}\n'
        f"SigningRegion = {REGION}\n"
        for i, svc in enumerate(("ec2", "elasticloadbalancing"))
    )
    return (
        f"[Global]\nRegion = {REGION}\nVPC = {topo.vpc}\nSubnetID = {topo.public_subnets[0]}\n"
        f"KubernetesClusterID = {CLUSTER}\n{extra}\n{overrides}"
    )


MakeCloud = Callable[..., AWSCloud]


@pytest.fixture
def make_cloud(aws: AwsServer, topo: Topology) -> MakeCloud:
    def make(*legacy: str, extra: str = "", sg_delete_timeout: float = 0.6) -> AWSCloud:
        cfg, warnings = load_cloud_config(cloud_config_text(aws.url, topo, extra))
        assert warnings == []
        return new_cloud(
            cfg,
            legacy=LegacyFlags(frozenset(legacy)),
            sg_delete_interval=0.05,
            sg_delete_timeout=sg_delete_timeout,
        )

    return make
