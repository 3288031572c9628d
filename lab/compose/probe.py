"""The lab's traffic probe, built over whichever cluster side the lab has.

Role: :func:`traffic_probe` is ``Lab.traffic``'s body: where requests to a LoadBalancer Service
go, hop by hop (``lab.traffic``), through the lab's ELB model and either the sim's data plane
(modelled) or, with real kubelets (kind), real requests to the nodes.

Neighbours: ``lab.compose.lab`` (``Lab.traffic``, ``Lab.traffic_probe``), ``lab.compose.parts``
(what it reads), ``lab.traffic`` (the probe), ``lab.aws.gates`` (security groups and NACLs).

Design: ``Lab.traffic`` works on every backend with the lab's moto, so it stays on ``Lab``;
only its building lives here, asking the AWS side and the provider's capabilities, never the
backend's name.
"""

from __future__ import annotations

from collections.abc import Callable

from lab.aws.gates import AwsGates
from lab.aws.proxied import FEATURES
from lab.cluster.sim import SimProvider
from lab.compose.base import LabNotReady
from lab.compose.parts import LabParts
from lab.dataplane.api import Api
from lab.traffic.clusters import NodeAddress, RealCluster
from lab.traffic.probe import TrafficProbe
from lab.traffic.report import Gate


def traffic_probe(
    parts: LabParts, *, node_address: NodeAddress, settle: Callable[[], object] | None
) -> TrafficProbe:
    """A probe of ``parts``; ``settle`` runs before each question (None: the lab as it is)."""
    parts.endpoint()  # not running: LabNotReady
    missing = parts.aws.lacks(("elb-model",))
    if missing:
        raise LabNotReady(f"lab.traffic needs {FEATURES['elb-model']}: {missing['elb-model']}")
    aws = parts.endpoint().lab
    gates = AwsGates(aws, gate=Gate)
    if parts.real_nodes():
        if parts.aws.nodes_unreachable is not None:
            raise LabNotReady(
                "lab.traffic sends real requests to the nodes, and this host cannot reach "
                f"the node network ({parts.aws.nodes_unreachable})"
            )
        cluster = RealCluster(Api(parts.cluster.api_client()), address_of=node_address)
        return TrafficProbe(aws=aws, gates=gates, cluster=cluster, settle=settle)
    sim = parts.cluster
    plane = sim.dataplane if isinstance(sim, SimProvider) else None
    if plane is None:
        raise LabNotReady(f"the {parts.config.backend} lab runs without a sim data plane")
    return TrafficProbe(aws=aws, gates=gates, dataplane=plane, settle=settle)
