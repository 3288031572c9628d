"""Through a Classic ELB: the listener, the load balancer's choice of instance, and the
security groups on the way.

Role: :func:`send_classic` follows a call's requests: client -> the load balancer's security
groups on the listener port -> the listener -> an InService instance (:class:`ClassicPicker`:
round robin; per zone unless cross-zone load balancing is on) -> the instance's security groups
on the instance port (the nodePort), from the load balancer's groups -> the node
(``lab.traffic.walk.Walk.deliver``).

Neighbours: ``lab.traffic.probe`` calls it for a Service whose hostname is a Classic ELB's;
``lab.aws.health.view`` describes the load balancer; ``lab.traffic.nlb`` is the NLB counterpart.
"""

from __future__ import annotations

import ipaddress
import random
from collections import Counter

from lab.aws.health.view import ClassicInstance, ClassicLoadBalancer
from lab.dataplane.kubeproxy import Drop, PodTarget
from lab.traffic.report import Gates, TrafficReport
from lab.traffic.walk import Walk, walk_requests


def send_classic(report: TrafficReport, walk: Walk, lb: ClassicLoadBalancer, port: int) -> None:
    """Model the call's requests to ``lb``'s listener on ``port`` into ``report``."""
    report.load_balancer = lb.name
    listener = lb.listener(port)
    if listener is None:
        have = ", ".join(str(x.port) for x in lb.listeners) or "none"
        report.drop(
            "elb-listener",
            f"{lb.name} has no listener on port {port} (has {have})",
            report.requests,
        )
        return
    pick = ClassicPicker(lb, walk.gates, walk.rng)
    walk.read_nodes()
    walk_requests(
        report,
        walk,
        pick,
        lambda ip, groups: _one(walk, lb, listener.port, listener.instance_port, ip, groups, pick),
    )


def _one(
    walk: Walk,
    lb: ClassicLoadBalancer,
    port: int,
    node_port: int,
    client_ip: str,
    client_groups: tuple[str, ...],
    pick: ClassicPicker,
) -> PodTarget | Drop:
    pick.last = None
    if lb.scheme == "internal" and not ipaddress.ip_address(client_ip).is_private:
        return Drop("elb", f"{lb.name} is internal: no route from {client_ip}")
    gate = walk.gates.ingress(
        dest_groups=lb.security_groups,
        protocol="tcp",
        port=port,
        source_groups=client_groups,
        source_ip=client_ip,
    )
    if not gate.allowed:
        return Drop("elb-security-group", gate.reason)
    chosen = pick.next()
    if isinstance(chosen, Drop):
        return chosen
    pick.last = chosen.instance_id
    gate = walk.gates.ingress(
        dest_groups=chosen.groups,
        protocol="tcp",
        port=node_port,
        source_groups=lb.security_groups,
    )
    if not gate.allowed:
        return Drop("node-security-group", gate.reason)
    return walk.deliver(chosen, node_port)


class ClassicPicker:
    """The load balancer's choice of instance: round robin over InService instances, within
    the client's zone unless cross-zone load balancing is on (a zone with no InService
    instance is left out of DNS, so its clients go to the other zones)."""

    def __init__(self, lb: ClassicLoadBalancer, gates: Gates, rng: random.Random) -> None:
        self.lb = lb
        self.rng = rng
        self.last: str | None = None
        self.healthy: list[ClassicInstance] = []
        self.reasons: list[str] = []
        for inst in sorted(lb.instances, key=lambda i: i.instance_id):
            ok, reason = gates.in_service(lb.name, inst.instance_id)
            if ok:
                self.healthy.append(inst)
            else:
                self.reasons.append(f"{inst.instance_id}: {reason}")
        self._turn: Counter[str] = Counter()

    def next(self) -> ClassicInstance | Drop:
        if not self.healthy:
            if not self.lb.instances:
                return Drop("elb", f"{self.lb.name} has no registered instance")
            return Drop("elb", "no InService instance (" + "; ".join(self.reasons) + ")")
        pool = self.healthy
        if not self.lb.cross_zone:
            zones = sorted({i.zone for i in self.healthy})
            zone = self.rng.choice(zones)
            pool = [i for i in self.healthy if i.zone == zone]
        key = "" if self.lb.cross_zone else pool[0].zone
        chosen = pool[self._turn[key] % len(pool)]
        self._turn[key] += 1
        return chosen
