"""The AWS verdicts of the traffic probe: security groups, Classic ELB and NLB target health.

Role: ``lab.traffic`` walks a request hop by hop and asks two questions it does not answer
itself (its ``Gates`` protocol): may this connection pass these security groups, and does the
load balancer send to this instance now (a Classic ELB's ``InService``, an NLB target's
state). :class:`AwsGates` answers them from the endpoint's state:
:class:`lab.aws.health.sgview.SecurityGroupView` (AWS semantics, :mod:`lab.aws.sgeval`),
:class:`lab.aws.health.classic.ElbHealth` and :class:`lab.aws.health.network.NlbHealth`
(the endpoint's health checks on the lab clock).

Design: ``lab.aws`` sits below ``lab.traffic`` in the lab's layers and may not import it, so
:class:`AwsGates` is generic in the verdict type: the composition passes ``lab.traffic.Gate``
as ``gate`` and gets an object that satisfies ``Gates`` structurally::

    gates = AwsGates(aws.lab, gate=Gate)
    aws.lab.elb_health.clock = lab.clock            # health thresholds on the lab's clock
    aws.lab.elb_health.set_node_answers(callback)   # the kube-proxy model answers checks
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from lab.aws.app import AwsLab

G = TypeVar("G")


class AwsGates(Generic[G]):
    """``ingress``, ``in_service`` and ``target_health`` answered by the endpoint (module doc)."""

    def __init__(self, aws: AwsLab, *, gate: Callable[[bool, str], G]) -> None:
        self.aws = aws
        self._gate = gate

    def ingress(
        self,
        *,
        dest_groups: Sequence[str],
        protocol: str,
        port: int,
        source_groups: Sequence[str] = (),
        source_ip: str | None = None,
    ) -> G:
        """Whether a new connection passes the inbound rules of ``dest_groups`` (the union of
        every group of the destination's interfaces), with the rule or the denial's reason.
        A bad protocol, port or address raises :class:`lab.aws.sgeval.SecurityGroupError`
        (a ``ValueError``) naming it."""
        verdict = self.aws.elb_health.groups.ingress(
            dest_groups=dest_groups,
            protocol=protocol,
            port=port,
            source_groups=source_groups,
            source_ip=source_ip,
        )
        return self._gate(verdict.allowed, verdict.reason)

    def in_service(self, load_balancer: str, instance_id: str) -> tuple[bool, str]:
        """Whether ``load_balancer`` sends new requests to ``instance_id`` now; when not, the
        reported state and the last health check's result (the root cause)."""
        return self.aws.elb_health.in_service(load_balancer, instance_id)

    def target_health(self, target_group_arn: str, instance_id: str) -> tuple[str, str]:
        """An NLB target's state now (``healthy``, ``unhealthy``, ``initial``, ``draining``,
        ``unused``...) and, when not healthy, its reason and the last health check's result."""
        found = self.aws.nlb_health.target_health(target_group_arn, instance_id)
        if found is None:
            return "unused", f"{instance_id} is not a registered target of {target_group_arn}"
        return found.state, found.explain()


__all__ = ["AwsGates"]
