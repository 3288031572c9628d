"""Through a network load balancer: the listener, its target group, the NLB's choice of target
and the security groups on the way.

Role: :func:`send_nlb` follows a call's requests: client -> the NLB's security groups when it has
any -> the listener on the port -> its target group -> a target (:class:`NlbPicker`: a healthy
target, per zone unless cross-zone load balancing is on; no healthy target anywhere: fail open)
-> the instance's security groups on the target port (the nodePort) from the **client's**
address when the group preserves client IPs (the default for instance targets; then a node
reaching itself through the NLB times out), else from the NLB node's address, with UDP rules for
a UDP listener -> the node (``lab.traffic.walk.Walk.deliver``).

Neighbours: ``lab.traffic.probe`` calls it for a Service whose hostname is an NLB's;
``lab.aws.health.network_view`` describes the NLB; ``lab.traffic.classic`` is the Classic
ELB counterpart.
"""

from __future__ import annotations

import ipaddress
import random

from lab.aws.app import AwsLab
from lab.aws.health.network_view import (
    NetworkLoadBalancer,
    NlbListener,
    NlbTarget,
    NlbTargetGroup,
    cross_zone,
    target_group,
)
from lab.aws.health.view import ClassicInstance, instance
from lab.dataplane.kubeproxy import Drop, PodTarget
from lab.traffic.report import Gates, TrafficReport
from lab.traffic.walk import Walk, walk_requests


def send_nlb(report: TrafficReport, walk: Walk, nlb: NetworkLoadBalancer, port: int) -> None:
    """Model the call's requests to ``nlb``'s listener on ``port`` into ``report``."""
    report.load_balancer = nlb.name
    requests = report.requests
    listener = nlb.listener(port)
    if listener is None:
        have = ", ".join(str(x.port) for x in nlb.listeners) or "none"
        report.drop(
            "nlb-listener", f"{nlb.name} has no listener on port {port} (has {have})", requests
        )
        return
    tg = target_group(walk.aws, listener.target_group_arn or "")
    if tg is None:
        report.drop(
            "nlb-listener",
            f"the listener on port {port} forwards to no target group "
            f"({listener.target_group_arn or 'no forward action'})",
            requests,
        )
        return
    pick = NlbPicker(nlb, tg, walk.gates, walk.aws, walk.rng)
    walk.read_nodes()
    walk_requests(
        report, walk, pick, lambda ip, groups: _one(walk, nlb, tg, listener, ip, groups, pick)
    )


def _one(
    walk: Walk,
    nlb: NetworkLoadBalancer,
    tg: NlbTargetGroup,
    listener: NlbListener,
    client_ip: str,
    client_groups: tuple[str, ...],
    pick: NlbPicker,
) -> PodTarget | Drop:
    pick.last = None
    # a UDP listener's datagrams meet UDP rules; TCP, TLS and TCP_UDP's TCP half meet TCP's
    protocol = "udp" if listener.protocol == "UDP" else "tcp"
    refused = _at_the_nlb(walk, nlb, listener, protocol, client_ip, client_groups)
    if refused is not None:
        return refused
    chosen = pick.next()
    if isinstance(chosen, Drop):
        return chosen
    inst, target = chosen
    pick.last = inst.instance_id
    refused = _at_the_node(walk, nlb, tg, inst, target, protocol, client_ip, client_groups)
    if refused is not None:
        return refused
    return walk.deliver(inst, target.port)


def _at_the_nlb(
    walk: Walk,
    nlb: NetworkLoadBalancer,
    listener: NlbListener,
    protocol: str,
    client_ip: str,
    client_groups: tuple[str, ...],
) -> Drop | None:
    """The NLB's own hops: a route to it, and its security groups when it has any."""
    if nlb.scheme == "internal" and not ipaddress.ip_address(client_ip).is_private:
        return Drop("nlb", f"{nlb.name} is internal: no route from {client_ip}")
    if nlb.security_groups:
        gate = walk.gates.ingress(
            dest_groups=nlb.security_groups,
            protocol=protocol,
            port=listener.port,
            source_groups=client_groups,
            source_ip=client_ip,
        )
        if not gate.allowed:
            return Drop("nlb-security-group", gate.reason)
    return None


