"""The EC2 world a lab's nodes live in: the topology and the nodes seeded into it.

Role: :class:`World` is what the ``seed-aws`` start step leaves behind (the VPC, subnets and
security group of ``lab.aws.topology`` plus one :class:`~lab.compose.node.LabNode` per
instance); :func:`seed_world` seeds one for a plan through any EC2 endpoint, and
:func:`topology_spec` says what the topology of a config is.

Neighbours: the AWS sides (``lab.compose.aws_moto``, ``aws_localstack``, ``aws_real``) seed or
read their world with these; ``lab.compose.plan`` asks :func:`topology_spec` for the subnets
to plan node IPs in; ``lab.compose.lab`` hands the world out as ``Lab.topology`` and
``Lab.nodes``.

Design: one value for the world instead of two attributes the lab kept in step by hand, so a
reseed replaces both at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lab.aws.seeding import seed_topology
from lab.aws.topology import NodeSpec as AwsNodeSpec
from lab.aws.topology import Topology, TopologySpec
from lab.cluster.base import Role
from lab.compose.node import LabNode
from lab.spec import LabSpec

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

#: one planned node: name, role, private IP, zone
PlannedNode = tuple[str, Role, str, str]


@dataclasses.dataclass(frozen=True)
class World:
    """The seeded topology and the lab's nodes in it (none before ``seed-aws``)."""

    topology: Topology | None = None
    nodes: list[LabNode] = dataclasses.field(default_factory=list)

    def plan(self) -> list[PlannedNode]:
        """The plan these nodes were seeded from (what a reset seeds again)."""
        return [(n.name, n.role, n.private_ip, n.zone) for n in self.nodes]

    def instance_ids(self) -> dict[str, str]:
        return {n.name: n.instance_id for n in self.nodes}

    @property
    def control_plane(self) -> LabNode:
        return next(n for n in self.nodes if n.role is Role.CONTROL_PLANE)

    @property
    def workers(self) -> list[LabNode]:
        return [n for n in self.nodes if n.role is Role.WORKER]

    def node(self, name: str) -> LabNode:
        for n in self.nodes:
            if n.name == name:
                return n
        known = ", ".join(n.name for n in self.nodes)
        raise KeyError(f"no lab node {name!r}; the lab has: {known}")


def topology_spec(cfg: LabSpec, nodes: Sequence[AwsNodeSpec]) -> TopologySpec:
    spec = TopologySpec(
        cluster_id=cfg.cluster_id, region=cfg.region, zones=cfg.zones, nodes=tuple(nodes)
    )
    return dataclasses.replace(spec, vpc_cidr=cfg.vpc_cidr) if cfg.vpc_cidr else spec


def seed_world(ec2: EC2Client, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
    """Seed the topology for ``plan`` through ``ec2`` (an endpoint whose ids are its own; the
    lab's moto seeds its id generator first, ``lab.compose.aws_moto``)."""
    spec = topology_spec(
        cfg, [AwsNodeSpec(name=name, private_ip=ip, zone=zone) for name, _role, ip, zone in plan]
    )
    topology = seed_topology(ec2, spec)
    nodes = []
    for name, role, ip, zone in plan:
        inst = topology.instances[name]
        nodes.append(
            LabNode(
                name=name,
                role=role,
                private_ip=ip,
                zone=zone,
                instance_id=inst.instance_id,
                private_dns_name=inst.private_dns_name,
            )
        )
    return World(topology=topology, nodes=nodes)
