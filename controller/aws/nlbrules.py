"""Node security-group rules for NLBs, recognised by their descriptions. Pure.

Neighbours: :mod:`controller.aws.nlb` describes the node groups and sends what
:func:`plan_group` returns to ``RevokeSecurityGroupIngress`` / ``AuthorizeSecurityGroupIngress``.

Design (upstream v1.33.0 ``updateInstanceSecurityGroupsForNLB`` and its two helpers): an NLB
has no security group of its own, so the node groups admit the clients directly. Every rule
the controller adds carries a description naming its purpose and, for client and health-check
rules, the load balancer: ``kubernetes.io/rule/nlb/client=<lb>``,
``kubernetes.io/rule/nlb/health=<lb>`` and ``kubernetes.io/rule/nlb/mtu`` (ICMP 3/4 from every
client CIDR of any NLB). A rule is only ever revoked when its description is exactly one of
ours, so a user's rule, even one with the same port and CIDR and another description, is never
touched (kubernetes#64148 / #98278 revoked user rules). A changed port or CIDR set revokes the
old rules by description (kubernetes#70421); deletion revokes all of them (kubernetes#57568).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CLIENT_DESC = "kubernetes.io/rule/nlb/client"
HEALTH_DESC = "kubernetes.io/rule/nlb/health"
MTU_DESC = "kubernetes.io/rule/nlb/mtu"
TRAFFIC_PORT = "traffic-port"


@dataclass(frozen=True, order=True)
class DescribedRule:
    """One ingress rule from one CIDR, with its description (``cidr`` v4 or v6)."""

    protocol: str
    from_port: int
    to_port: int
    cidr: str
    description: str

    def to_permission(self) -> dict[str, Any]:
        rng_key, list_key = (
            ("CidrIpv6", "Ipv6Ranges") if ":" in self.cidr else ("CidrIp", "IpRanges")
        )
        return {
            "IpProtocol": self.protocol,
            "FromPort": self.from_port,
            "ToPort": self.to_port,
            list_key: [{rng_key: self.cidr, "Description": self.description}],
        }


def ungroup(permissions: Iterable[Mapping[str, Any]]) -> set[DescribedRule]:
    """The CIDR rules of EC2 ``IpPermissions`` (groups and prefix lists are never ours)."""
    out: set[DescribedRule] = set()
    for perm in permissions:
        proto = str(perm.get("IpProtocol", "-1")).lower()
        lo = int(perm.get("FromPort", -1) if perm.get("FromPort") is not None else -1)
        hi = int(perm.get("ToPort", -1) if perm.get("ToPort") is not None else -1)
        for r in perm.get("IpRanges") or ():
            out.add(DescribedRule(proto, lo, hi, str(r["CidrIp"]), str(r.get("Description", ""))))
        for r in perm.get("Ipv6Ranges") or ():
            out.add(DescribedRule(proto, lo, hi, str(r["CidrIpv6"]), str(r.get("Description", ""))))
    return out


@dataclass
class GroupPlan:
    revoke: list[DescribedRule]
    grant: list[DescribedRule]

    @property
    def empty(self) -> bool:
        return not self.revoke and not self.grant


def _sync(
    have: set[DescribedRule],
    plan: GroupPlan,
    description: str,
    protocol: str,
    ports: Iterable[int],
    cidrs: Sequence[str],
) -> None:
    """Upstream ``updateInstanceSecurityGroupForNLBTraffic``: the rules described
    ``description`` become exactly ``protocol`` on ``ports`` from ``cidrs``; ``have`` is
    updated as AWS will be."""
    desired = {DescribedRule(protocol, p, p, c, description) for p in ports for c in cidrs}
    revoke = sorted(r for r in have - desired if r.description == description)
    grant = sorted(desired - have)
    have.difference_update(revoke)
    have.update(grant)
    plan.revoke += revoke
    plan.grant += grant


def _sync_mtu(have: set[DescribedRule], plan: GroupPlan) -> None:
    """Upstream ``updateInstanceSecurityGroupForNLBMTU``: ICMP type 3 code 4 from every CIDR
    that a client rule (of any NLB) admits."""
    desired = {
        DescribedRule("icmp", 3, 4, r.cidr, MTU_DESC)
        for r in have
        if CLIENT_DESC in r.description and ":" not in r.cidr
    }
    revoke = sorted(r for r in have - desired if r.description == MTU_DESC)
    grant = sorted(desired - have)
    have.difference_update(revoke)
    have.update(grant)
    plan.revoke += revoke
    plan.grant += grant


def health_ports(traffic_ports: Iterable[int], health_port: str) -> set[int]:
    """The ports the health checks reach: the traffic ports, or the one configured port."""
    if health_port == TRAFFIC_PORT:
        return set(traffic_ports)
    return {int(health_port)}


def plan_group(
    permissions: Iterable[Mapping[str, Any]],
    *,
    lb_name: str,
    serves_targets: bool,
    client_protocol: str,
    client_ports: set[int],
    client_cidrs: Sequence[str],
    check_ports: set[int],
    subnet_cidrs: Sequence[str],
) -> GroupPlan:
    """What to revoke and grant on one node group for load balancer ``lb_name``.

    ``serves_targets``: the group belongs to a registered instance (else our rules for this
    load balancer are all revoked). Health-check rules from the load balancer's subnets are
    left out when the client rule already admits them (0.0.0.0/0, TCP, same ports).
    """
    have = ungroup(permissions)
    before = set(have)
    plan = GroupPlan([], [])
    client = f"{CLIENT_DESC}={lb_name}"
    health = f"{HEALTH_DESC}={lb_name}"
    if serves_targets:
        covered = (
            list(client_cidrs) == ["0.0.0.0/0"]
            and client_protocol == "tcp"
            and check_ports == client_ports
        )
        # FIXED (beyond upstream, which skips the health rules when covered and so keeps
        # stale ones from an earlier source-range set): covered means "none".
        _sync(have, plan, health, "tcp", () if covered else check_ports, subnet_cidrs)
        _sync(have, plan, client, client_protocol, client_ports, client_cidrs)
    else:
        _sync(have, plan, health, "tcp", (), ())
        _sync(have, plan, client, client_protocol, (), ())
    if have != before:
        _sync_mtu(have, plan)
    return plan


def to_permissions(rules: Iterable[DescribedRule]) -> list[dict[str, Any]]:
    """Rules to EC2 ``IpPermissions``, one permission per (protocol, ports), sorted."""
    grouped: dict[tuple[str, int, int], dict[str, Any]] = {}
    for rule in sorted(rules):
        single = rule.to_permission()
        key = (rule.protocol, rule.from_port, rule.to_port)
        perm = grouped.get(key)
        if perm is None:
            grouped[key] = single
            continue
        for field in ("IpRanges", "Ipv6Ranges"):
            if field in single:
                perm.setdefault(field, []).extend(single[field])
    return list(grouped.values())
