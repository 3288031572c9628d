"""One node of a started lab: :class:`LabNode`, its Kubernetes name beside its EC2 instance.

Role: the composed lab's value type for ``Lab.nodes`` (what ``lab.compose.world`` seeds and the
tests, the daemon and ``lab.state`` read). What shapes a lab is :class:`lab.spec.LabSpec`.
Neighbours: ``lab.compose.world`` (seeding makes the nodes), ``lab.cluster.base`` (the roles).
"""

from __future__ import annotations

import dataclasses

from lab.cluster.base import Role


@dataclasses.dataclass(frozen=True)
class LabNode:
    """One node of the lab: its Kubernetes name and the EC2 instance behind it."""

    name: str
    role: Role
    private_ip: str
    zone: str
    instance_id: str
    private_dns_name: str

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"
