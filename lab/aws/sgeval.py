"""Security-group evaluation with AWS semantics: may this traffic reach that network interface?

Role: the lab's data plane asks "may the load balancer's groups open tcp/30080 to this node?"
or "may node A reach node B on 10250?" and wants the answer EC2 would give, with a reason a
person can act on. This module is the pure model: immutable groups and rules in, a
:class:`Verdict` out; nothing here reads moto (:mod:`lab.aws.health.sgview` builds a
:class:`SecurityGroupModel` from the endpoint's state) and nothing sends a packet.

The semantics, from the EC2 user guide ("Security group rules", "Security group connection
tracking") and what VPC Reachability Analyzer reports:

* Rules only **allow**; there is no deny rule. Traffic is allowed when **any** inbound rule of
  **any** group on the destination interface matches (the groups of an interface are evaluated
  as one union). A group with no inbound rule admits nothing.
* Groups are **stateful**: the reply to an allowed request is always allowed, whatever the
  rules of either side say, so one question is asked per connection, in the direction it is
  opened. Outbound rules of the source apply to the request too
  (:meth:`~SecurityGroupModel.egress`); a new group's default outbound rule allows everything.
* A rule's source is one of: an IPv4/IPv6 CIDR; a managed **prefix list** (its current entries'
  CIDRs); or a **security group**, which matches traffic from any interface that *has* that
  group (membership: an instance is a member when any of its network interfaces has it), by the
  interface's private address — never by a CIDR. A rule naming its own group ("self") admits
  the other members of that group.
* Protocols: ``-1`` (all protocols and ports), ``tcp``/``udp`` with an inclusive port range,
  ``icmp`` with type (``from_port``) and code (``to_port``), ``-1`` meaning any, and any other
  IP protocol number (ports do not apply). Protocol names and numbers are equivalent (6 = tcp).

Not modelled (documented in ``lab/aws/README.md``): network ACLs, route tables, cross-VPC
(peering) group references, security-group VPC associations, ENI-level source/destination
check, and connection tracking of already-established flows when a rule is revoked (EC2 keeps
tracked flows alive; the model answers for new connections only).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_PROTOCOLS = {"-1": "-1", "all": "-1", "tcp": "tcp", "6": "tcp", "udp": "udp", "17": "udp"}
_PROTOCOLS |= {"icmp": "icmp", "1": "icmp", "icmpv6": "icmpv6", "58": "icmpv6"}


class SecurityGroupError(ValueError):
    """A question the model cannot answer as asked (bad protocol, port or address)."""


def normalize_protocol(protocol: str | int) -> str:
    """``tcp``/``udp``/``icmp``/``icmpv6``/``-1``, or the IP protocol number as text.

    Raises :class:`SecurityGroupError` naming the value when it is neither a known name nor a
    number 0-255.
    """
    text = str(protocol).strip().lower()
    if text in _PROTOCOLS:
        return _PROTOCOLS[text]
    if text.isdigit() and 0 <= int(text) <= 255:
        return str(int(text))
    raise SecurityGroupError(
        f"protocol={protocol!r}: give tcp, udp, icmp, icmpv6, -1 (all) or an IP protocol number"
    )


@dataclass(frozen=True)
class Rule:
    """One security-group rule: protocol, port range and exactly one kind of peer.

    ``from_port``/``to_port`` are ``None`` for protocol ``-1`` and protocols without ports;
    for ICMP they are type and code (``-1`` = any).
    """

    group_id: str
    protocol: str
    from_port: int | None = None
    to_port: int | None = None
    cidr: IpNetwork | None = None
    peer_group: str | None = None
    prefix_list: str | None = None
    description: str = ""

    def ports_text(self) -> str:
        if self.protocol == "-1":
            return "all traffic"
        if self.protocol in ("icmp", "icmpv6"):
            kind = "any" if self.from_port in (None, -1) else str(self.from_port)
            code = "" if self.to_port in (None, -1) else f" code {self.to_port}"
            return f"{self.protocol} type {kind}{code}"
        if self.from_port is None:
            return f"protocol {self.protocol}"
        if self.from_port == self.to_port:
            return f"{self.protocol}/{self.from_port}"
        return f"{self.protocol}/{self.from_port}-{self.to_port}"

    def peer_text(self) -> str:
        if self.peer_group is not None:
            return "itself" if self.peer_group == self.group_id else self.peer_group
        if self.prefix_list is not None:
            return self.prefix_list
        return str(self.cidr)

    def __str__(self) -> str:
        return f"{self.ports_text()} from {self.peer_text()}"

    def covers(self, protocol: str, port: int | None, code: int | None) -> bool:
        """Whether protocol/port (ICMP: type/code) fall inside this rule."""
        if self.protocol == "-1":
            return True
        if self.protocol != protocol:
            return False
        if protocol in ("tcp", "udp"):
            if port is None or self.from_port is None or self.to_port is None:
                return False
            return self.from_port <= port <= self.to_port
        if protocol in ("icmp", "icmpv6"):
            type_ok = self.from_port in (None, -1) or port is None or self.from_port == port
            code_ok = self.to_port in (None, -1) or code is None or self.to_port == code
            return type_ok and code_ok
        return True  # other protocols have no ports


@dataclass(frozen=True)
class SecurityGroup:
    """A group's identity and its rules (``ingress`` inbound, ``egress`` outbound)."""

    group_id: str
    name: str = ""
    vpc_id: str = ""
    ingress: tuple[Rule, ...] = ()
    egress: tuple[Rule, ...] = ()

    def label(self) -> str:
        return f"{self.group_id} ({self.name})" if self.name else self.group_id


