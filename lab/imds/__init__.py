"""Instance metadata service (IMDS) for the lab, backed by the EC2 state of the AWS endpoint.

Each node's metadata matches its EC2 instance (read live through boto3); IMDSv1 and IMDSv2 with
their edge cases (TTL bounds, expiry, per-instance ``HttpTokens``, ``X-Forwarded-For`` refusal,
hop-limit emulation); spot interruptions and scheduled events injected through ``/_lab/``.

Layout: ``models`` (state, rules) / ``ec2`` (reader) / ``handlers`` (operations) / ``routes``
(WSGI, error serialization) / ``exceptions``; and, named as in every emulator of the lab,
``server`` (in-process component), ``process`` (child process), ``control`` (the ``/_lab/``
routes), ``control_client`` (their typed client), ``__main__`` (CLI). Background:
``shared/docs/reference/peers.md`` §4.
"""

from __future__ import annotations

from lab.imds.control_client import EventSpec, ImdsControlClient
from lab.imds.exceptions import ImdsControlError, ImdsError
from lab.imds.handlers import HOPS_HEADER, INSTANCE_HEADER
from lab.imds.models import InstanceID, InstanceView
from lab.imds.process import ImdsProcess
from lab.imds.server import ImdsServer

__all__ = [
    "HOPS_HEADER",
    "INSTANCE_HEADER",
    "EventSpec",
    "ImdsControlClient",
    "ImdsControlError",
    "ImdsError",
    "ImdsProcess",
    "ImdsServer",
    "InstanceID",
    "InstanceView",
]
