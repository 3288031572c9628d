"""One call's requests, hop by hop: what the Classic ELB and NLB paths share.

Role: a :class:`Walk` holds what every request of one ``send`` sees (the gates, the cluster side,
the Nodes read once per call, the seeded random source, the client) and ends a request that got
past the instance's security groups at its node (:meth:`Walk.deliver`); :func:`walk_requests`
runs a path's per-request function ``report.requests`` times and counts answers, drops and the
instances picked.

Neighbours: ``lab.traffic.classic`` and ``lab.traffic.nlb`` (the hops before the node),
``lab.traffic.probe`` (builds the walk), ``lab.traffic.clusters`` (the node's side). Design: the
load balancer's hops differ, the bookkeeping and the last hop do not; one copy of each.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lab.aws.app import AwsLab
from lab.aws.health.view import ClassicInstance
from lab.dataplane.kubeproxy import Drop, PodTarget
from lab.kube.objects import Obj
from lab.traffic.clusters import ClusterSide, node_of
from lab.traffic.report import Gates, TrafficReport

#: The client of the next request: its address and security groups.
Client = tuple[str, tuple[str, ...]]


@dataclass
class Walk:
    """What the requests of one call share (one lab instant)."""

    aws: AwsLab
    gates: Gates
    cluster: ClusterSide
    rng: random.Random
    namespace: str
    #: draws the next request's client (a node's, or an address of ``--from``'s CIDR)
    client: Callable[[], Client]
    #: the cluster's Nodes, read once per call by :meth:`read_nodes` (not per request)
    nodes: list[Obj] = field(default_factory=list)

    def read_nodes(self) -> None:
        self.nodes = self.cluster.node_objects()

    def deliver(self, inst: ClassicInstance, port: int) -> PodTarget | Drop:
        """The last hop: the request reached ``inst`` on ``port``; its node's fate for it."""
        node = node_of(self.nodes, inst.instance_id)
        if node is None:
            return Drop(
                "node", f"{inst.instance_id} is no node of the cluster (no Node has its providerID)"
            )
        return self.cluster.deliver(inst, node, port, namespace=self.namespace, rng=self.rng)


class Picker(Protocol):
    """A load balancer's choice of instance; ``last``: the one picked for the latest request."""

    last: str | None


def walk_requests(
    report: TrafficReport,
    walk: Walk,
    pick: Picker,
    one: Callable[[str, tuple[str, ...]], PodTarget | Drop],
) -> None:
    """Send ``report.requests`` requests through ``one`` (a path's hops for one client) and
    count who answered, what was dropped where, and which instance each went to."""
    for _ in range(report.requests):
        client_ip, client_groups = walk.client()
        hop = one(client_ip, client_groups)
        if isinstance(hop, PodTarget):
            report.answered[f"{hop.namespace}/{hop.name}"] += 1
        else:
            report.drop(hop.hop, hop.reason)
        if pick.last is not None:
            report.instances[pick.last] += 1