@dataclass(frozen=True)
class Verdict:
    """The answer: allowed or not, the matching rule (if any), and a sentence saying why."""

    allowed: bool
    reason: str
    rule: Rule | None = None
    evaluated: tuple[str, ...] = ()
    """The groups whose rules were evaluated (the destination's for ingress)."""


@dataclass(frozen=True)
class Flow:
    """A connection being opened: protocol and port, and who opens it."""

    protocol: str
    port: int | None = None
    icmp_code: int | None = None
    source_groups: tuple[str, ...] = ()
    """Every group of the source's network interface (membership for group rules)."""
    source_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None

    @classmethod
    def of(
        cls,
        protocol: str | int,
        port: int | None = None,
        *,
        source_groups: Iterable[str] = (),
        source_ip: str | None = None,
        icmp_code: int | None = None,
    ) -> Flow:
        """A flow from loosely typed input; :class:`SecurityGroupError` names a bad field."""
        proto = normalize_protocol(protocol)
        bad_port = port is None or isinstance(port, bool) or not 0 <= int(port) <= 65535
        if proto in ("tcp", "udp") and bad_port:
            raise SecurityGroupError(f"port={port!r}: {proto} needs a port 0-65535")
        address = None
        if source_ip:
            try:
                address = ipaddress.ip_address(source_ip)
            except ValueError:
                raise SecurityGroupError(
                    f"source_ip={source_ip!r}: not an IPv4 or IPv6 address"
                ) from None
        return cls(
            protocol=proto,
            port=None if port is None else int(port),
            icmp_code=icmp_code,
            source_groups=tuple(dict.fromkeys(source_groups)),
            source_ip=address,
        )

    def describe(self, peer: str = "from") -> str:
        what = "all traffic" if self.protocol == "-1" else self.protocol
        if self.port is not None:
            what += f"/{self.port}"
        who = []
        if self.source_groups:
            who.append(",".join(self.source_groups))
        if self.source_ip is not None:
            who.append(str(self.source_ip))
        return f"{what} {peer} {' / '.join(who) or 'nowhere'}"


