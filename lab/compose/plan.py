"""Which nodes a lab has: the cluster it wants, the nodes it plans, the cluster as seeded.

Role: from a :class:`~lab.spec.LabSpec` to the node list the lab seeds instances
for (``seed-aws``) and provisions (``provision-cluster``): names, roles, zones and IPs
(``lab.cluster.planner``), or, for an existing cluster, the nodes it has, each placed in the
zone whose subnet holds its InternalIP.

Neighbours: ``lab.compose.steps`` calls these; ``lab.compose.world`` gives the subnets
(:func:`~lab.compose.world.topology_spec`); the cluster provider answers ``nodes()`` and
``capabilities()``.

Design: pure functions of the config, the version and what the provider reports, so the start
steps stay a few lines each and planning can be read (and tested) on its own.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Sequence

from lab.cluster.base import ClusterProvider, ClusterSpec, NodeSpec, ProviderID, Role
from lab.cluster.planner import plan_nodes
from lab.compose.node import LabNode
from lab.compose.world import PlannedNode, topology_spec
from lab.spec import Backend, LabSpec
from lab.versions.release import KubeVersion


def wanted_spec(cfg: LabSpec, version: KubeVersion) -> ClusterSpec:
    """The cluster as configured: its name, version and node roles (the first node is the
    control plane); the planner fills in the rest."""
    roles = [Role.CONTROL_PLANE] + [Role.WORKER] * (cfg.nodes - 1)
    return ClusterSpec(
        name=cfg.cluster_name, version=version, nodes=tuple(NodeSpec(role=role) for role in roles)
    )


def seeded_spec(cfg: LabSpec, version: KubeVersion, nodes: Sequence[LabNode]) -> ClusterSpec:
    """The cluster as seeded: every node with its name, IP, zone and providerID."""
    return dataclasses.replace(
        wanted_spec(cfg, version),
        nodes=tuple(
            NodeSpec(
                role=n.role,
                name=n.name,
                ip=n.private_ip,
                zone=n.zone,
                provider_id=ProviderID(n.provider_id) if cfg.provider_ids else None,
            )
            for n in nodes
        ),
    )


def plan(
    cfg: LabSpec, version: KubeVersion, cluster: ClusterProvider
) -> tuple[list[PlannedNode], LabSpec]:
    """Names, roles, zones and IPs of the nodes, and the config with the VPC block they need.
    A backend that assigns IPs itself puts every node on one network: the first zone's subnet.
    An existing cluster's nodes are what it has (:func:`existing_plan`)."""
    if cfg.backend == Backend.EXISTING:
        return existing_plan(cfg, cluster)
    cidrs = topology_spec(cfg, ()).subnet_cidrs()
    zones = cfg.zones[:1] if cluster.capabilities().assigns_node_ips else cfg.zones
    subnets = [(z, cidrs[z]) for z in zones]
    specs = plan_nodes(wanted_spec(cfg, version), subnets=subnets, first_host=10)
    return [(str(n.name), n.role, str(n.ip), str(n.zone)) for n in specs], cfg


def existing_plan(cfg: LabSpec, cluster: ClusterProvider) -> tuple[list[PlannedNode], LabSpec]:
    """An existing cluster's nodes, each in the zone whose subnet holds its InternalIP.
    The VPC is ``vpc_cidr`` or else the /16 holding the first node's address; a cluster
    without a control-plane node has its first node stand for one (the metadata service's
    default instance)."""
    infos = sorted(cluster.nodes(), key=lambda n: (n.role is not Role.CONTROL_PLANE, n.name))
    if not infos:
        raise RuntimeError("the existing cluster has no nodes; the lab seeds one instance per node")
    without_ip = [str(n.name) for n in infos if not n.ip]
    if without_ip:
        raise RuntimeError(f"existing cluster nodes without an InternalIP: {without_ip}")
    if cfg.vpc_cidr is None:
        block = ipaddress.ip_network(f"{infos[0].ip}/16", strict=False)
        cfg = dataclasses.replace(cfg, vpc_cidr=str(block))
    cidrs = {
        zone: ipaddress.ip_network(cidr)
        for zone, cidr in topology_spec(cfg, ()).subnet_cidrs().items()
    }
    planned: list[PlannedNode] = []
    for index, info in enumerate(infos):
        address = ipaddress.ip_address(str(info.ip))
        zone = next((z for z, block in cidrs.items() if address in block), None)
        if zone is None:
            blocks = ", ".join(f"{z} {b}" for z, b in cidrs.items())
            raise RuntimeError(
                f"node {info.name} has InternalIP {info.ip}, outside the lab's zone subnets "
                f"({blocks}); give --vpc-cidr a block whose first /20s hold the nodes"
            )
        role = Role.CONTROL_PLANE if index == 0 else info.role
        planned.append((str(info.name), role, str(info.ip), zone))
    return planned, cfg
