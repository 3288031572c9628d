"""The lab's start steps, each a small ``execute``/``undo`` pair over :class:`LabParts`.

Role: ``Lab.start`` runs :func:`start_steps` with ``lab.cluster.steps.StepRun`` (kind's
``create/actions``: in order, undone in reverse when one fails, undone all by ``Lab.stop``):

1. ``prepare-cluster``: what must exist before the endpoints (kind: the nodes' Docker network);
2. ``start-aws``: the AWS side (``lab.compose.aws_side``), on loopback or, with
   ``expose_to_nodes``, where the nodes reach the host; its ELB health checks ask the sim's
   data plane what a node answers;
3. ``seed-aws``: the EC2 world the nodes live in, one instance per planned node
   (``lab.compose.plan``); a real account's run is read back instead;
4. ``start-imds``: the metadata service whose default instance is the control plane's;
5. ``provision-cluster``: the cluster provider creates the cluster with every node's name, IP
   and providerID (an existing cluster is only checked);
6. ``align-instances``: where the backend assigns node IPs (Docker on kind), the instances are
   seeded again with the IPs the nodes got and providerIDs still empty are set;
7. ``wire-health-checks``: with real nodes, the ELB's health checks go to them;
8. ``write-cloud-config``, then the provider remembers the cluster as reset restores it.

Neighbours: ``lab.compose.parts`` (the context), ``lab.compose.plan``, ``lab.compose.lab``.

Design: one class per step in one place instead of lambdas over ``Lab``'s private methods;
undo methods tolerate a step that ran half (or not at all).
"""

from __future__ import annotations

import logging
from typing import Any

from lab.aws.health.probe import ProbeResult, ProbeTarget, running_answers
from lab.aws.health.view import ClassicInstance
from lab.cluster.sim import SimProvider
from lab.cluster.steps import Step
from lab.compose.aws_side import AwsStart, NodeAnswers
from lab.compose.parts import LabParts
from lab.compose.plan import plan, seeded_spec, wanted_spec
from lab.imds import ImdsServer
from lab.spec import Backend
from lab.traffic.clusters import ModelledCluster

log = logging.getLogger(__name__)


class PrepareCluster:
    name = "prepare-cluster"

    def execute(self, ctx: LabParts) -> None:
        ctx.cluster.prepare(wanted_spec(ctx.config, ctx.version))

    def undo(self, ctx: LabParts) -> None:
        ctx.cluster.delete()


