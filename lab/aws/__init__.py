"""The lab's AWS endpoint: moto server + fidelity layer + call trail + fault injection.

Public API (see ``lab/aws/README.md`` for the control plane)::

    from lab.aws import AwsServer
    with AwsServer(region="us-east-1", seed=None, fidelity=True) as aws:
        aws.client("ec2"); aws.control.reset(); aws.trail.calls(action="DeleteSecurityGroup")

Modules, named as in every emulator of the lab: ``server`` (in-process component), ``process``
(child-process component), ``control`` (the ``/_lab/`` routes), ``control_client`` (their typed
client), ``exceptions``; and ``app`` (WSGI composition), ``protocol`` (query protocol and error
wire shapes), ``fidelity`` and ``lifecycle`` (AWS behaviours moto lacks), ``faults``, ``trail``
and ``render`` (the call trail); along a call's way ``pipeline`` (the stages the endpoint and
the proxy share) and ``motostages``; the data plane: ``sgeval`` (security-group evaluation),
``health`` (Classic ELB and NLB health checks, draining, the prober seam, what a load balancer
is configured to do, the security-group view) and ``gates`` (the traffic probe's AWS verdicts).
"""

from __future__ import annotations

from lab.aws.clients import make_client
from lab.aws.control_client import AwsControlClient, Health
from lab.aws.exceptions import (
    AwsControlError,
    AwsControlUnavailable,
    AwsError,
    DependencyViolation,
)
from lab.aws.faults import AwsFaultRule
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.process import AwsProcess
from lab.aws.server import AwsServer
from lab.aws.trail import Trail, TrailEvent, load_jsonl

__all__ = [
    "AwsControlClient",
    "AwsControlError",
    "AwsControlUnavailable",
    "AwsError",
    "AwsFaultRule",
    "AwsProcess",
    "AwsServer",
    "DependencyViolation",
    "FidelityConfig",
    "Health",
    "Trail",
    "TrailEvent",
    "load_jsonl",
    "make_client",
]
