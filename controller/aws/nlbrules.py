"""Node security-group rules for NLBs, recognised by their descriptions. Pure.

Neighbours: :mod:`controller.aws.nlb` describes the node groups and sends what
:func:`plan_group` returns to ``RevokeSecurityGroupIngress`` / ``AuthorizeSecurityGroupIngress``.

Design (upstream v1.33.0 ``updateInstanceSecurityGroupsForNLB`` and its two helpers): an NLB
has no security group of its own, so the node groups admit the clients directly. Every rule
the controller adds carries a description naming its purpose and, for client and health-check
rules, the load balancer: ``kubernetes.io/rule/nlb/client=<lb>``,
``kubernetes.io/rule/nlb/health=<lb>`` and ``kubernetes.io/rule/nlb/mtu`` (ICMP 3/4 from every
client CIDR of any NLB). A rule is only ever revoked when its description is exactly one of
ours, and only that CIDR rule: the group pairs and prefix lists EC2 lists in the same
permission are never sent (upstream, to v1.33.0, revokes them with it: kubernetes#98278). A
changed port or CIDR set revokes the old rules by description (kubernetes#70421); deletion
revokes all of them (kubernetes#57568).

The legacy twins at the end (``legacy_*``) plan as old or current upstream does, for the
``k8s-70421`` and ``k8s-98278`` switches of :mod:`controller.legacy`.
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


# -- legacy twins (controller/legacy.py) -------------------------------------------------------


def listings(permissions: Iterable[Mapping[str, Any]], lb_name: str) -> int:
    """How many times old upstream's ``filterForIPRangeDescription`` listed a group: once per
    IPv4 range described as this load balancer's client or health rule (v1.9-v1.12
    ``aws_loadbalancer.go``; in cloud-provider-aws' history at 378a746d, 2018-02-25, and in
    the in-tree copy of 2018-09-24, 87ce39a8)."""
    ours = {f"{CLIENT_DESC}={lb_name}", f"{HEALTH_DESC}={lb_name}"}
    return sum(
        1
        for perm in permissions
        for r in perm.get("IpRanges") or ()
        if str(r.get("Description", "")) in ours
    )


def legacy_port_changes(existing: set[int], wanted: set[int], listed: int) -> dict[int, bool]:
    """LEGACY (``k8s-70421``): old upstream's ``updateInstanceSecurityGroupsForNLBTraffic``
    port plan for one node group: ``{port: True}`` to add, ``{port: False}`` to revoke.

    It starts with every wanted port to add, then visits the group once per listing
    (:func:`listings`), each time taking its "desired" ports from the plan's keys, removals
    included: the first visit plans the changes, the second undoes them. With the client and
    the health rule of one port listed (two listings), a changed port's old rule is never
    revoked (kubernetes#70421) and on a sync with nothing changed the rules in place are
    revoked (kubernetes#60825, #64148: "all rules ... are removed" on a node change), to be
    added again by the sync after. Fixed by kubernetes PR #68422 (desired set from the wanted
    ports only), then replaced by PR #74692's rule sets (:func:`plan_group`).
    """
    changes = dict.fromkeys(wanted, True)
    for _ in range(listed):
        desired = set(changes)
        for port in desired & existing:
            del changes[port]
        for port in existing - desired:
            changes[port] = False
    return changes


def legacy_plan_group_70421(
    permissions: Iterable[Mapping[str, Any]],
    *,
    lb_name: str,
    serves_targets: bool,
    client_protocol: str,
    client_ports: set[int],
    client_cidrs: Sequence[str],
    check_ports: set[int],
    vpc_cidr: str,
) -> GroupPlan:
    """LEGACY (``k8s-70421``): :func:`plan_group` as upstream v1.9-v1.12 planned it.

    A group hosting no target is left alone (only groups with a target were planned); health
    rules always come from the VPC's CIDR and are never left out; each port's rule is added or
    revoked for the current CIDRs as :func:`legacy_port_changes` says (a revoke only of what
    the group has). MTU rules follow the changed rules as in :func:`plan_group`.
    """
    plan = GroupPlan([], [])
    if not serves_targets:
        return plan
    perms = list(permissions)
    have = ungroup(perms)
    before = set(have)
    listed = listings(perms, lb_name)
    passes = (
        (f"{CLIENT_DESC}={lb_name}", client_protocol, client_ports, list(client_cidrs)),
        (f"{HEALTH_DESC}={lb_name}", "tcp", check_ports, [vpc_cidr]),
    )
    for description, protocol, ports, cidrs in passes:
        existing = {r.from_port for r in before if r.description == description}
        changes = legacy_port_changes(existing, ports, listed)
        for port, add in sorted(changes.items()):
            rules = {DescribedRule(protocol, port, port, c, description) for c in cidrs}
            if add:
                grant = sorted(rules - have)
                have.update(grant)
                plan.grant += grant
            else:
                revoke = sorted(rules & have)
                have.difference_update(revoke)
                plan.revoke += revoke
    if have != before:
        _sync_mtu(have, plan)
    return plan


def legacy_ungroup(permissions: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Upstream's ``IPPermissionSet.Ungroup`` (v1.33.0 ``sets_ippermissions.go``; PR #74692
    on, its copy-paste slip in the group-pair step fixed by cloud-provider-aws 315d55a9): a
    permission with more than one IPv4 range is split into one per range, then each piece with
    more than one group pair into one per pair, then by prefix list; every other member
    (IPv6 ranges included) is copied into each piece. A piece keeps its range *and* a group
    pair of the same protocol and ports, which is what :func:`legacy_bundles_98278` revokes."""
    out = [dict(p) for p in permissions]
    for key in ("IpRanges", "UserIdGroupPairs", "PrefixListIds"):
        split: list[dict[str, Any]] = []
        for perm in out:
            items = list(perm.get(key) or ())
            if len(items) <= 1:
                split.append(perm)
                continue
            split.extend({**perm, key: [item]} for item in items)
        out = split
    unique: dict[str, dict[str, Any]] = {}
    for perm in out:
        unique.setdefault(repr(sorted(perm.items())), perm)
    return list(unique.values())


def _described(perm: Mapping[str, Any], description: str) -> bool:
    """Upstream's ``IPPermissionMatchDesc``: any source of ``perm`` carries ``description``."""
    return any(
        str(item.get("Description", "")) == description
        for key in ("IpRanges", "Ipv6Ranges", "PrefixListIds", "UserIdGroupPairs")
        for item in perm.get(key) or ()
    )


def legacy_bundles_98278(
    permissions: Iterable[Mapping[str, Any]], plan: GroupPlan, *, lb_name: str
) -> tuple[list[dict[str, Any]], list[DescribedRule]]:
    """LEGACY (``k8s-98278``): the permissions upstream revokes for ``plan`` and the rules it
    then grants again.

    Upstream (PR #74692 to v1.33.0: ``updateInstanceSecurityGroupForNLBTraffic`` in
    ``aws_loadbalancer.go``) revokes every piece of :func:`legacy_ungroup` that carries this
    load balancer's client or health description and is not exactly a wanted rule (one IPv4
    range, nothing else), whole: the groups, prefix lists and IPv6 ranges EC2 lists beside our
    range on the same protocol and ports go with it, and a wanted rule that shared its
    permission is granted again. With a user's all-traffic rule described as ours (the
    kubernetes#98278 report) the node group's all-traffic self rule is revoked with it. MTU
    rules are left to ``plan`` (upstream handles them alike; not reproduced here).
    """
    ours = (f"{CLIENT_DESC}={lb_name}", f"{HEALTH_DESC}={lb_name}")
    revoking = set(plan.revoke)
    bundles: list[dict[str, Any]] = []
    again: list[DescribedRule] = []
    for piece in legacy_ungroup(permissions):
        if not any(_described(piece, d) for d in ours):
            continue
        rules = ungroup([piece])
        alone = not any(piece.get(k) for k in ("UserIdGroupPairs", "PrefixListIds", "Ipv6Ranges"))
        if alone and not rules & revoking:
            continue  # exactly a wanted rule: kept
        bundles.append({k: v for k, v in piece.items() if v not in ([], None)})
        again += sorted(r for r in rules - revoking if r.description in ours)
    return bundles, again
