"""The lab's AWS endpoint: moto server + fidelity layer + call trail + fault injection.

Public API (see ``lab/aws/README.md`` for the control plane)::

    from lab.aws import AwsEndpoint
    with AwsEndpoint(region="us-east-1", seed=None, fidelity=True) as aws:
        aws.client("ec2"); aws.control.reset(); aws.trail.calls(action="DeleteSecurityGroup")

Modules: ``endpoint`` (in-process component), ``process`` (child-process component), ``app``
(WSGI composition), ``protocol`` (query protocol and error wire shapes), ``fidelity`` and
``lifecycle`` (AWS behaviours moto lacks), ``faults``, ``trail`` and ``render`` (the call trail),
``control`` and ``client`` (the ``/_lab/`` control plane), ``exceptions``.
"""

from __future__ import annotations

from lab.aws.client import AwsControlClient, AwsControlUnavailable, Health
from lab.aws.endpoint import AwsEndpoint, EndpointNotReady, make_client
from lab.aws.exceptions import AwsError, DependencyViolation, LabControlError
from lab.aws.faults import FaultRule
from lab.aws.fidelity import FidelityConfig
from lab.aws.process import AwsProcess, stop_pid
from lab.aws.trail import Trail, TrailEvent, load_jsonl

__all__ = [
    "AwsControlClient",
    "AwsControlUnavailable",
    "AwsEndpoint",
    "AwsError",
    "AwsProcess",
    "DependencyViolation",
    "EndpointNotReady",
    "FaultRule",
    "FidelityConfig",
    "Health",
    "LabControlError",
    "Trail",
    "TrailEvent",
    "load_jsonl",
    "make_client",
    "stop_pid",
]
