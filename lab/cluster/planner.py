"""The one node planner: kind's names, zones round robin, addresses from each zone's subnet.

Every backend names nodes the way kind does (``<cluster>-control-plane``, ``<cluster>-worker``,
``<cluster>-worker2`` …) so a scenario reads the same on sim and on kind. Each node gets a zone
(round robin over the lab's zones, the control plane in the first) and, where the spec leaves it
open, an address from that zone's subnet: host number ``first_host`` upward, skipping addresses
already taken. The lab plans with its VPC subnets (``first_host=10``, clear of the five
addresses AWS reserves per subnet); the sim provider alone plans with its own node subnet
(``first_host=2``, as Docker hands out addresses on kind's network). On kind the IPs planned
here are what the lab seeds first; Docker assigns the real ones and the lab aligns its
instances with them (``lab.compose``).

Neighbours: ``lab.cluster.base`` (the spec types), ``lab.cluster.kind_config`` (kind's namer).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterator, Sequence

from lab.cluster.base import ClusterSpec, NodeSpec
from lab.cluster.kind_config import kind_node_names


def _free_hosts(cidr: str, first_host: int, taken: set[str]) -> Iterator[str]:
    network = ipaddress.ip_network(cidr)
    base = int(network.network_address)
    for host in network.hosts():
        if int(host) - base >= first_host and str(host) not in taken:
            yield str(host)


def plan_nodes(
    spec: ClusterSpec,
    *,
    subnets: Sequence[tuple[str | None, str]],
    first_host: int = 10,
) -> list[NodeSpec]:
    """``spec.nodes`` with every name, zone and IP filled in.

    ``subnets`` is ``(zone, CIDR)`` per zone, in the order nodes are spread over them (a zone of
    None: the nodes get no zone). Raises ``ValueError`` naming the node when names repeat, a
    given IP is not an address, or a subnet runs out of addresses.
    """
    if not subnets:
        raise ValueError("plan_nodes needs at least one (zone, subnet)")
    names = kind_node_names(spec.name, [n.role for n in spec.nodes])
    taken: set[str] = set()
    for i, node in enumerate(spec.nodes):
        if node.ip is not None:
            try:
                taken.add(str(ipaddress.ip_address(node.ip)))
            except ValueError:
                raise ValueError(
                    f"cluster {spec.name!r}: nodes[{i}].ip={node.ip!r} is not an IP address"
                ) from None
    free = {zone: _free_hosts(cidr, first_host, taken) for zone, cidr in subnets}
    zones = [zone for zone, _ in subnets]
    planned: list[NodeSpec] = []
    for i, (node, default_name) in enumerate(zip(spec.nodes, names, strict=True)):
        zone = node.zone if node.zone is not None else zones[i % len(zones)]
        ip = node.ip
        if ip is None:
            if zone not in free:
                raise ValueError(f"cluster {spec.name!r}: nodes[{i}].zone={zone!r} has no subnet")
            ip = next(free[zone], None)
            if ip is None:
                raise ValueError(
                    f"cluster {spec.name!r}: the subnet of zone {zone!r} has no address left "
                    f"for nodes[{i}]"
                )
            taken.add(ip)
        planned.append(dataclasses.replace(node, name=node.name or default_name, ip=ip, zone=zone))
    planned_names = [str(n.name) for n in planned]
    repeated = sorted({n for n in planned_names if planned_names.count(n) > 1})
    if repeated:
        raise ValueError(f"cluster {spec.name!r}: node names repeat: {repeated}")
    return planned