def modelled_answers(ctx: LabParts) -> NodeAnswers:
    """What a node answers the ELB's health checks: the sim data plane's kube-proxy (read
    anew each time: a reset replaces the data plane); without one, a running instance."""
    cluster = ctx.cluster

    def answer(inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        plane = cluster.dataplane if isinstance(cluster, SimProvider) else None
        if plane is None:
            return running_answers(inst, target)
        return ModelledCluster(plane).answer_health_check(inst, target)

    return answer


class StartAws:
    name = "start-aws"

    def execute(self, ctx: LabParts) -> None:
        if ctx.config.expose_to_nodes:
            ctx.endpoint_host = ctx.cluster.host_address()
        ctx.aws.start(
            AwsStart(
                host=ctx.endpoint_host,
                token=ctx.token,
                clock=ctx.clock,
                node_answers=modelled_answers(ctx),
            )
        )

    def undo(self, ctx: LabParts) -> None:
        ctx.aws.stop()


class SeedAws:
    name = "seed-aws"

    def execute(self, ctx: LabParts) -> None:
        planned, ctx.config = plan(ctx.config, ctx.version, ctx.cluster)
        ctx.world = ctx.aws.seed(ctx.config, planned)

    def undo(self, ctx: LabParts) -> None:
        """Stopping the AWS side takes the world with it (or leaves the run's)."""


class StartImds:
    name = "start-imds"

    def execute(self, ctx: LabParts) -> None:
        ctx.imds = ImdsServer(
            ctx.endpoint().url,
            ctx.config.region,
            instance_id=ctx.control_plane.instance_id,
            host=ctx.endpoint_host,
            token=ctx.token,
            aws_credentials=ctx.aws.caller_credentials,
        )
        ctx.imds.start()

    def undo(self, ctx: LabParts) -> None:
        if ctx.imds is not None:
            ctx.imds.stop()
            ctx.imds = None


class ProvisionCluster:
    name = "provision-cluster"

    def execute(self, ctx: LabParts) -> None:
        ctx.cluster.provision(seeded_spec(ctx.config, ctx.version, ctx.world.nodes))

    def undo(self, ctx: LabParts) -> None:
        ctx.cluster.delete()


class AlignInstances:
    """Where the backend chose the node IPs, seed the instances again with them (same ids),
    and give nodes that still have no providerID theirs."""

    name = "align-instances"

    def execute(self, ctx: LabParts) -> None:
        if not ctx.cluster.capabilities().assigns_node_ips:
            return
        self.reseed_with_actual_ips(ctx)
        if ctx.config.provider_ids:
            self.set_provider_ids(ctx)

    def undo(self, ctx: LabParts) -> None:
        """Nothing of its own: the AWS side and the cluster are undone by their steps."""

    @staticmethod
    def reseed_with_actual_ips(ctx: LabParts) -> None:
        nodes = ctx.world.nodes
        actual = {str(info.name): info for info in ctx.cluster.nodes()}
        missing = sorted(n.name for n in nodes if n.name not in actual or not actual[n.name].ip)
        if missing:
            raise RuntimeError(f"cluster nodes without an IP on the lab network: {missing}")
        if all(actual[n.name].ip == n.private_ip for n in nodes):
            return
        before = ctx.world.instance_ids()
        ctx.world = ctx.aws.reseed(
            ctx.config, [(n.name, n.role, str(actual[n.name].ip), n.zone) for n in nodes]
        )
        after = ctx.world.instance_ids()
        if after != before:
            raise RuntimeError(f"re-seeding changed the instance ids: {before} -> {after}")
        ctx.point_imds_at_control_plane()

    @staticmethod
    def set_provider_ids(ctx: LabParts) -> None:
        from kubernetes import client

        core: Any = client.CoreV1Api(ctx.cluster.api_client())
        existing = ctx.config.backend == Backend.EXISTING
        for node in ctx.world.nodes:
            current = core.read_node(node.name).spec.provider_id
            if not current:
                core.patch_node(node.name, {"spec": {"providerID": node.provider_id}})
                if existing:  # immutable once set: said, since nothing can take it back
                    ctx.cluster_changes.append(
                        f"node {node.name}: spec.providerID set to {node.provider_id} "
                        "(immutable once set)"
                    )
            elif existing and current != node.provider_id:
                log.warning(
                    "node %s keeps its providerID %s, not the lab's instance %s: the "
                    "controller will not find it in the lab's AWS",
                    node.name,
                    current,
                    node.instance_id,
                )
                ctx.cluster_changes.append(
                    f"node {node.name}: keeps spec.providerID {current} (not a lab instance; "
                    "the controller will not find it)"
                )


class WireHealthChecks:
    name = "wire-health-checks"

    def execute(self, ctx: LabParts) -> None:
        if ctx.real_nodes() and not ctx.aws.lacks(("elb-model",)):
            ctx.aws.wire_real_nodes(ctx.world.nodes, ctx.node_address)

    def undo(self, ctx: LabParts) -> None:
        """The AWS side's stop closes what this wired."""


class WriteCloudConfig:
    name = "write-cloud-config"

    def execute(self, ctx: LabParts) -> None:
        ctx.write_cloud_config()
        ctx.cluster.baseline()

    def undo(self, ctx: LabParts) -> None:
        """The file goes with the state directory."""


def start_steps() -> list[Step[LabParts]]:
    return [
        PrepareCluster(),
        StartAws(),
        SeedAws(),
        StartImds(),
        ProvisionCluster(),
        AlignInstances(),
        WireHealthChecks(),
        WriteCloudConfig(),
    ]
