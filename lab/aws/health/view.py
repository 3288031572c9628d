"""What a Classic load balancer does with a request, read from the endpoint's own state.

The traffic probe (``lab/traffic.py``) walks the hops a request takes; the AWS hops (which load
balancer answers a DNS name, which listener takes the port, which instances it may send to and
in which zones) are read here from moto's in-process backends under the endpoint's request
lock, never through the API: the probe's reads must not show up in the trail a user reads, and
must not be affected by the faults a test injects.

The instance view (:class:`ClassicInstance`, :func:`read_instances`) and the readers both kinds
need (a setting's truth, a load-balancer node's modelled address in a subnet, the lookup by DNS
name or name) are here once; :mod:`lab.aws.health.network_view` builds the NLB's view on them.

Neighbours: :mod:`lab.aws.fidelity` (``MotoView``, the same backends),
:mod:`lab.aws.health.seam` (the endpoint's lock). Health (InService/OutOfService) and
security-group verdicts are separate concerns (the health models and the security-group
evaluator); this module only says what is configured.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from lab.aws.fidelity import MotoView
from lab.aws.health.seam import HealthLab, moto_view

V = TypeVar("V")


@dataclass(frozen=True)
class ClassicListener:
    """One listener: the port a client connects to and the instance port it forwards to."""

    port: int
    protocol: str
    instance_port: int
    instance_protocol: str


@dataclass(frozen=True)
class ClassicInstance:
    """A registered instance as the load balancer sees it (zone, address, state)."""

    instance_id: str
    zone: str
    private_ip: str
    state: str
    """EC2 state name (``running``, ``stopped``, ``terminated``...); ``missing`` if gone."""
    groups: tuple[str, ...] = ()
    """The security groups of all its network interfaces (what AWS evaluates)."""


@dataclass(frozen=True)
class ClassicLoadBalancer:
    """A Classic ELB's request path: listeners, registered instances, zones, groups."""

    name: str
    dns_name: str
    scheme: str
    listeners: tuple[ClassicListener, ...]
    instances: tuple[ClassicInstance, ...]
    zones: tuple[str, ...]
    cross_zone: bool
    security_groups: tuple[str, ...]

    def listener(self, port: int) -> ClassicListener | None:
        return next((lst for lst in self.listeners if lst.port == port), None)


def is_true(value: Any) -> bool:
    """An attribute's truth as moto keeps it: ``"true"`` in any case, or a mapping whose
    ``enabled`` (``Enabled``) is."""
    if isinstance(value, Mapping):
        value = value.get("enabled", value.get("Enabled", False))
    return str(value).strip().lower() == "true"


def subnet_node_address(cidr: str) -> str | None:
    """A modelled load-balancer node address in a subnet: its fifth address (AWS reserves the
    first four); None in a subnet too small for one."""
    net = ipaddress.ip_network(cidr, strict=False)
    return str(net.network_address + 4) if net.num_addresses > 5 else None


def _instance(ec2: Any, instance_id: str) -> ClassicInstance:
    try:
        inst = ec2.get_instance(instance_id)
    except Exception:
        return ClassicInstance(instance_id, "", "", "missing")
    return _classic(inst)


def _classic(inst: Any) -> ClassicInstance:
    instance_id = str(inst.id)
    groups: set[str] = set()
    for nic in getattr(inst, "nics", {}).values():
        groups.update(str(g.id) for g in nic.group_set)
    if not groups:
        groups.update(str(g.id) for g in getattr(inst, "security_groups", None) or ())
    return ClassicInstance(
        instance_id=instance_id,
        zone=str(inst.placement.zone or ""),
        private_ip=str(inst.private_ip or ""),
        state=str(inst.state),
        groups=tuple(sorted(groups)),
    )


def read_instances(ec2: Any, instance_ids: Iterable[str]) -> dict[str, ClassicInstance]:
    """Several instances in one pass over moto's reservations (its ``get_instance`` scans
    them all for each id); ids that do not exist map to state ``missing``."""
    wanted = set(instance_ids)
    found = {str(i.id): i for i in ec2.all_instances() if str(i.id) in wanted}
    return {
        iid: _classic(found[iid]) if iid in found else ClassicInstance(iid, "", "", "missing")
        for iid in wanted
    }


