"""The traffic probe's vocabulary: what a call reports, and the AWS verdicts it asks for.

Role: :class:`TrafficReport` (which pods answered, every drop with its hop and reason),
:class:`PathVerdict` (node-to-node reachability), :class:`TrafficError` (a probe asked for
wrongly), and :class:`Gates`, the security-group and load-balancer-health verdicts the probe
does not compute itself (``lab.aws.gates.AwsGates`` answers them with :class:`Gate`).

Neighbours: every other module of ``lab.traffic`` builds on these; ``lab.compose`` wires the
gates; the CLIs and the catalog read the reports. Design: a leaf of the package, so the walk,
the load balancers and the cluster sides share it without importing each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_CLIENT = "198.51.100.7"
"""The modelled internet client (RFC 5737 documentation range; nothing is ever sent)."""

MAX_REQUESTS = 100_000


class TrafficError(ValueError):
    """A probe the user asked for wrongly (no such Service, not a LoadBalancer, bad source)."""


@dataclass(frozen=True)
class Gate:
    """A security-group verdict: allowed, and why (the rule that allowed it, or the groups
    that were evaluated and found no rule)."""

    allowed: bool
    reason: str


class Gates(Protocol):
    """The AWS verdicts the probe needs and does not compute itself."""

    def ingress(
        self,
        *,
        dest_groups: Sequence[str],
        protocol: str,
        port: int,
        source_groups: Sequence[str] = (),
        source_ip: str | None = None,
    ) -> Gate: ...

    def in_service(self, load_balancer: str, instance_id: str) -> tuple[bool, str]:
        """Whether the load balancer sends to the instance now, and the reason when not."""
        ...

    def target_health(self, target_group_arn: str, instance_id: str) -> tuple[str, str]:
        """An NLB target's state (``healthy``, ``unhealthy``...) and why."""
        ...


@dataclass
class TrafficReport:
    """Which pods answered how many requests, and every drop with its hop and reason."""

    service: str
    requests: int
    seed: int
    source: str
    load_balancer: str | None = None
    answered: Counter[str] = field(default_factory=Counter)
    dropped: Counter[tuple[str, str]] = field(default_factory=Counter)
    instances: Counter[str] = field(default_factory=Counter)
    """Requests per instance the load balancer picked."""

    def drop(self, hop: str, reason: str, count: int = 1) -> None:
        self.dropped[(hop, reason)] += count

    @property
    def answered_total(self) -> int:
        return sum(self.answered.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "requests": self.requests,
            "seed": self.seed,
            "source": self.source,
            "load_balancer": self.load_balancer,
            "answered": dict(sorted(self.answered.items())),
            "dropped": [
                {"hop": hop, "reason": reason, "count": count}
                for (hop, reason), count in sorted(self.dropped.items(), key=lambda kv: -kv[1])
            ],
            "instances": dict(sorted(self.instances.items())),
        }


@dataclass(frozen=True)
class PathVerdict:
    """Node-to-node reachability on one port (``between``)."""

    source: str
    dest: str
    protocol: str
    port: int
    allowed: bool
    reason: str
