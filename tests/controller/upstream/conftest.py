"""The lab's AWS endpoint for the upstream tables that need EC2 (the AWS tests' fixtures)."""

from tests.controller.aws.conftest import _quiet_sdk_logs, aws, aws_endpoint, make_cloud, topo

__all__ = ["_quiet_sdk_logs", "aws", "aws_endpoint", "make_cloud", "topo"]
