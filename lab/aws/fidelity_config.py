"""The fidelity layer's switches: :class:`FidelityConfig`, one field per behaviour, checked.

Role: the set of switches an endpoint starts with and ``/_lab/fidelity`` changes (the fidelity
layer's own and the request-validation ``validate_*`` ones), each documented on its field,
with :meth:`FidelityConfig.updated` refusing unknown switches and bad values
(:class:`lab.aws.exceptions.AwsControlError`, the control plane's 400).

Neighbours: read by :mod:`lab.aws.fidelity` (the layer), :mod:`lab.aws.validation` (its
``validate_*`` switches), :mod:`lab.aws.app` / :mod:`lab.aws.server` (start-up settings) and
:mod:`lab.aws.control_client` (the typed client's answer).

Design: a plain frozen value apart from the layer, so the validator, the control client and
the settings can name the switches without importing the layer that applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from lab.aws.exceptions import AwsControlError

SgOrder = Literal["creation", "reversed", "shuffle"]
SG_ORDERS: tuple[str, ...] = ("creation", "reversed", "shuffle")
#: The request-validation switches (:mod:`lab.aws.validation`).
VALIDATION_SWITCHES: tuple[str, ...] = (
    "validation",
    "validate_action",
    "validate_signature",
    "validate_model",
    "validate_ip_permissions",
    "validate_cidr",
    "validate_group_names",
    "validate_elb_names",
    "validate_listener_ports",
    "validate_existence",
    "validate_filters",
    "validate_next_token",
)


@dataclass(frozen=True)
class FidelityConfig:
    """Switches of the fidelity layer (all on by default; ``enabled=False`` = stock moto)."""

    enabled: bool = True
    sg_rules_quota: int = 60
    """EC2's quota "Inbound or outbound rules per security group" for VPC groups: AWS's
    default 60, adjustable through Service Quotas up to 1,000 (the rules quota times the
    security groups per network interface may not pass 1,000); past it
    ``RulesPerSecurityGroupLimitExceeded``. A setting of the account, not a fix: it holds with
    ``enabled`` off too."""
    sg_dependency_violation: bool = True
    """``DeleteSecurityGroup`` → ``DependencyViolation`` / ``CannotDelete`` like EC2."""
    elb_sg_release_s: float = 0.0
    """Seconds a deleted load balancer's groups stay "in use" (ENI detach lag)."""
    elb_sg_order: SgOrder = "creation"
    elb_sg_order_seed: int | None = None
    instance_pending_s: float = 0.0
    instance_stopping_s: float = 0.0
    instance_shutting_down_s: float = 0.0
    terminated_visible_s: float | None = 3600.0
    """Seconds a terminated instance stays in ``DescribeInstances``; ``None`` = forever."""
    instance_describe_lag_s: float = 0.0
    """Seconds a new instance is missing from ``DescribeInstances``/``DescribeInstanceStatus``
    (EC2 eventual consistency, kubernetes#81636)."""
    instance_topology: bool = True
    """``DescribeInstanceTopology`` answered from moto's instances
    (:mod:`lab.aws.instance_topology`); ``False`` = moto's answer (500, not implemented)."""
    elb_fixes: bool = True
    """Classic ELB API fixes: default health check and attributes, register/deregister
    results, unknown instances refused (gaps 5-8)."""
    elbv2_fixes: bool = True
    """ELBv2 API fixes: no ``SslPolicy`` on TCP/UDP listeners, ``access_logs.s3.enabled``
    on new network load balancers, unknown instances refused by ``RegisterTargets`` (gap 13)."""
    elb_health_checks: bool = True
    """Classic ELB health checks and connection draining (:mod:`lab.aws.health.classic`):
    ``DescribeInstanceHealth`` answers from thresholds counted on the lab clock (gap 11);
    ``False`` = moto's answer (every running registered instance ``InService``)."""
    nlb_health_checks: bool = True
    """NLB target health (:mod:`lab.aws.health.network`): ``DescribeTargetHealth`` answers from
    health checks counted on the lab clock for instance target groups of network load
    balancers (gap 15); ``False`` = moto's answer (every registered running target
    ``healthy``)."""
    validation: bool = True
    """Request validation (:mod:`lab.aws.validation`): malformed EC2/ELB/ELBv2 calls answered
    with AWS's errors before moto sees them; ``False`` turns every ``validate_*`` rule off."""
    validate_action: bool = True
    """Unknown ``Action`` → ``InvalidAction`` (400)."""
    validate_signature: bool = True
    """Malformed SigV4 ``Authorization`` header or credential scope → ``IncompleteSignature``."""
    validate_model: bool = True
    """botocore's model: required members, types, enums, lengths, ranges, patterns."""
    validate_ip_permissions: bool = True
    """Security-group permissions: protocol, port range / ICMP type-code, a source each."""
    validate_cidr: bool = True
    """CIDR syntax of ``CidrIp`` / ``CidrIpv6`` in permissions."""
    validate_group_names: bool = True
    """``CreateSecurityGroup`` name/description: 255 chars, EC2's characters, no ``sg-``."""
    validate_elb_names: bool = True
    """New load balancer names: 32 chars, letters/digits/hyphens, no edge hyphen."""
    validate_listener_ports: bool = True
    """Classic ELB listener ports: 25, 80, 443, 465, 587, 1024-65535."""
    validate_existence: bool = True
    """The VPC, subnets and groups a create/attach/authorize call names must exist."""
    validate_filters: bool = True
    """EC2 ``Filter.N.Name`` must be documented for the action (or ``tag:<key>``)."""
    validate_next_token: bool = True
    """``NextToken`` / ``Marker`` must be a token the endpoint issued."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def updated(self, changes: Mapping[str, Any]) -> FidelityConfig:
        """A copy with ``changes`` applied; unknown fields and bad values raise clearly."""
        known = {f.name: f for f in fields(self)}
        for name, value in changes.items():
            if name not in known:
                raise AwsControlError(f"fidelity: unknown switch {name!r}; known: {sorted(known)}")
            _validate(name, value)
        return replace(self, **dict(changes))


#: the largest rules-per-security-group quota AWS grants
MAX_SG_RULES = 1000
#: the longest time a switch may set (30 days): a lab run is hours; a larger number is a
#: mistake, and 1e308 would overflow the clock arithmetic (to infinity) it feeds
MAX_SECONDS = 30 * 86_400


def _validate(name: str, value: Any) -> None:
    bools = {
        "enabled",
        "sg_dependency_violation",
        "elb_fixes",
        "elbv2_fixes",
        "elb_health_checks",
        "nlb_health_checks",
        "instance_topology",
    }
    bools |= set(VALIDATION_SWITCHES)
    seconds = {
        "elb_sg_release_s",
        "instance_pending_s",
        "instance_stopping_s",
        "instance_shutting_down_s",
        "instance_describe_lag_s",
    }
    if name in bools and not isinstance(value, bool):
        raise AwsControlError(f"fidelity: {name!r} must be true or false, got {value!r}")
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    in_range = is_number and 0 <= value <= MAX_SECONDS  # NaN and infinities fail too
    if name in seconds and not in_range:
        raise AwsControlError(
            f"fidelity: {name!r} must be a number of seconds in 0..{MAX_SECONDS}, got {value!r}"
        )
    if name == "terminated_visible_s" and value is not None and not in_range:
        raise AwsControlError(
            f"fidelity: {name!r} must be a number of seconds in 0..{MAX_SECONDS} or null, "
            f"got {value!r}"
        )
    if name == "sg_rules_quota" and (
        not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SG_RULES
    ):
        raise AwsControlError(
            f"fidelity: 'sg_rules_quota' must be an integer in 1..{MAX_SG_RULES} (AWS's default "
            f"is 60, its largest 1,000), got {value!r}"
        )
    if name == "elb_sg_order" and value not in SG_ORDERS:
        raise AwsControlError(f"fidelity: 'elb_sg_order' must be one of {SG_ORDERS}, got {value!r}")
    if (
        name == "elb_sg_order_seed"
        and value is not None
        and (not isinstance(value, int) or isinstance(value, bool))
    ):
        raise AwsControlError(f"fidelity: 'elb_sg_order_seed' must be an integer, got {value!r}")
