"""The lab's AWS side: the interface every AWS endpoint kind implements for the composed lab.

Role: :class:`AwsSide` is what ``lab.compose.lab.Lab`` and its start steps
(``lab.compose.steps``) know of AWS: start and stop the endpoint, seed (or find) the EC2 world
the nodes live in, reset it between tests, say what it is and which of the lab's AWS features
(``lab.aws.proxied.FEATURES``) it lacks, and hand out the endpoint (``Lab.aws``) whose
clients, ``control`` and ``trail`` the tests use. :class:`AwsStart` carries what a start needs
from the lab.

Implementations, one per ``LabSpec.aws`` value: ``lab.compose.aws_moto`` (the lab's own
moto endpoint, with its ELB health model wired to the cluster), ``lab.compose.aws_localstack``
(a LocalStack behind the recording proxy) and ``lab.compose.aws_real`` (an account, behind the
proxy with the run's guard). ``lab.compose.factory`` picks one by a dict keyed on the value.

Design: the lab used to branch on ``config.aws`` in a dozen places; now it asks its side, as
it asks its cluster provider's ``capabilities()`` instead of the backend's name. A structural
``Protocol`` (no base class), as ``lab.cluster.base.ClusterProvider`` is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from lab.aws import AwsServer
from lab.aws.health.probe import ProbeResult, ProbeTarget
from lab.aws.health.view import ClassicInstance
from lab.aws.proxied import ProxiedAws
from lab.clock import LabClock
from lab.compose.node import LabNode
from lab.compose.world import PlannedNode, World
from lab.settle import Reporter
from lab.spec import LabSpec
from lab.traffic.clusters import NodeAddress

#: what a node answers one of the ELB's health checks (the lab's model of the cluster)
NodeAnswers = Callable[[ClassicInstance, ProbeTarget], ProbeResult]

#: the endpoint the lab hands out: its moto, or the recording proxy in front of another
Endpoint = AwsServer | ProxiedAws


@dataclasses.dataclass(frozen=True)
class AwsStart:
    """What starting the AWS side takes from the lab."""

    #: where the endpoint listens: loopback, or the nodes' gateway with ``expose_to_nodes``
    host: str
    #: the lab's secret: its control planes' bearer token
    token: str
    #: the lab clock the ELB's health checks run on
    clock: LabClock
    #: what the nodes answer the ELB's health checks until real nodes are wired
    node_answers: NodeAnswers


class AwsSide(Protocol):
    """One lab's AWS endpoint and the EC2 world in it. ``stop()`` is idempotent and tolerates
    half a ``start()``."""

    @property
    def endpoint(self) -> Endpoint | None:
        """The running endpoint, None before ``start()`` and after ``stop()``."""
        ...

    @property
    def caller_credentials(self) -> tuple[str, str] | None:
        """The key pair callers (the controller, the lab's clients) sign with, where the
        endpoint accepts only that one (see ``LabState.aws_credentials``); else None."""
        ...

    @property
    def upstream(self) -> str | None:
        """What the recording proxy forwards to (``LabState.aws_upstream``); None on moto."""
        ...

    @property
    def container(self) -> str | None:
        """The LocalStack container this side started (``LabState.localstack_container``)."""
        ...

    @property
    def nodes_unreachable(self) -> str | None:
        """Why this host cannot reach the real nodes the health checks go to, if it cannot."""
        ...

    def start(self, how: AwsStart) -> None: ...

    def stop(self) -> None: ...

    def seed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """The world of a fresh start: ``plan`` seeded (or, in an account, the run's)."""
        ...

    def reseed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """Wipe what can be wiped and seed ``plan`` again (the same ids where the endpoint
        chooses them from the lab's seed)."""
        ...

    def check_reset(self) -> None:
        """Raise ``LabNotReady`` saying why, when this side cannot be reset."""
        ...

    def reset(self, cfg: LabSpec, world: World) -> World:
        """Back to ``world`` as freshly seeded; returns the world now."""
        ...

    def describe(self) -> str:
        """The endpoint in words (messages, skip reasons)."""
        ...

    def lacks(self, features: Sequence[str]) -> dict[str, str]:
        """Which of the lab's AWS ``features`` the endpoint does not have, with the reason."""
        ...

    def wire_real_nodes(self, nodes: Sequence[LabNode], node_address: NodeAddress) -> None:
        """Have the ELB's health checks go to the real nodes (kind), where the side models
        them; ``nodes_unreachable`` says when this host cannot reach them."""
        ...

    def reporters(self) -> list[Reporter]:
        """The side's in-lab components for the settle barrier (``lab.settle``)."""
        ...
