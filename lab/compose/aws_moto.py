"""The lab's own AWS endpoint as its AWS side: moto with the fidelity layer and the ELB model.

Role: :class:`MotoAws` implements ``lab.compose.aws_side.AwsSide`` for ``aws="moto"``: it starts
``lab.aws.AwsServer`` in a thread, runs the ELB's health checks on the lab clock asking the
cluster what each node answers (the sim's modelled kube-proxy; on kind, real requests to the
node containers, :meth:`MotoAws.wire_real_nodes`), seeds the topology with moto's id generator
seeded first and checkpoints it, so a reset restores it in one copy.

Neighbours: ``lab.compose.world`` (seeding), ``lab.aws.health.probe`` (the background network
answers), ``lab.compose.aws_localstack`` and ``lab.compose.aws_real`` (the other sides).

Design: every moto-only branch of the old ``Lab`` (health wiring, checkpoint and restore, the
seeded id generator) lives here, so the lab never asks which endpoint it has.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence

from lab.aws import AwsServer
from lab.aws.health.probe import BackgroundAnswers, NetworkAnswers
from lab.aws.health.view import ClassicInstance
from lab.compose.aws_side import AwsStart, Endpoint
from lab.compose.base import LabNotReady
from lab.compose.node import LabNode
from lab.compose.world import PlannedNode, World, seed_world
from lab.settle import Reporter
from lab.spec import LabSpec
from lab.traffic.clusters import NodeAddress

log = logging.getLogger(__name__)

#: a kind node always listens here (the kubelet): the host-to-node reachability probe
KUBELET_PORT = 10250


class MotoAws:
    """``aws="moto"``: the lab's own endpoint (see the module doc)."""

    caller_credentials: tuple[str, str] | None = None
    container: str | None = None
    upstream: str | None = None

    def __init__(self, cfg: LabSpec) -> None:
        self.cfg = cfg
        self.server: AwsServer | None = None
        #: real health checks to the node containers (kind), run off the endpoint's lock
        self._network_answers: BackgroundAnswers | None = None
        #: why the host cannot reach the real nodes (kind on Docker Desktop), if it cannot
        self.nodes_unreachable: str | None = None
        #: the plan whose freshly seeded moto state the endpoint holds as its checkpoint
        self._seeded: tuple[PlannedNode, ...] | None = None

    @property
    def endpoint(self) -> Endpoint | None:
        return self.server

    def _running(self) -> AwsServer:
        if self.server is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        return self.server

    def start(self, how: AwsStart) -> None:
        self.server = AwsServer(
            region=self.cfg.region,
            seed=self.cfg.seed,
            host=how.host,
            clock_speed=self.cfg.clock_speed,
            token=how.token,
        )
        self.server.start()
        self.server.control.reset()  # moto's state is process-wide: an earlier Lab's is here
        # The ELB's health checks run on the lab's clock, ask the cluster what each node
        # answers, and are evaluated in the background so transitions are logged as they come.
        health = self.server.lab.elb_health
        health.clock = how.clock
        health.set_node_answers(how.node_answers)  # real nodes: wire_real_nodes
        health.start_ticker(1.0)

    def stop(self) -> None:
        if self._network_answers is not None:
            self._network_answers.close()
            self._network_answers = None
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def seed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """Seed the topology for ``plan``. moto's id generator is re-seeded first, so every
        seeding (start and each reset) yields the same ids: the Nodes' providerIDs, immutable
        once set, keep naming the right instances."""
        server = self._running()
        ec2 = server.client("ec2")
        ec2.describe_vpcs()  # moto builds a region's default VPC lazily: do it before seeding
        server.control.seed(cfg.seed)
        self._seeded = None
        world = seed_world(ec2, cfg, plan)
        server.control.checkpoint()  # what reset() restores
        self._seeded = tuple(plan)
        return world

    def reseed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        self._running().control.reset()
        return self.seed(cfg, plan)

    def check_reset(self) -> None:
        """moto can always be reset."""

    def reset(self, cfg: LabSpec, world: World) -> World:
        plan = world.plan()
        if self._seeded == tuple(plan):
            # moto as it was right after seeding this plan: the same world and ids as wiping
            # and seeding again, in one copy instead of ~30 calls
            self._running().control.restore()
            return world
        return self.reseed(cfg, plan)

    def describe(self) -> str:
        if self.server is None:
            return "no AWS endpoint"
        return f"the lab's moto endpoint at {self.server.url}"

    def lacks(self, features: Sequence[str]) -> dict[str, str]:
        self._running()
        return {}

    def reporters(self) -> list[Reporter]:
        return [self.server.lab] if self.server is not None else []

    def wire_real_nodes(self, nodes: Sequence[LabNode], node_address: NodeAddress) -> None:
        """On a backend with real nodes (kind) the node containers answer the ELB's health
        checks themselves: real requests to each instance's private address (the container's
        IP), made off the endpoint's lock. Where the host cannot reach the node network
        (Docker Desktop on macOS or Windows: the containers' IPs live inside its VM), checks
        keep saying a running instance answers, and the log says so."""
        if not nodes:
            return
        first = nodes[0]
        probe = ClassicInstance(first.instance_id, first.zone, first.private_ip, "running")
        host, port = node_address(probe, KUBELET_PORT)
        try:
            with socket.create_connection((host, port), timeout=2.0):
                pass
        except OSError as exc:
            log.warning(
                "the node network is not reachable from this host (%s:%s: %s): the ELB's health "
                "checks say a running instance answers, and lab.traffic cannot send requests",
                host,
                port,
                exc,
            )
            self.nodes_unreachable = f"{host}:{port}: {exc}"
            return
        self._network_answers = BackgroundAnswers(
            NetworkAnswers(lambda i, t: node_address(i, t.target.port), timeout=2.0)
        )
        self._running().lab.elb_health.set_node_answers(self._network_answers)