@dataclass(frozen=True)
class SecurityGroupModel:
    """Every group of a region and every managed prefix list, frozen at one moment."""

    groups: Mapping[str, SecurityGroup] = field(default_factory=dict)
    prefix_lists: Mapping[str, tuple[IpNetwork, ...]] = field(default_factory=dict)

    def group(self, group_id: str) -> SecurityGroup | None:
        return self.groups.get(group_id)

    # -- the questions ---------------------------------------------------------------------
    def ingress(self, dest_groups: Sequence[str], flow: Flow) -> Verdict:
        """Whether an interface with ``dest_groups`` accepts ``flow`` (its inbound rules)."""
        return self._evaluate(dest_groups, flow, inbound=True)

    def egress(
        self,
        source_groups: Sequence[str],
        flow: Flow,
        *,
        dest_groups: Sequence[str] = (),
        dest_ip: str | None = None,
    ) -> Verdict:
        """Whether an interface with ``source_groups`` may send ``flow`` to a destination with
        ``dest_groups`` / ``dest_ip`` (its outbound rules; a group rule matches a destination
        that is a member of that group)."""
        address = Flow.of(flow.protocol, flow.port, source_ip=dest_ip).source_ip
        peer = replace(flow, source_groups=tuple(dest_groups), source_ip=address)
        return self._evaluate(source_groups, peer, inbound=False)

    def connect(
        self,
        flow: Flow,
        *,
        dest_groups: Sequence[str],
        dest_ip: str | None = None,
    ) -> Verdict:
        """A new connection end to end: the source's outbound rules (when the source has
        groups, i.e. it is an interface in the VPC), then the destination's inbound rules."""
        if flow.source_groups:
            out = self.egress(flow.source_groups, flow, dest_groups=dest_groups, dest_ip=dest_ip)
            if not out.allowed:
                return out
        return self.ingress(dest_groups, flow)

    def _evaluate(self, groups: Sequence[str], flow: Flow, *, inbound: bool) -> Verdict:
        direction = "inbound" if inbound else "outbound"
        wanted = tuple(dict.fromkeys(groups))
        if not wanted:
            return Verdict(False, f"denied: the interface has no security group ({direction})")
        unknown = [g for g in wanted if g not in self.groups]
        known = [self.groups[g] for g in wanted if g in self.groups]
        peers = set(flow.source_groups)
        for grp in known:
            for rule in grp.ingress if inbound else grp.egress:
                if rule.covers(flow.protocol, flow.port, flow.icmp_code) and self._peer_matches(
                    rule, peers, flow.source_ip
                ):
                    return Verdict(
                        True,
                        f"allowed by {grp.label()} {direction} rule {rule}",
                        rule=rule,
                        evaluated=wanted,
                    )
        return Verdict(False, self._denial(known, unknown, flow, inbound), evaluated=wanted)

    def _peer_matches(
        self,
        rule: Rule,
        peers: set[str],
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    ) -> bool:
        if rule.peer_group is not None:
            return rule.peer_group in peers
        if address is None:  # unknown address: only a rule for every address matches it
            return rule.cidr is not None and rule.cidr.prefixlen == 0
        if rule.cidr is not None:
            return rule.cidr.version == address.version and address in rule.cidr
        if rule.prefix_list is not None:
            return any(
                net.version == address.version and address in net
                for net in self.prefix_lists.get(rule.prefix_list, ())
            )
        return False

    def _denial(
        self, known: list[SecurityGroup], unknown: list[str], flow: Flow, inbound: bool
    ) -> str:
        direction = "inbound" if inbound else "outbound"
        parts = []
        for grp in known:
            rules = grp.ingress if inbound else grp.egress
            listed = "; ".join(str(r) for r in rules) if rules else "no rules"
            parts.append(f"{grp.label()}: {listed}")
        parts.extend(f"{g}: no such group" for g in unknown)
        names = ", ".join([g.group_id for g in known] + unknown)
        return (
            f"denied: no {direction} rule of {names} allows "
            f"{flow.describe('from' if inbound else 'to')} "
            f"(evaluated {direction} rules: {' | '.join(parts)})"
        )


def parse_cidr(value: str) -> IpNetwork:
    """An IPv4/IPv6 network from rule text; :class:`SecurityGroupError` names a bad one."""
    try:
        return ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise SecurityGroupError(f"cidr={value!r}: not an IPv4 or IPv6 CIDR") from None


__all__ = [
    "Flow",
    "Rule",
    "SecurityGroup",
    "SecurityGroupError",
    "SecurityGroupModel",
    "Verdict",
    "normalize_protocol",
    "parse_cidr",
]
