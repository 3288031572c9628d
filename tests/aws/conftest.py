"""Fixtures for the AWS endpoint tests: one endpoint per session, reset before each test.

moto's backends are process-global, so every test that uses ``aws`` starts from an empty AWS
(and an empty trail, no faults, default fidelity switches) no matter what ran before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.aws import AwsServer


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
