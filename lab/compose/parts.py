"""What one started lab is made of: :class:`LabParts`, the start steps' context.

Role: a started lab's cluster provider, AWS side, metadata service and EC2 world, with the
config and the values every part shares (version, clock, token, state directory). The start
steps (``lab.compose.steps``) read and fill it in order, and undo it in reverse; the lab
(``lab.compose.lab.Lab``) keeps one per start and answers its accessors from it.

Neighbours: ``lab.compose.aws_side`` (the AWS side's interface), ``lab.compose.world`` (the
world), ``lab.cluster`` (the provider), ``lab.imds`` (the metadata service).

Design: the state that used to be a dozen attributes of ``Lab`` set by its private methods is
grouped here, so a step sees exactly what it may touch and ``Lab`` keeps few attributes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from lab.clock import LabClock
from lab.cluster.base import ClusterProvider
from lab.compose.aws_side import AwsSide, Endpoint
from lab.compose.base import LabNotReady
from lab.compose.controller import ControllerSite
from lab.compose.node import LabNode
from lab.compose.world import World
from lab.controllerproc import render_cloud_config
from lab.imds import ImdsServer
from lab.spec import LabSpec
from lab.state import LabState, node_states
from lab.traffic.clusters import NodeAddress
from lab.versions.release import KubeVersion


@dataclasses.dataclass
class LabParts:
    """One started lab's parts (see the module doc)."""

    config: LabSpec
    version: KubeVersion
    state_dir: Path
    clock: LabClock
    token: str
    cluster: ClusterProvider
    aws: AwsSide
    #: where a real request or health check for an instance's port connects (``Lab``'s)
    node_address: NodeAddress
    #: where the endpoints listen: loopback, or the nodes' gateway with expose_to_nodes
    endpoint_host: str = "127.0.0.1"
    imds: ImdsServer | None = None
    world: World = dataclasses.field(default_factory=World)
    #: what the lab changed in a cluster it did not create (backend existing), one line
    #: each: it creates nothing there, and ``stop()`` deletes nothing there
    cluster_changes: list[str] = dataclasses.field(default_factory=list)

    def endpoint(self) -> Endpoint:
        aws = self.aws.endpoint
        if aws is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        return aws

    def running_imds(self) -> ImdsServer:
        if self.imds is None:
            raise LabNotReady("the lab's metadata service is not running (start the lab first)")
        return self.imds

    @property
    def control_plane(self) -> LabNode:
        return self.world.control_plane

    def real_nodes(self) -> bool:
        """Real kubelets answer for the nodes (kind, existing), not the sim's stand-in."""
        caps = self.cluster.capabilities()
        return caps.real_kubelet and not caps.kubelet_stand_in

    @property
    def cloud_config_path(self) -> Path:
        return self.state_dir / "cloud.conf"

    def write_cloud_config(self, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        self.cloud_config_path.write_text(
            render_cloud_config(
                region=self.config.region,
                cluster_id=self.config.cluster_id,
                aws_endpoint=self.endpoint().url,
                extra_global=extra_global,
            ),
            encoding="utf-8",
        )
        return self.cloud_config_path

    def controller_site(self, *, imds: bool, cloud_config: Path | None) -> ControllerSite:
        """Where a controller started now finds this lab (``imds``: told the metadata
        service's URL; ``cloud_config``: another cloud config than the lab's)."""
        return ControllerSite(
            kubeconfig=self.cluster.kubeconfig(),
            cloud_config=cloud_config or self.cloud_config_path,
            log_dir=self.state_dir,
            imds_endpoint=self.running_imds().url if imds else None,
            aws_endpoint=self.endpoint().url,
            region=self.config.region,
            aws_credentials=self.aws.caller_credentials,
        )

    def reset(self) -> None:
        """The world as freshly seeded, the metadata service and the cluster's objects as at
        start, the cloud config rewritten, the trail empty (``Lab.reset``)."""
        aws = self.endpoint()
        before = self.world.instance_ids()
        self.world = self.aws.reset(self.config, self.world)
        after = self.world.instance_ids()
        if after != before:
            raise RuntimeError(
                f"re-seeding {self.aws.describe()} changed the instance ids ({before} -> "
                f"{after}): the Nodes' providerIDs no longer name them; start the lab again"
            )
        self.point_imds_at_control_plane()
        self.cluster.reset_objects()
        self.write_cloud_config()
        aws.control.clear_trail()

    def point_imds_at_control_plane(self) -> None:
        """After a reseed: the metadata service forgets and answers as the control plane."""
        imds = self.running_imds()
        imds.control.reset()
        imds.control.set_default_instance(self.control_plane.instance_id)

    def state(self, directory: Path) -> LabState:
        """The ``state.json`` document for this lab (no daemon or controller yet)."""
        topo = self.world.topology
        aws = self.endpoint()
        return LabState(
            name=self.config.name,
            backend=self.config.backend,
            k8s_version=str(self.version),
            directory=str(directory),
            kubeconfig=str(self.cluster.kubeconfig()),
            cloud_config=str(self.cloud_config_path),
            aws_endpoint=aws.url,
            imds_endpoint=self.running_imds().url,
            kube_endpoint=self.cluster.api_url(),
            token=self.token,
            aws_credentials=self.aws.caller_credentials,
            region=self.config.region,
            cluster_id=self.config.cluster_id,
            vpc_id=topo.vpc_id if topo else None,
            node_security_group=topo.node_security_group.group_id if topo else None,
            nodes=node_states(self.world.nodes),
            aws=self.config.aws,
            aws_upstream=self.aws.upstream,
            localstack_container=self.aws.container,
            cluster_changes=tuple(self.cluster_changes),
        )
