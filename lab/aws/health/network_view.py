"""What a network load balancer does with a connection, read from the endpoint's own state.

The NLB counterpart of :mod:`lab.aws.health.view`: the traffic probe (``lab/traffic.py``) and the
NLB health model (:mod:`lab.aws.health.network`) read an NLB's listeners, the target groups they
forward to, the registered targets and the attributes that steer a connection (cross-zone load
balancing, client IP preservation, the deregistration delay) from moto's in-process ELBv2
backend, under the endpoint's request lock and never through the API (the reads stay out of
the trail and out of reach of injected faults).

Defaults where an attribute was never set are AWS's for NLB target groups and load balancers
("Edit target group attributes for your Network Load Balancer", "Cross-zone load balancing"):
``load_balancing.cross_zone.enabled`` is ``false`` on a network load balancer, a target
group's own value ``use_load_balancer_configuration`` defers to it;
``deregistration_delay.timeout_seconds`` is 300; ``preserve_client_ip.enabled`` is ``true``
for instance targets of TCP/TLS/UDP groups.

Neighbours: :mod:`lab.aws.fidelity` (``MotoView``), :mod:`lab.aws.health.view` (the instance
view, the readers and the lookup shared with Classic ELBs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.aws.fidelity import MotoView
from lab.aws.health.seam import HealthLab, moto_view
from lab.aws.health.view import find_load_balancer, is_true, subnet_node_address

TRAFFIC_PORT = "traffic-port"


@dataclass(frozen=True)
class NlbTarget:
    """One registered target: an instance id and the port it receives traffic on."""

    instance_id: str
    port: int


@dataclass(frozen=True)
class NlbHealthCheck:
    """A target group's health-check settings (``CreateTargetGroup``/``ModifyTargetGroup``)."""

    protocol: str
    """``TCP``, ``HTTP`` or ``HTTPS``."""
    port: str
    """``traffic-port`` or a port number."""
    path: str
    interval: float
    timeout: float
    healthy_threshold: int
    unhealthy_threshold: int

    def port_for(self, target: NlbTarget) -> int:
        """The port a check of ``target`` connects to (``traffic-port``: the target's)."""
        return target.port if self.port == TRAFFIC_PORT else int(self.port)


@dataclass(frozen=True)
class NlbTargetGroup:
    """A target group as the health model and the traffic probe need it."""

    arn: str
    name: str
    protocol: str
    target_type: str
    health_check: NlbHealthCheck
    targets: tuple[NlbTarget, ...]
    load_balancer_arns: tuple[str, ...]
    deregistration_delay: float
    preserve_client_ip: bool
    cross_zone: str
    """The group's ``load_balancing.cross_zone.enabled``: ``true``, ``false`` or
    ``use_load_balancer_configuration``."""

    def target(self, instance_id: str) -> NlbTarget | None:
        return next((t for t in self.targets if t.instance_id == instance_id), None)


@dataclass(frozen=True)
class NlbListener:
    """A listener: the port and protocol a client connects to, and where it forwards."""

    port: int
    protocol: str
    target_group_arn: str | None


@dataclass(frozen=True)
class NetworkLoadBalancer:
    """An NLB's request path: listeners, zones, node addresses, groups, cross-zone."""

    arn: str
    name: str
    dns_name: str
    scheme: str
    listeners: tuple[NlbListener, ...]
    zones: tuple[str, ...]
    node_addresses: tuple[tuple[str, str], ...]
    """(zone, private address) of each load-balancer node: one per enabled subnet."""
    security_groups: tuple[str, ...]
    cross_zone: bool

    def listener(self, port: int) -> NlbListener | None:
        return next((lst for lst in self.listeners if lst.port == port), None)

    def node_address(self, zone: str) -> str | None:
        """The node address in ``zone`` (health checks and unpreserved client IPs come from
        the node in the target's zone), else the first node's."""
        for node_zone, address in self.node_addresses:
            if node_zone == zone:
                return address
        return self.node_addresses[0][1] if self.node_addresses else None


def read_load_balancer(lb: Any) -> NetworkLoadBalancer:
    """An NLB from moto's ``FakeLoadBalancer``."""
    listeners = []
    for lst in lb.listeners.values():
        arn = None
        for action in lst.default_actions or ():
            data = getattr(action, "data", action)
            if str(data.get("Type", "")).lower() != "forward":
                continue
            arn = data.get("TargetGroupArn")
            groups = (data.get("ForwardConfig") or {}).get("TargetGroups") or []
            if arn is None and groups:
                arn = groups[0].get("TargetGroupArn")
            break
        listeners.append(NlbListener(int(lst.port), str(lst.protocol).upper(), arn))
    nodes: list[tuple[str, str]] = []
    for subnet in lb.subnets or ():
        address = subnet_node_address(str(subnet.cidr_block))
        if address is not None:
            nodes.append((str(subnet.availability_zone), address))
    return NetworkLoadBalancer(
        arn=str(lb.arn),
        name=str(lb.name),
        dns_name=str(lb.dns_name),
        scheme=str(lb.scheme),
        listeners=tuple(listeners),
        zones=tuple(dict.fromkeys(str(s.availability_zone) for s in lb.subnets or ())),
        node_addresses=tuple(nodes),
        security_groups=tuple(str(g) for g in lb.security_groups or ()),
        cross_zone=is_true(lb.attrs.get("load_balancing.cross_zone.enabled", "false")),
    )


