"""Fixtures for the AWS endpoint tests: one endpoint per session, reset before each test.

moto's backends are process-global, so every test that uses ``aws`` starts from an empty AWS
(and an empty trail, no faults, default fidelity switches) no matter what ran before.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.aws import AwsEndpoint


@pytest.fixture(scope="session")
def aws_endpoint() -> Iterator[AwsEndpoint]:
    with AwsEndpoint(region="us-east-1") as endpoint:
        yield endpoint


@pytest.fixture
def aws(aws_endpoint: AwsEndpoint) -> Iterator[AwsEndpoint]:
    aws_endpoint.reset()
    yield aws_endpoint
    errors = list(aws_endpoint.lab.internal_errors)
    assert not errors, f"the endpoint raised internally during the test: {errors}"