def _at_the_node(
    walk: Walk,
    nlb: NetworkLoadBalancer,
    tg: NlbTargetGroup,
    inst: ClassicInstance,
    target: NlbTarget,
    protocol: str,
    client_ip: str,
    client_groups: tuple[str, ...],
) -> Drop | None:
    """The chosen target's hops: hairpinning, and its security groups from the address it
    sees (the client's when the group preserves client IPs, else the NLB node's)."""
    if tg.preserve_client_ip and client_ip == inst.private_ip:
        # NLB guide, "Troubleshoot your Network Load Balancer" (loopback timeout): with client
        # IP preservation a target that reaches itself through the NLB (hairpinning) sees
        # its own address as the source and the connection times out
        return Drop(
            "nlb",
            f"{inst.instance_id} reached itself through the NLB with client IP preservation "
            "on: hairpinned connections time out",
        )
    source_ip: str | None = client_ip
    source_groups = client_groups
    if not tg.preserve_client_ip:  # the node sees the NLB node's address, not the client's
        source_ip, source_groups = nlb.node_address(inst.zone), nlb.security_groups
    gate = walk.gates.ingress(
        dest_groups=inst.groups,
        protocol=protocol,
        port=target.port,
        source_groups=source_groups,
        source_ip=source_ip,
    )
    if gate.allowed:
        return None
    seen = (
        "the client's address (client IP preserved)"
        if tg.preserve_client_ip
        else ("the NLB node's address (client IP not preserved)")
    )
    return Drop("node-security-group", f"{gate.reason}; the node sees {seen}")


class NlbPicker:
    """The NLB's choice of target (NLB guide, "Health checks for Network Load Balancer target
    groups" and "Cross-zone load balancing"):

    * targets in zones the NLB has no subnet in, draining, initial or unused get nothing (a new
      target gets traffic once it passed its initial checks);
    * the client resolves the NLB's name to the nodes of the zones that have a healthy target
      (the others are removed from DNS) and picks one; that node sends to a healthy target of
      its zone, or of any enabled zone with cross-zone load balancing (the group's
      ``load_balancing.cross_zone.enabled``, or the NLB's, default off);
    * when no enabled zone has a healthy target the NLB fails open: every zone is in DNS, and
      the unhealthy targets get traffic as if they were healthy;
    * the target within the pool: a flow hash (a random draw per request, from the seed).
    """

    def __init__(
        self,
        nlb: NetworkLoadBalancer,
        tg: NlbTargetGroup,
        gates: Gates,
        aws: AwsLab,
        rng: random.Random,
    ) -> None:
        self.nlb = nlb
        self.rng = rng
        self.cross_zone = cross_zone(nlb, tg)
        self.last: str | None = None
        self.reasons: list[str] = []
        healthy: list[tuple[ClassicInstance, NlbTarget]] = []
        unhealthy: list[tuple[ClassicInstance, NlbTarget]] = []
        for target in sorted(tg.targets, key=lambda t: t.instance_id):
            state, why = gates.target_health(tg.arn, target.instance_id)
            inst = instance(aws, target.instance_id)
            if nlb.zones and inst.zone not in nlb.zones:
                self.reasons.append(f"{target.instance_id}: {why}")
                continue
            if state == "healthy":
                healthy.append((inst, target))
            else:
                if state == "unhealthy":
                    unhealthy.append((inst, target))
                self.reasons.append(f"{target.instance_id}: {why}")
        self.registered = len(tg.targets)
        self.fail_open = not healthy and bool(unhealthy)
        self.pool = healthy or unhealthy
        if self.fail_open:
            self.zones = sorted(nlb.zones) or sorted({i.zone for i, _ in self.pool})
        else:
            self.zones = sorted({i.zone for i, _ in self.pool})

    def next(self) -> tuple[ClassicInstance, NlbTarget] | Drop:
        if not self.pool:
            if not self.registered:
                return Drop("nlb", f"{self.nlb.name}: its target group has no registered target")
            return Drop("nlb", "no healthy target (" + "; ".join(self.reasons) + ")")
        zone = self.rng.choice(self.zones)
        pool = self.pool if self.cross_zone else [m for m in self.pool if m[0].zone == zone]
        if not pool:
            return Drop(
                "nlb",
                f"failing open, the NLB node in {zone} has no target in its zone and cross-zone "
                "load balancing is off",
            )
        return self.rng.choice(pool)