def read_target_group(tg: Any) -> NlbTargetGroup:
    """A target group from moto's ``FakeTargetGroup``; ``ValueError`` names a setting the lab
    cannot run a check with (the model refuses such values at create/modify time)."""
    attrs: Mapping[str, Any] = tg.attributes
    protocol = str(tg.health_check_protocol or tg.protocol or "TCP").upper()
    if protocol not in ("TCP", "HTTP", "HTTPS"):
        # AWS checks NLB groups with TCP, HTTP or HTTPS only (API reference, CreateTargetGroup
        # HealthCheckProtocol: not GENEVE, TLS, UDP or TCP_UDP; TCP is the NLB default); moto
        # copies the group's protocol
        protocol = "TCP"
    port = str(tg.health_check_port or TRAFFIC_PORT)
    if port != TRAFFIC_PORT and not port.isdigit():
        raise ValueError(f"HealthCheckPort={port!r}: expected traffic-port or a port number")
    check = NlbHealthCheck(
        protocol=protocol,
        port=port,
        path=str(tg.health_check_path or "/") if protocol in ("HTTP", "HTTPS") else "",
        interval=float(tg.health_check_interval_seconds),
        timeout=float(tg.health_check_timeout_seconds),
        healthy_threshold=int(tg.healthy_threshold_count),
        unhealthy_threshold=int(tg.unhealthy_threshold_count),
    )
    if check.interval <= 0 or check.healthy_threshold < 1 or check.unhealthy_threshold < 1:
        raise ValueError(
            f"target group {tg.name}: HealthCheckIntervalSeconds={check.interval:g} "
            f"HealthyThresholdCount={check.healthy_threshold} UnhealthyThresholdCount="
            f"{check.unhealthy_threshold}: AWS needs an interval > 0 and thresholds >= 1"
        )
    # "Edit target group attributes for your Network Load Balancer", client IP preservation:
    # on for instance targets and for UDP/TCP_UDP (where it cannot be turned off), off for IP
    # targets of TCP/TLS groups
    fixed_on = str(tg.protocol) in ("UDP", "TCP_UDP")
    default_preserve = str(tg.target_type) == "instance" or fixed_on
    preserve = None if fixed_on else attrs.get("preserve_client_ip.enabled")
    return NlbTargetGroup(
        arn=str(tg.arn),
        name=str(tg.name),
        protocol=str(tg.protocol or ""),
        target_type=str(tg.target_type),
        health_check=check,
        targets=tuple(
            NlbTarget(str(t["Id"]), int(t.get("Port") or tg.port)) for t in tg.targets.values()
        ),
        load_balancer_arns=tuple(dict.fromkeys(str(a) for a in tg.load_balancer_arns)),
        deregistration_delay=float(attrs.get("deregistration_delay.timeout_seconds", 300)),
        preserve_client_ip=default_preserve if preserve is None else is_true(preserve),
        cross_zone=str(
            attrs.get("load_balancing.cross_zone.enabled", "use_load_balancer_configuration")
        ),
    )


def cross_zone(lb: NetworkLoadBalancer, tg: NlbTargetGroup) -> bool:
    """Whether connections to ``tg`` behind ``lb`` cross zones: the group's own setting, or
    the load balancer's when the group says ``use_load_balancer_configuration``."""
    if tg.cross_zone.lower() in ("true", "false"):
        return tg.cross_zone.lower() == "true"
    return lb.cross_zone


def network_load_balancer(
    aws: HealthLab, *, dns_name: str | None = None, name: str | None = None
) -> NetworkLoadBalancer | None:
    """The network load balancer answering ``dns_name`` (or called ``name``); ``None`` if
    none. DNS names compare case-insensitively and without a trailing dot."""

    def networks(moto: MotoView) -> list[Any]:
        return [lb for lb in moto.elbv2.load_balancers.values() if str(lb.type) == "network"]

    return find_load_balancer(
        aws,
        dns_name=dns_name,
        name=name,
        candidates=networks,
        read=lambda _, lb: read_load_balancer(lb),
    )


def target_group(aws: HealthLab, arn: str) -> NlbTargetGroup | None:
    """The target group ``arn`` (``None`` if it does not exist)."""
    with aws.lock:
        tg = moto_view(aws).elbv2.target_groups.get(arn)
        return None if tg is None else read_target_group(tg)


__all__ = [
    "TRAFFIC_PORT",
    "NetworkLoadBalancer",
    "NlbHealthCheck",
    "NlbListener",
    "NlbTarget",
    "NlbTargetGroup",
    "cross_zone",
    "network_load_balancer",
    "read_load_balancer",
    "read_target_group",
    "target_group",
]
