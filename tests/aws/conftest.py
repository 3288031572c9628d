"""Fixtures for the AWS endpoint tests: one endpoint per session, reset before each test;
a stock moto per module and a recording proxy in front of it per test (``moto_url``, ``proxy``).

moto's backends are process-global, so every test that uses ``aws`` starts from an empty AWS
(and an empty trail, no faults, default fidelity switches) no matter what ran before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.aws import AwsServer
from lab.aws.proxy import AwsProxyServer
from tests.aws.upstreams import stock_moto


@pytest.fixture(scope="session")
def aws_endpoint() -> Iterator[AwsServer]:
    with AwsServer(region="us-east-1") as endpoint:
        yield endpoint


@pytest.fixture
def aws(aws_endpoint: AwsServer) -> Iterator[AwsServer]:
    aws_endpoint.reset()
    yield aws_endpoint
    errors = aws_endpoint.take_internal_errors()
    assert not errors, f"the endpoint raised internally during the test: {errors}"


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_clock(aws: AwsServer) -> Iterator[FakeClock]:
    """Run the endpoint's time-based fidelity behaviour on fake time for one test."""
    clock = FakeClock()
    real = aws.lab.fidelity.clock
    aws.lab.fidelity.clock = clock
    try:
        yield clock
    finally:
        aws.lab.fidelity.clock = real


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """moto's own server (standing in for LocalStack or real AWS behind the proxy)."""
    with stock_moto() as url:
        yield url


@pytest.fixture
def proxy(moto_url: str) -> Iterator[AwsProxyServer]:
    """A recording proxy in front of ``moto_url``, re-signing with moto's dummy key, with the
    lab token ``t0k``; the test must leave no internal error behind."""
    with AwsProxyServer(moto_url, credentials=("testing", "testing"), token="t0k") as server:
        yield server
        assert not server.take_internal_errors()
