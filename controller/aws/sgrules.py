"""Security-group rules as sets: ungroup EC2 ``IpPermissions``, diff, regroup. Pure.

Neighbours: :mod:`controller.aws.securitygroups` feeds it what ``DescribeSecurityGroups``
returned and sends the regrouped difference to ``AuthorizeSecurityGroupIngress`` /
``RevokeSecurityGroupIngress``.

Design: an EC2 permission bundles a protocol and port range with several sources (CIDRs,
groups, prefix lists), and AWS is free to bundle them differently from how they were
authorised. Upstream ungroups both sides into one-source permissions before diffing
(``sets_ippermissions.go``); we do the same with hashable :class:`Rule` values so the diff is a
set difference and the property tests can state it exactly: ``actual - revoke + authorize ==
desired``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_PROTO_NAMES = {"6": "tcp", "17": "udp", "1": "icmp", "58": "icmpv6", "all": "-1"}


def normalize_protocol(proto: str) -> str:
    p = str(proto).strip().lower()
    return _PROTO_NAMES.get(p, p)


@dataclass(frozen=True, order=True)
class Rule:
    """One ingress permission with exactly one source.

    ``kind`` is ``cidr``, ``cidr6``, ``group`` or ``prefix``; ``source`` is the CIDR, group id
    or prefix-list id; ``user_id`` only for groups (empty: any account). Ports are ``None``
    for protocol ``-1``.
    """

    protocol: str
    from_port: int | None
    to_port: int | None
    kind: str
    source: str
    user_id: str = ""

    def to_permission(self) -> dict[str, Any]:
        perm: dict[str, Any] = {"IpProtocol": self.protocol}
        if self.from_port is not None:
            perm["FromPort"] = self.from_port
        if self.to_port is not None:
            perm["ToPort"] = self.to_port
        if self.kind == "cidr":
            perm["IpRanges"] = [{"CidrIp": self.source}]
        elif self.kind == "cidr6":
            perm["Ipv6Ranges"] = [{"CidrIpv6": self.source}]
        elif self.kind == "prefix":
            perm["PrefixListIds"] = [{"PrefixListId": self.source}]
        else:
            pair: dict[str, str] = {"GroupId": self.source}
            if self.user_id:
                pair["UserId"] = self.user_id
            perm["UserIdGroupPairs"] = [pair]
        return perm


def _ports(perm: Mapping[str, Any], protocol: str) -> tuple[int | None, int | None]:
    if protocol == "-1":
        return None, None
    lo = perm.get("FromPort")
    hi = perm.get("ToPort")
    return (None if lo is None else int(lo)), (None if hi is None else int(hi))


def ungroup(permissions: Iterable[Mapping[str, Any]]) -> frozenset[Rule]:
    """EC2 ``IpPermissions`` (as described or as to be sent) to one-source rules."""
    rules: set[Rule] = set()
    for perm in permissions:
        proto = normalize_protocol(str(perm.get("IpProtocol", "-1")))
        lo, hi = _ports(perm, proto)
        for r in perm.get("IpRanges") or ():
            rules.add(Rule(proto, lo, hi, "cidr", str(r["CidrIp"])))
        for r in perm.get("Ipv6Ranges") or ():
            rules.add(Rule(proto, lo, hi, "cidr6", str(r["CidrIpv6"])))
        for r in perm.get("PrefixListIds") or ():
            rules.add(Rule(proto, lo, hi, "prefix", str(r["PrefixListId"])))
        for r in perm.get("UserIdGroupPairs") or ():
            rules.add(Rule(proto, lo, hi, "group", str(r["GroupId"]), str(r.get("UserId") or "")))
    return frozenset(rules)


def _same_group_rule(desired: Rule, actual: Rule) -> bool:
    """Group rules match on group id; the account matters only when the desired one names it."""
    return (
        desired.kind == actual.kind == "group"
        and (desired.protocol, desired.from_port, desired.to_port, desired.source)
        == (actual.protocol, actual.from_port, actual.to_port, actual.source)
        and (not desired.user_id or desired.user_id == actual.user_id)
    )


@dataclass(frozen=True)
class RuleDiff:
    authorize: frozenset[Rule]
    revoke: frozenset[Rule]

    @property
    def empty(self) -> bool:
        return not self.authorize and not self.revoke


def diff(desired: Iterable[Rule], actual: Iterable[Rule]) -> RuleDiff:
    """Exact sync: what to authorise and what to revoke so ``actual`` becomes ``desired``."""
    want = set(desired)
    have = set(actual)
    covered: set[Rule] = set()
    authorize: set[Rule] = set()
    for rule in want:
        if rule in have:
            covered.add(rule)
            continue
        if rule.kind == "group":
            match = next((a for a in have if _same_group_rule(rule, a)), None)
            if match is not None:
                covered.add(match)
                continue
        authorize.add(rule)
    return RuleDiff(frozenset(authorize), frozenset(have - covered))


def regroup(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """Rules to EC2 ``IpPermissions``, one permission per (protocol, ports), sorted."""
    grouped: dict[tuple[str, int | None, int | None], dict[str, Any]] = {}
    for rule in sorted(rules, key=_sort_key):
        key = (rule.protocol, rule.from_port, rule.to_port)
        perm = grouped.get(key)
        single = rule.to_permission()
        if perm is None:
            grouped[key] = single
            continue
        for field in ("IpRanges", "Ipv6Ranges", "PrefixListIds", "UserIdGroupPairs"):
            if field in single:
                perm.setdefault(field, []).extend(single[field])
    return list(grouped.values())


def _sort_key(rule: Rule) -> tuple[str, int, int, str, str, str]:
    return (
        rule.protocol,
        -2 if rule.from_port is None else rule.from_port,
        -2 if rule.to_port is None else rule.to_port,
        rule.kind,
        rule.source,
        rule.user_id,
    )


def cidr_kind(cidr: str) -> str:
    return "cidr6" if ":" in cidr else "cidr"


def load_balancer_rules(ports: Sequence[int], source_ranges: Sequence[str]) -> frozenset[Rule]:
    """Upstream LB group ingress: each Service port (TCP) plus ICMP type 3 code 4 (path MTU)
    from each source range."""
    rules: set[Rule] = set()
    for cidr in source_ranges:
        kind = cidr_kind(cidr)
        for port in ports:
            rules.add(Rule("tcp", port, port, kind, cidr))
        if kind == "cidr":
            rules.add(Rule("icmp", 3, 4, kind, cidr))
        else:
            rules.add(Rule("icmpv6", 2, 0, kind, cidr))  # ICMPv6 packet-too-big
    return frozenset(rules)


def allow_all_from_group(group_id: str) -> Rule:
    """The node-group rule: all traffic from the load balancer's group."""
    return Rule("-1", None, None, "group", group_id)


def references_group(permissions: Iterable[Mapping[str, Any]], group_id: str) -> frozenset[Rule]:
    """The rules in ``permissions`` whose source is ``group_id``."""
    return frozenset(r for r in ungroup(permissions) if r.kind == "group" and r.source == group_id)
