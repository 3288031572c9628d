"""Instance metadata service (IMDS) for the lab, backed by the EC2 state of the AWS endpoint.

Each node's metadata matches its EC2 instance (read live through boto3); IMDSv1 and IMDSv2 with
their edge cases (TTL bounds, expiry, per-instance ``HttpTokens``, ``X-Forwarded-For`` refusal,
hop-limit emulation); spot interruptions and scheduled events injected through ``/_lab/``.

Layout: ``models`` (state, rules) / ``ec2`` (reader) / ``handlers`` (operations) / ``routes``
(WSGI, error serialization) / ``exceptions``; ``server`` (in-process component), ``process``
(child process for ``invoke lab.up``), ``control`` (typed control-plane client),
``__main__`` (CLI). Background: ``shared/docs/reference/peers.md`` §4.
"""

from __future__ import annotations

from lab.imds.control import EventSpec, ImdsControl, ImdsControlError
from lab.imds.exceptions import ImdsError, ImdsReadinessError
from lab.imds.handlers import HOPS_HEADER, INSTANCE_HEADER
from lab.imds.models import InstanceID, InstanceView
from lab.imds.process import ImdsProcess
from lab.imds.server import ImdsServer

__all__ = [
    "HOPS_HEADER",
    "INSTANCE_HEADER",
    "EventSpec",
    "ImdsControl",
    "ImdsControlError",
    "ImdsError",
    "ImdsProcess",
    "ImdsReadinessError",
    "ImdsServer",
    "InstanceID",
    "InstanceView",
]
