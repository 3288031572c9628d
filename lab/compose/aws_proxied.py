"""What the two AWS sides behind the recording proxy share (LocalStack, a real account).

Role: :class:`ProxiedSide` is the part of ``lab.compose.aws_side.AwsSide`` that is the same for
every endpoint the lab does not own: the proxy (``lab.aws.proxied.ProxiedAws``) is the endpoint
the lab hands out, it says itself what it lacks and how it is called, it holds no ELB model
(so there are no health checks to wire and nothing for the settle barrier), and seeding goes
through it like any EC2 client.

Neighbours: subclassed by ``lab.compose.aws_localstack`` and ``lab.compose.aws_real``; the
lab's own moto (``lab.compose.aws_moto``) needs none of this.

Design: a small base class rather than copies: the two sides differ only in how the upstream
is reached and what may be created or deleted there.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.aws.proxied import ProxiedAws
from lab.compose.aws_side import Endpoint
from lab.compose.base import LabNotReady
from lab.compose.node import LabNode
from lab.compose.world import PlannedNode, World, seed_world
from lab.settle import Reporter
from lab.spec import LabSpec
from lab.traffic.clusters import NodeAddress


class ProxiedSide:
    """The shared half of an AWS side behind the recording proxy."""

    caller_credentials: tuple[str, str] | None = None
    container: str | None = None
    nodes_unreachable: str | None = None

    def __init__(self, cfg: LabSpec) -> None:
        self.cfg = cfg
        self.proxy: ProxiedAws | None = None

    @property
    def endpoint(self) -> Endpoint | None:
        return self.proxy

    @property
    def upstream(self) -> str | None:
        return self._running().upstream

    def _running(self) -> ProxiedAws:
        if self.proxy is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        return self.proxy

    def seed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """Seed ``plan``: the upstream chooses the ids; the topology is found again by its
        tags (creating only what is missing)."""
        ec2 = self._running().client("ec2")
        ec2.describe_vpcs()
        return seed_world(ec2, cfg, plan)

    def describe(self) -> str:
        return self.proxy.describe if self.proxy is not None else "no AWS endpoint"

    def lacks(self, features: Sequence[str]) -> dict[str, str]:
        return self._running().missing(tuple(features))

    def reporters(self) -> list[Reporter]:
        return []

    def wire_real_nodes(self, nodes: Sequence[LabNode], node_address: NodeAddress) -> None:
        """The ELB model, whose health checks would go to the nodes, is moto's: nothing here."""
