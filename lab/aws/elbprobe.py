"""The prober seam of Classic ELB health checks: what one health check of one instance answers.

Role: :mod:`lab.aws.elbhealth` counts health checks against a load balancer's thresholds; *how*
a single check turns out is asked of a :class:`Prober`. The lab's default,
:class:`SecurityGroupProber`, answers from state, the way the check travels on AWS:

1. the instance must be ``running`` (anything else answers nothing: the check times out);
2. the check leaves the load balancer's interfaces, so the load balancer's security groups'
   outbound rules and the instance's groups' inbound rules must allow
   ``tcp/<target port>`` from the load balancer's groups / node address
   (:class:`lab.aws.sgview.SecurityGroupView`); a dropped check times out;
3. then something on the instance must answer: an injected :data:`NodeAnswers` callback. The
   sim backend wires it to its kube-proxy model (which endpoint the nodePort reaches, or the
   ``healthCheckNodePort`` status); the default says a running instance answers.

``lab/aws`` knows nothing of Kubernetes: the callback is the only way cluster knowledge gets in.
A kind backend supplies a prober that makes real TCP/HTTP requests to node containers instead.

Neighbours: :mod:`lab.aws.elbview` (:class:`ClassicInstance`), :mod:`lab.aws.sgview`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from lab.aws.elbview import ClassicInstance
from lab.aws.sgview import SecurityGroupView

_TARGET = re.compile(r"^(?P<proto>TCP|SSL|HTTP|HTTPS):(?P<port>[0-9]{1,5})(?P<path>/.*)?$")


@dataclass(frozen=True)
class HealthTarget:
    """A Classic ELB health-check ``Target``: ``TCP:30080``, ``HTTP:30080/healthz``..."""

    protocol: str
    port: int
    path: str = ""

    @classmethod
    def parse(cls, text: str) -> HealthTarget:
        """Parse a target; ``ValueError`` names the value when AWS would refuse it (HTTP and
        HTTPS need a path, TCP and SSL take none, port 1-65535)."""
        match = _TARGET.match(str(text).strip())
        if match is None:
            raise ValueError(
                f"HealthCheck.Target={text!r}: expected TCP:PORT, SSL:PORT, HTTP:PORT/PATH or "
                "HTTPS:PORT/PATH"
            )
        proto, port, path = match["proto"], int(match["port"]), match["path"] or ""
        if not 1 <= port <= 65535:
            raise ValueError(f"HealthCheck.Target={text!r}: port must be 1-65535")
        if proto in ("HTTP", "HTTPS") and not path:
            raise ValueError(f"HealthCheck.Target={text!r}: {proto} needs a path (e.g. /healthz)")
        if proto in ("TCP", "SSL") and path:
            raise ValueError(f"HealthCheck.Target={text!r}: {proto} takes no path")
        return cls(proto, port, path)

    def __str__(self) -> str:
        return f"{self.protocol}:{self.port}{self.path}"


@dataclass(frozen=True)
class ProbeTarget:
    """One health check as the load balancer sends it."""

    load_balancer: str
    target: HealthTarget
    timeout: float
    """Seconds the load balancer waits for an answer (HealthCheck.Timeout)."""
    source_groups: tuple[str, ...] = ()
    """The load balancer's security groups: health checks leave from its interfaces."""
    source_ip: str | None = None
    """A modelled address of a load-balancer node (in its first subnet), for CIDR rules."""


@dataclass(frozen=True)
class ProbeResult:
    """How one health check turned out: passed or not, and what happened."""

    ok: bool
    reason: str
    timed_out: bool = False
    """No answer within Timeout (dropped by a security group, instance not running...)."""


class Prober(Protocol):
    """Runs one health check of ``instance``."""

    def probe(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult: ...


NodeAnswers = Callable[[ClassicInstance, ProbeTarget], ProbeResult]
"""What answers on the instance once a health check got through (the sim's kube-proxy model)."""


def running_answers(instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
    """The default node: a running instance answers every check (no cluster model attached)."""
    if instance.state == "running":
        return ProbeResult(True, f"{target.target} answered (instance running; no node model)")
    return ProbeResult(False, f"instance is {instance.state}: no answer", timed_out=True)


class SecurityGroupProber:
    """The default prober: instance state, security groups, then :data:`NodeAnswers`."""

    def __init__(self, groups: SecurityGroupView, node_answers: NodeAnswers = running_answers):
        self.groups = groups
        self.node_answers = node_answers

    def probe(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        if instance.state != "running":
            return ProbeResult(
                False,
                f"{target.target} timed out after {target.timeout:g}s: instance is "
                f"{instance.state}",
                timed_out=True,
            )
        verdict = self.groups.connect(
            dest_groups=instance.groups,
            protocol="tcp",
            port=target.target.port,
            source_groups=target.source_groups,
            source_ip=target.source_ip,
            dest_ip=instance.private_ip or None,
        )
        if not verdict.allowed:
            return ProbeResult(
                False,
                f"{target.target} timed out after {target.timeout:g}s: the security groups drop "
                f"the health check from load balancer {target.load_balancer}: {verdict.reason}",
                timed_out=True,
            )
        return self.node_answers(instance, target)


__all__ = [
    "HealthTarget",
    "NodeAnswers",
    "ProbeResult",
    "ProbeTarget",
    "Prober",
    "SecurityGroupProber",
    "running_answers",
]
