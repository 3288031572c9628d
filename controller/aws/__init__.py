"""The AWS cloud provider: the only place in ``controller/`` that imports boto3.

Entry point for the CLI and the generic controllers: :func:`new_cloud` resolves the
controller's own identity (instance metadata, or the off-cluster "dummy self instance" when the
cloud config names Region, VPC, SubnetID and KubernetesClusterID), builds boto3 clients
(endpoints from ``[ServiceOverride]`` or the standard ``AWS_ENDPOINT_URL*`` variables) and
returns an :class:`AWSCloud` implementing ``controller.cloud.Cloud``.

Layout, by capability: ``config`` (cloud config), ``annotations`` (Service validation),
``sgrules`` (rule arithmetic), ``securitygroups``, ``subnets``, ``loadbalancer`` (Classic ELB),
``nlbspec`` / ``nlbrules`` / ``targets`` / ``nlb`` (Network Load Balancers), ``instances``
(InstancesV2) with ``batch`` (DescribeInstances by id, batched) and ``providerid`` (node
names and providerIDs to instance ids), ``tags`` (every tag rule: the cluster's ownership tags
and the node instance tags of the tagging controller), ``metadata`` (IMDS), ``clients``,
``context``.
Start-up failures raise :class:`CloudInitError` with a message saying what was tried and what to
do; nothing here knows whether it talks to AWS or to a lab.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from controller.aws.annotations import load_balancer_kind, status_kind
from controller.aws.clients import AWSError, CallObserver, Clients, make_clients, observe_calls
from controller.aws.config import CloudConfig, CloudConfigError, load_cloud_config
from controller.aws.context import AWSContext
from controller.aws.instances import AWSInstances, InstanceCache
from controller.aws.loadbalancer import ClassicLoadBalancers
from controller.aws.metadata import MetadataError, fetch_self_identity, metadata_endpoint
from controller.aws.nlb import NetworkLoadBalancers
from controller.aws.securitygroups import SecurityGroups
from controller.aws.subnets import Subnets
from controller.aws.tags import AWSInstanceTags, ClusterTags, find_cluster_ids, tag_map
from controller.cloud import InvalidServiceConfig, LoadBalancerStatus, Node, Service
from controller.legacy import LegacyFlags

__all__ = [
    "AWSCloud",
    "CloudConfig",
    "CloudConfigError",
    "CloudInitError",
    "load_cloud_config",
    "new_cloud",
]

log = logging.getLogger(__name__)

DUMMY_SELF_INSTANCE = "master-dummy"


class CloudInitError(Exception):
    """The AWS provider cannot start (no metadata, no self instance, no cluster id)."""


class LoadBalancers:
    """``controller.cloud.LoadBalancer`` for AWS: each Service to the Classic ELB or the NLB
    path by its ``aws-load-balancer-type`` annotation, as upstream's ``isNLB`` branches.

    Reads and deletion never fail on a malformed type value (it is read as Classic, which is
    what upstream does with every value but ``nlb``); ensure and update refuse it. Deletion
    follows the Service's status when it names a load balancer: a Service whose type
    annotation was changed after creation (which ensure refuses) still has its NLB, or its
    Classic ELB, deleted; upstream goes by the annotation and leaks it."""

    def __init__(self, classic: ClassicLoadBalancers, nlb: NetworkLoadBalancers) -> None:
        self.classic = classic
        self.nlb = nlb
        self._wave = classic.ctx.wave

    # -- sync waves (``controller.cloud.SyncWaves``; see ``controller.aws.wave``) ----------
    def begin_wave(self, size: int) -> None:
        self._wave.begin(size)

    def grow_wave(self, was: int, now: int) -> None:
        self._wave.grow(was, now)

    def end_wave(self, size: int) -> None:
        self._wave.end(size)

    def _for(
        self, service: Service, *, strict: bool
    ) -> ClassicLoadBalancers | NetworkLoadBalancers:
        try:
            kind = load_balancer_kind(service.annotations)
        except InvalidServiceConfig:
            if strict:
                raise
            kind = "classic"
        return self.nlb if kind == "nlb" else self.classic

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return self._for(service, strict=False).get_load_balancer_name(cluster_name, service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        return self._for(service, strict=False).get_load_balancer(cluster_name, service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        return self._for(service, strict=True).ensure_load_balancer(cluster_name, service, nodes)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self._for(service, strict=True).update_load_balancer(cluster_name, service, nodes)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        kind = status_kind(service)
        if kind is None:
            path = self._for(service, strict=False)
        else:
            path = self.nlb if kind == "nlb" else self.classic
        path.ensure_load_balancer_deleted(cluster_name, service)


class AWSCloud:
    """``controller.cloud.Cloud`` for AWS: Classic ELBs, NLBs and InstancesV2."""

    def __init__(self, ctx: AWSContext, *, self_instance_id: str) -> None:
        self.context = ctx
        self.self_instance_id = self_instance_id
        for domain, client in (("ec2", ctx.clients.ec2), ("elb", ctx.clients.elb)):
            ctx.wave.watch(domain, client)
        if ctx.clients.elbv2 is not None:
            ctx.wave.watch("elbv2", ctx.clients.elbv2)
        groups = SecurityGroups(ctx)
        self._instances = AWSInstances(ctx)
        self._tags = AWSInstanceTags(ctx.clients.ec2)
        instances, subnets = InstanceCache(ctx), Subnets(ctx)
        classic = ClassicLoadBalancers(ctx, instances=instances, subnets=subnets, groups=groups)
        self._lb = LoadBalancers(
            classic, NetworkLoadBalancers(ctx, instances=instances, subnets=subnets, groups=groups)
        )

    @property
    def provider_name(self) -> str:
        return "aws"

    @property
    def cluster_id(self) -> str:
        return self.context.tags.cluster_id

    @property
    def region(self) -> str:
        return self.context.region

    @property
    def vpc_id(self) -> str:
        return self.context.vpc_id

    def load_balancer(self) -> LoadBalancers:
        return self._lb

    def instances_v2(self) -> AWSInstances:
        return self._instances

    def instance_tags(self) -> AWSInstanceTags:
        return self._tags

    def set_call_observer(self, observer: CallObserver | None) -> None:
        """Report every AWS request (each retry attempt included) to ``observer``:
        ``observe_cloud_call(service="ec2"|"elb"|"elbv2", action=..., outcome=...,
        seconds=...)`` with outcome ``"success"``, the AWS error code, or ``"RequestError"``
        (no answer)."""
        observe_calls(self.context.clients, observer)


def _imds_error(endpoint: str, exc: MetadataError) -> CloudInitError:
    return CloudInitError(
        f"cannot determine this controller's own EC2 instance: instance metadata at {endpoint} "
        f"did not answer ({exc}). Run on an EC2 instance that can reach the metadata service, "
        "point AWS_EC2_METADATA_SERVICE_ENDPOINT at one, or run off-cluster by setting Region, "
        "VPC, SubnetID and KubernetesClusterID in the cloud config's [Global] section."
    )


def new_cloud(
    config: CloudConfig,
    *,
    legacy: LegacyFlags | None = None,
    sg_delete_interval: float = 5.0,
    sg_delete_timeout: float = 600.0,
    metadata_timeout: float = 6.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AWSCloud:
    """Resolve identity and build the provider. Raises :class:`CloudInitError`."""
    legacy = legacy or LegacyFlags()
    override = config.imds_override()
    endpoint = metadata_endpoint(override.url if override else "")
    region = config.derived_region
    if config.uses_dummy_self_instance:
        if not region:
            try:
                region = fetch_self_identity(endpoint, timeout=metadata_timeout).region
            except MetadataError as exc:
                raise _imds_error(endpoint, exc) from None
        clients = make_clients(config, region)
        vpc, subnet, self_id = config.vpc, config.subnet_id, DUMMY_SELF_INSTANCE
        cluster_id = config.kubernetes_cluster_id or config.kubernetes_cluster_tag
        log.info("off-cluster mode: VPC %s, subnet %s, region %s", vpc, subnet, region)
    else:
        try:
            ident = fetch_self_identity(endpoint, timeout=metadata_timeout)
        except MetadataError as exc:
            raise _imds_error(endpoint, exc) from None
        region = region or ident.region
        clients = make_clients(config, region)
        vpc, subnet, tags = _describe_self(clients, ident.instance_id)
        self_id = ident.instance_id
        cluster_id = config.kubernetes_cluster_id or config.kubernetes_cluster_tag
        if not cluster_id:
            ids = find_cluster_ids(tags)
            if len(ids) != 1:
                raise CloudInitError(
                    f"AWS cloud failed to find ClusterID: instance {self_id} carries "
                    f"{'no' if not ids else 'several'} kubernetes.io/cluster/<id> tags "
                    f"({', '.join(ids) or 'none'}); set KubernetesClusterID in [Global]"
                )
            cluster_id = ids[0]
    ctx = AWSContext(
        clients=clients,
        config=config,
        tags=ClusterTags(cluster_id, legacy=bool(config.kubernetes_cluster_tag)),
        vpc_id=vpc,
        self_subnet_id=subnet,
        legacy=legacy,
        sg_delete_interval=sg_delete_interval,
        sg_delete_timeout=sg_delete_timeout,
        sleep=sleep,
        clock=clock,
    )
    log.info("AWS cloud ready: region %s, vpc %s, cluster %s", region, vpc, cluster_id)
    return AWSCloud(ctx, self_instance_id=self_id)


def _describe_self(clients: Clients, instance_id: str) -> tuple[str, str, dict[str, str]]:
    try:
        resp = clients.ec2.describe_instances(InstanceIds=[instance_id])
    except AWSError as exc:
        raise CloudInitError(
            f"cannot describe this controller's instance {instance_id} in {clients.region}: "
            f"{exc}. Check the EC2 endpoint and credentials."
        ) from None
    for res in resp.get("Reservations", []):
        for inst in res.get("Instances", []):
            return (
                inst.get("VpcId", ""),
                inst.get("SubnetId", ""),
                tag_map(cast(Any, inst.get("Tags"))),
            )
    raise CloudInitError(f"this controller's instance {instance_id} was not found in EC2")
