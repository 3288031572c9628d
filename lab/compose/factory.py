"""Which parts a lab's config gets: its cluster provider and its AWS side.

Role: :func:`make_cluster_provider` turns ``config.backend`` and its options into a
``lab.cluster`` provider (sim with the lab's token and clock, kind on the VPC's first subnet,
an existing cluster's kubeconfig); :data:`AWS_SIDES` maps ``config.aws`` to its
``lab.compose.aws_side.AwsSide`` (moto, LocalStack, a real account), which
:func:`make_aws_side` builds; :func:`make_parts` puts both in a lab's
``lab.compose.parts.LabParts``. :func:`with_free_vpc` picks kind's VPC block before either.

Neighbours: ``lab.compose.lab.Lab.start`` calls these once per start; ``lab.cluster.factory``
builds the provider itself.

Design: the only places in the composed lab that look at ``config.backend`` or ``config.aws``
to choose an implementation (``lab.compose.plan`` and the ``align-instances`` step still ask
whether the cluster is an existing one, whose nodes are what it has); both are dispatched by
value, so string values and ``StrEnum`` members work alike.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Callable
from pathlib import Path

from lab.clock import LabClock
from lab.cluster.base import ClusterProvider
from lab.cluster.factory import make_provider
from lab.compose.aws_localstack import LocalStackAws
from lab.compose.aws_moto import MotoAws
from lab.compose.aws_real import RealAccountAws
from lab.compose.aws_side import AwsSide
from lab.compose.parts import LabParts
from lab.compose.world import topology_spec
from lab.spec import AwsKind, Backend, LabSpec
from lab.traffic.clusters import NodeAddress
from lab.versions.dataplane import parse_feature_gates
from lab.versions.release import KubeVersion

#: the AWS side of each ``LabSpec.aws`` value
AWS_SIDES: dict[AwsKind, Callable[[LabSpec], AwsSide]] = {
    AwsKind.MOTO: MotoAws,
    AwsKind.LOCALSTACK: LocalStackAws,
    AwsKind.REAL: RealAccountAws,
}


def make_aws_side(cfg: LabSpec) -> AwsSide:
    return AWS_SIDES[AwsKind(cfg.aws)](cfg)


def make_parts(
    cfg: LabSpec,
    *,
    version: KubeVersion,
    state_dir: Path,
    clock: LabClock,
    token: str,
    node_address: NodeAddress,
) -> LabParts:
    """A lab's parts before its start steps run: the provider and the AWS side chosen."""
    return LabParts(
        config=cfg,
        version=version,
        state_dir=state_dir,
        clock=clock,
        token=token,
        cluster=make_cluster_provider(cfg, state_dir, clock, token=token),
        aws=make_aws_side(cfg),
        node_address=node_address,
    )


def make_cluster_provider(
    cfg: LabSpec, state_dir: Path, clock: LabClock, *, token: str
) -> ClusterProvider:
    if cfg.backend == Backend.SIM:
        secure = not cfg.insecure_api
        return make_provider(
            "sim",
            name=cfg.cluster_name,
            state_dir=state_dir / "cluster",
            clock=clock,
            # HTTPS and the lab's token (both in the kubeconfig) unless told otherwise; /_lab
            # needs the token either way
            simulator_options={
                "tls": secure,
                "token": token if secure else None,
                "control_token": token,
            },
            kubelet_options={"lease_renew_interval": cfg.lease_renew_interval},
            dataplane_options={
                "node_monitor_grace_period": cfg.node_monitor_grace_period,
                "seed": cfg.seed,
                "feature_gates": parse_feature_gates(cfg.feature_gates, cfg.k8s_version),
            },
        )
    if cfg.backend == Backend.EXISTING:
        assert cfg.kubeconfig is not None  # LabSpec checks it
        return make_provider(
            "existing", name=cfg.cluster_name, state_dir=state_dir, kubeconfig=cfg.kubeconfig
        )
    # The nodes join a Docker network whose subnet is the first zone's VPC subnet, container
    # IPs from its upper half (clear of the addresses AWS reserves), so each kubelet's
    # --node-ip is a valid private IP of its instance.
    subnet = ipaddress.ip_network(topology_spec(cfg, ()).subnet_cidrs()[cfg.zones[0]])
    upper = list(subnet.subnets(new_prefix=subnet.prefixlen + 1))[1]
    return make_provider(
        cfg.backend,
        name=cfg.cluster_name,
        state_dir=state_dir / "kind",
        kind_binary=cfg.kind_binary,
        docker_binary=cfg.docker_binary,
        network_subnet=str(subnet),
        network_ip_range=str(upper),
    )


def with_free_vpc(cfg: LabSpec) -> LabSpec:
    """kind: ``cfg`` with the VPC block :func:`free_vpc_cidr` chose; other backends' as is."""
    if cfg.backend != Backend.KIND:
        return cfg
    return dataclasses.replace(cfg, vpc_cidr=free_vpc_cidr(cfg))


def free_vpc_cidr(cfg: LabSpec) -> str:
    """kind: the configured VPC block if it collides with no Docker network or host route
    (else ``NetworkCollision`` naming the collision), or the first free one."""
    from lab.cluster.kind_network import choose_vpc_cidr, docker_blocks, route_blocks
    from lab.exec import SubprocessRunner

    runner = SubprocessRunner()
    used = docker_blocks(runner, cfg.docker_binary) + route_blocks(runner)
    own = f"ccm-lab-{cfg.cluster_name}"  # a lab's own network, when it is reused
    return choose_vpc_cidr(used, wanted=cfg.vpc_cidr, ignore=[own])