def _view(moto: MotoView, lb: Any) -> ClassicLoadBalancer:
    known = read_instances(moto.ec2, lb.instance_ids)
    listeners = tuple(
        ClassicListener(
            port=int(lst.load_balancer_port),
            protocol=str(lst.protocol).upper(),
            instance_port=int(lst.instance_port),
            instance_protocol=str(getattr(lst, "instance_protocol", None) or lst.protocol).upper(),
        )
        for lst in lb.listeners
    )
    return ClassicLoadBalancer(
        name=str(lb.name),
        dns_name=str(lb.dns_name),
        scheme=str(lb.scheme),
        listeners=listeners,
        instances=tuple(known[i] for i in dict.fromkeys(lb.instance_ids)),
        zones=tuple(str(z) for z in lb.availability_zones or ()),
        cross_zone=is_true(lb.attributes.get("cross_zone_load_balancing")),
        security_groups=tuple(str(g) for g in lb.security_groups),
    )


def classic_zones(ec2: Any, lb: Any) -> set[str]:
    """The zones a Classic load balancer serves: its subnets' zones (VPC), or the zones it was
    created with (moto leaves ``availability_zones`` empty for one created with ``Subnets``)."""
    zones = {str(z) for z in lb.availability_zones or ()}
    for subnet_id in list(getattr(lb, "subnets", None) or ()):
        try:
            zones.add(str(ec2.get_subnet(subnet_id).availability_zone))
        except Exception:
            continue
    return zones


def classic_node_address(ec2: Any, lb: Any) -> str | None:
    """A Classic load balancer's modelled node address: in its first subnet that has one."""
    for subnet_id in list(getattr(lb, "subnets", None) or ()):
        try:
            cidr = ec2.get_subnet(subnet_id).cidr_block
        except Exception:
            continue
        address = subnet_node_address(str(cidr))
        if address is not None:
            return address
    return None


def draining_timeout(lb: Any) -> float | None:
    """A Classic load balancer's connection-draining timeout; None when draining is off."""
    draining = lb.attributes.get("connection_draining") or {}
    if not is_true(draining):
        return None
    # moto keeps the API's "Timeout" from ModifyLoadBalancerAttributes and adds its own
    # lower-case "timeout" default beside it
    return float(draining.get("Timeout", draining.get("timeout", 300)) or 0)


def find_load_balancer(
    aws: HealthLab,
    *,
    dns_name: str | None,
    name: str | None,
    candidates: Callable[[MotoView], Iterable[Any]],
    read: Callable[[MotoView, Any], V],
) -> V | None:
    """The first of ``candidates`` answering ``dns_name`` (or called ``name``), ``read``;
    ``None`` if none. DNS names compare case-insensitively and without a trailing dot, as DNS
    does."""
    if (dns_name is None) == (name is None):
        raise ValueError("give exactly one of dns_name and name")
    wanted = (dns_name or "").rstrip(".").lower()
    with aws.lock:
        moto = moto_view(aws)
        for lb in list(candidates(moto)):
            if name is not None and lb.name == name:
                return read(moto, lb)
            if dns_name is not None and str(lb.dns_name).rstrip(".").lower() == wanted:
                return read(moto, lb)
    return None


def classic_load_balancer(
    aws: HealthLab, *, dns_name: str | None = None, name: str | None = None
) -> ClassicLoadBalancer | None:
    """The Classic load balancer answering ``dns_name`` (or called ``name``); ``None`` if none.

    DNS names compare case-insensitively and without a trailing dot, as DNS does.
    """
    return find_load_balancer(
        aws,
        dns_name=dns_name,
        name=name,
        candidates=lambda moto: moto.elb.load_balancers.values(),
        read=_view,
    )


def instance(aws: HealthLab, instance_id: str) -> ClassicInstance:
    """One instance's zone, private address and state (``missing`` if it does not exist)."""
    with aws.lock:
        return _instance(moto_view(aws).ec2, instance_id)
