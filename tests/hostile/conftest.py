"""Fixtures for the hostile-input tests: the AWS endpoint fixtures of ``tests/aws``."""

from __future__ import annotations

from tests.aws.conftest import aws, aws_endpoint

__all__ = ["aws", "aws_endpoint"]
