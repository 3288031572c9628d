"""Network Load Balancers for Services annotated ``aws-load-balancer-type: nlb``.

Neighbours: :mod:`controller.aws.nlbspec` validates the Service first;
:mod:`controller.aws.nlbrules` computes the node security-group rules;
:class:`controller.aws.subnets.Subnets` and :class:`controller.aws.instances.InstanceCache` are
shared with the Classic ELB path (:mod:`controller.aws.loadbalancer`);
:class:`controller.aws.LoadBalancers` routes each Service to one of the two.

Design: the AWS call order follows upstream v1.33.0 (``aws.go`` ``EnsureLoadBalancer`` NLB
branch, ``aws_loadbalancer.go`` ``ensureLoadBalancerv2``, ``ensureTargetGroup``,
``updateInstanceSecurityGroupsForNLB``, ``EnsureLoadBalancerDeleted``) so the lab's trail can
be compared with it (``controller/aws/README.md`` lists the sequences). The differences, each
in ``controller/DEVIATIONS.md``: all input is validated before the first call; an existing
target group's health check is compared field by field (upstream compares the path with its own
empty request and so modifies an HTTP-checked group on every sync); a sync that changed nothing
does not describe the load balancer again; deletion revokes the node rules first and also when
the load balancer is already gone (upstream returns early and leaks them, kubernetes#81610); a
node sync over several Services gives an NLB whose target groups are in step only its targets
and node rules, not the whole ensure (``update_load_balancer``).

Managed security-group mode (``NLBSecurityGroupMode = Managed``; current upstream,
kubernetes/cloud-provider-aws 63ec440c, PRs #1158 and #1379: ``aws.go``
``ensureNLBSecurityGroup``, ``ensureNLBSecurityGroupRules``, ``EnsureLoadBalancer``'s detached
group cleanup, ``EnsureLoadBalancerDeleted``; ``aws_loadbalancer.go`` ``ensureLoadBalancerv2``,
``removeOwnedSecurityGroups``): a new NLB is created with one group of its own (found or
created by name, :func:`controller.aws.nlbspec.managed_security_group_name`) or with the
Service's BYO ``security-groups``; an existing NLB that has groups gets ``SetSecurityGroups``
when they differ, one created without groups keeps none (ELBv2 cannot add groups to it). The
managed group's ingress is synced exactly to the listener ports from the source ranges plus
ICMP 3/4; the node rules stay CIDR rules (upstream does not change them in this mode). Owned
groups dropped from the NLB, and on deletion the NLB's owned groups, are deleted after it,
retrying ``DependencyViolation``. Deletion of owned groups does not depend on the mode
(upstream's neither), so switching the mode off leaves an NLB its group until it is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from controller.aws import nlbrules, sgrules, targets
from controller.aws.annotations import A_EXTRA_SECURITY_GROUPS, A_SECURITY_GROUPS, id_list
from controller.aws.clients import aws_errors, error_code, revoke_as_sdk_v1
from controller.aws.context import AWSContext
from controller.aws.instances import InstanceCache
from controller.aws.loadbalancer import LoadBalancerNotFound
from controller.aws.nlbspec import (
    A_EIP_ALLOCATIONS,
    MANAGED_SG_DESCRIPTION,
    NLBSpec,
    PortMapping,
    managed_security_group_name,
    managed_security_group_rules,
    parse_nlb_service,
    target_group_name,
)
from controller.aws.securitygroups import SecurityGroups, find_group_for_instance
from controller.aws.subnets import Subnets
from controller.aws.tags import SERVICE_NAME_TAG, tag_list, tag_map
from controller.aws.wave import MISS
from controller.cloud import (
    CloudError,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    load_balancer_name,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef, IpPermissionUnionTypeDef
    from mypy_boto3_elbv2.type_defs import (
        ListenerTypeDef,
        LoadBalancerTypeDef,
        TargetGroupTypeDef,
    )

log = logging.getLogger(__name__)

A_CROSS_ZONE_ATTR = "load_balancing.cross_zone.enabled"
A_ACCESS_ENABLED_ATTR = "access_logs.s3.enabled"
A_ACCESS_BUCKET_ATTR = "access_logs.s3.bucket"
A_ACCESS_PREFIX_ATTR = "access_logs.s3.prefix"


def status_of(lb: LoadBalancerTypeDef) -> LoadBalancerStatus:
    """Upstream ``v2toStatus``: the DNS name, only while ``active`` or ``provisioning``."""
    dns = lb.get("DNSName", "")
    state = lb.get("State", {}).get("Code", "")
    if dns and state in ("active", "provisioning"):
        return LoadBalancerStatus((LoadBalancerIngress(hostname=dns),))
    return LoadBalancerStatus()


def desired_lb_attributes(spec: NLBSpec, current: dict[str, str]) -> list[dict[str, str]]:
    """Upstream ``reconcileLBAttributes``: cross-zone and access logs; the bucket and prefix
    only while access logs are on (ELBv2 refuses an empty bucket)."""
    want = {
        A_CROSS_ZONE_ATTR: "true" if spec.cross_zone else "false",
        A_ACCESS_ENABLED_ATTR: "true" if spec.access_log_enabled else "false",
    }
    if spec.access_log_enabled:
        want[A_ACCESS_BUCKET_ATTR] = spec.access_log_bucket
        want[A_ACCESS_PREFIX_ATTR] = spec.access_log_prefix
    return [{"Key": k, "Value": v} for k, v in want.items() if current.get(k) != v]


class NetworkLoadBalancers:
    """``controller.cloud.LoadBalancer`` on ELBv2 network load balancers (instance targets)."""

    def __init__(
        self, ctx: AWSContext, *, instances: InstanceCache, subnets: Subnets, groups: SecurityGroups
    ) -> None:
        self.ctx = ctx
        self.elbv2 = ctx.clients.nlb
        self.instances = instances
        self.subnets = subnets
        self.groups = groups

    # -- helpers -------------------------------------------------------------------------

    def _spec(self, service: Service, *, ensuring: bool = False) -> NLBSpec:
        return parse_nlb_service(
            service,
            shared_probe=self.ctx.config.shared_probe,
            ensuring=ensuring,
            managed_security_groups=self.ctx.config.nlb_security_group_managed,
        )

    def describe(self, name: str) -> LoadBalancerTypeDef | None:
        """Upstream ``describeLoadBalancerv2``: the network load balancer named ``name``.
        In a sync wave the answer is kept until an ELBv2 call changes it; in a batched wave
        one listing of every load balancer answers first (:mod:`controller.aws.wave`)."""
        wave = self.ctx.wave
        found: Any = wave.get("elbv2", ("lb", name))
        if found is MISS and wave.first_listing("elbv2-lb"):
            since = wave.mark()
            listed: dict[Any, Any] = {}
            for page in self.elbv2.get_paginator("describe_load_balancers").paginate():
                for lb in page.get("LoadBalancers", []):
                    listed[("lb", lb.get("LoadBalancerName", ""))] = [lb]
            wave.put_many("elbv2", listed, since=since)
            found = listed.get(("lb", name), MISS)
        if found is MISS:
            since = wave.mark()
            found = self._describe_named(name)
            wave.put("elbv2", ("lb", name), found, since=since)
        for lb in found:
            if lb.get("Type") == "network":
                return cast("LoadBalancerTypeDef", lb)
        if not found:
            return None
        raise CloudError(f"NLB '{name}' could not be found (another type has the name)")

    def _describe_named(self, name: str) -> list[LoadBalancerTypeDef]:
        try:
            resp = self.elbv2.describe_load_balancers(Names=[name])
        except ClientError as exc:
            if error_code(exc) == "LoadBalancerNotFound":
                return []
            raise
        return list(resp.get("LoadBalancers", []))

    def _target_groups(self, lb_arn: str) -> list[TargetGroupTypeDef]:
        """``DescribeTargetGroups(LoadBalancerArn=...)``; in a batched wave one listing of
        every target group answers for each load balancer it names."""
        wave = self.ctx.wave
        found: Any = wave.get("elbv2", ("tg", lb_arn))
        if found is MISS and wave.first_listing("elbv2-tg"):
            since = wave.mark()
            listed: dict[Any, list[Any]] = {}
            for page in self.elbv2.get_paginator("describe_target_groups").paginate():
                for tg in page.get("TargetGroups", []):
                    for arn in tg.get("LoadBalancerArns", []):
                        listed.setdefault(("tg", arn), []).append(tg)
            wave.put_many("elbv2", listed, since=since)
            found = listed.get(("tg", lb_arn), MISS)
        if found is MISS:
            since = wave.mark()
            found = self.elbv2.describe_target_groups(LoadBalancerArn=lb_arn).get(
                "TargetGroups", []
            )
            wave.put("elbv2", ("tg", lb_arn), found, since=since)
        return list(found)

    def _tags(self, service: Service, spec: NLBSpec) -> dict[str, str]:
        return self.ctx.tags.owned_tags([*spec.additional_tags, (SERVICE_NAME_TAG, service.key)])

    # -- contract ------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return load_balancer_name(service)

    @aws_errors
    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        lb = self.describe(load_balancer_name(service))
        if lb is None:
            return None, False
        return status_of(lb), True

    @aws_errors
    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        spec = self._spec(service, ensuring=True)  # every validation error before any call
        return self._ensure(cluster_name, service, spec, nodes)

    @aws_errors
    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Upstream: describe, then the whole ``EnsureLoadBalancer``. In a node sync over
        several Services (a batched wave) an NLB whose target groups are exactly what the
        ensure would keep gets only what the node set decides, as upstream's Classic
        ``UpdateLoadBalancer`` does: its targets and the node rules (``DEVIATIONS.md``,
        "Node sync of an NLB in a wave"); anything else, the whole ensure."""
        spec = self._spec(service)
        name = load_balancer_name(service)
        lb = self.describe(name)
        if lb is None:
            raise LoadBalancerNotFound(f"Load balancer not found: {name} ({service.key})")
        matched = (
            self._unchanged_target_groups(lb, service, spec) if self.ctx.wave.batched else None
        )
        if matched is None:
            self._ensure(cluster_name, service, spec, nodes, described=lb)
            return
        instances = self.instances.for_nodes(nodes, target_labels=spec.target_node_labels)
        instance_ids = sorted({i.get("InstanceId", "") for i in instances})
        for tg, mapping in matched:
            self._refresh_targets(tg, mapping, instance_ids)
        self.subnets.vpc_subnets()  # once per wave: the NLB's subnet CIDRs come from it
        self._sync_node_rules(name, lb, instances, spec)

    def _unchanged_target_groups(
        self, lb: LoadBalancerTypeDef, service: Service, spec: NLBSpec
    ) -> list[tuple[TargetGroupTypeDef, PortMapping]] | None:
        """Each port mapping with the NLB's one target group the whole ensure would keep for
        it as it is (its name, node port, settings; the ensure's own tests), or ``None`` when
        the ensure might change anything besides targets and node rules: a target group
        missing, extra or changed, or a spec whose other parts (managed security groups,
        target-group attributes, EIP allocations) only the ensure judges."""
        if (
            not spec.mappings
            or spec.target_group_attributes
            or spec.eip_allocations
            or self.ctx.config.nlb_security_group_managed
        ):
            return None
        groups = self._target_groups(lb["LoadBalancerArn"])
        if len(groups) != len(spec.mappings):
            return None
        by_name = {str(g.get("TargetGroupName", "")): g for g in groups}
        matched: list[tuple[TargetGroupTypeDef, PortMapping]] = []
        for mapping in spec.mappings:
            tg = by_name.pop(
                target_group_name(
                    self.ctx.tags.cluster_id, service.namespace, service.name, mapping
                ),
                None,
            )
            if (
                tg is None
                or int(tg.get("Port", 0)) != mapping.traffic_port
                or needs_new_target_group(tg, mapping)
                or health_check_changes(tg, mapping)
            ):
                return None
            matched.append((tg, mapping))
        return matched

    @aws_errors
    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        name = load_balancer_name(service)
        lb = self.describe(name)
        if self.ctx.legacy.enabled("k8s-57568"):
            self._legacy_delete_57568(name, lb, service)
            return
        # FIXED (kubernetes#57568, #81610): our node rules go first, and also when the load
        # balancer is already gone; upstream revokes last and returns early when it is gone.
        self._update_node_rules(name, [], subnet_cidrs=[], client_cidrs=[], mappings=())
        if lb is None:
            log.info("load balancer already deleted: %s (%s)", name, service.key)
            self._delete_leftover_managed_group(cluster_name, service, name)
            return
        arn = lb["LoadBalancerArn"]
        groups = self.elbv2.describe_target_groups(LoadBalancerArn=arn).get("TargetGroups", [])
        # upstream buildSecurityGroupsToDelete, before the NLB goes (its list is the NLB's)
        owned_groups = self._owned_groups(lb.get("SecurityGroups", []), service)
        self.elbv2.delete_load_balancer(LoadBalancerArn=arn)
        log.info("deleted load balancer %s (%s)", name, service.key)
        for tg in groups:
            self.elbv2.delete_target_group(TargetGroupArn=tg["TargetGroupArn"])
        if owned_groups:
            # ELBv2 releases the groups a little after the NLB is gone: DependencyViolation
            # is retried (upstream deleteSecurityGroupsWithBackoff)
            self.groups.delete_with_backoff(owned_groups, lb_name=name)

    def _legacy_delete_57568(
        self, name: str, lb: LoadBalancerTypeDef | None, service: Service
    ) -> None:
        """LEGACY (``k8s-57568``): upstream v1.9.0's NLB deletion (``aws.go``
        ``EnsureLoadBalancerDeleted``; cloud-provider-aws commit 7eb31399^, the in-tree file).

        A gone NLB returns at once; otherwise the NLB and its target groups are deleted, then
        each cluster-tagged group's permissions holding our described ranges are revoked, one
        permission per EC2 permission carrying its IPv4 and its IPv6 ranges, an empty list
        included. aws-sdk-go v1 sends an empty list as ``IpPermissions.N.Ipv6Ranges=`` and EC2
        refuses the call ("missing mandatory parameter: exactly one of remote-security-group,
        ..."); the error fails the delete after the NLB is gone, and the retry returns at the
        first step: the rules stay open (kubernetes#57568). Fixed by kubernetes PR #57569
        (separate IPv4 and IPv6 permissions); ours revokes first (``ensure_load_balancer_deleted``).
        """
        if lb is None:
            log.info("load balancer already deleted: %s (%s)", name, service.key)
            return
        arn = lb["LoadBalancerArn"]
        groups = self.elbv2.describe_target_groups(LoadBalancerArn=arn).get("TargetGroups", [])
        self.elbv2.delete_load_balancer(LoadBalancerArn=arn)
        for tg in groups:
            self.elbv2.delete_target_group(TargetGroupArn=tg["TargetGroupArn"])
        ours = {
            f"{nlbrules.CLIENT_DESC}={name}",
            f"{nlbrules.HEALTH_DESC}={name}",
            f"{nlbrules.MTU_DESC}={name}",  # v1.9.0's MTU rule named its load balancer
        }
        for gid, group in sorted(self.groups.cluster_groups().items()):
            removes: list[dict[str, Any]] = []
            for perm in group.get("IpPermissions", []):
                v4 = [r for r in perm.get("IpRanges", []) if r.get("Description") in ours]
                v6 = [r for r in perm.get("Ipv6Ranges", []) if r.get("Description") in ours]
                if v4 or v6:
                    removes.append(
                        {
                            "IpProtocol": perm.get("IpProtocol", ""),
                            **{k: perm[k] for k in ("FromPort", "ToPort") if k in perm},
                            "IpRanges": v4,
                            "Ipv6Ranges": v6,
                        }
                    )
            if removes:
                revoke_as_sdk_v1(self.ctx.clients.ec2, gid, removes)

    # -- ensure --------------------------------------------------------------------------

    def _ensure(
        self,
        cluster_name: str,
        service: Service,
        spec: NLBSpec,
        nodes: Sequence[Node],
        *,
        described: LoadBalancerTypeDef | None = None,
    ) -> LoadBalancerStatus:
        name = load_balancer_name(service)
        instances = self.instances.for_nodes(nodes, target_labels=spec.target_node_labels)
        instance_ids = sorted({i.get("InstanceId", "") for i in instances})
        subnet_ids = self.subnets.for_load_balancer(internal=spec.internal, annotated=spec.subnets)
        if spec.eip_allocations and len(spec.eip_allocations) != len(subnet_ids):
            raise InvalidServiceConfig(
                A_EIP_ALLOCATIONS,
                ",".join(spec.eip_allocations),
                f"Must have same number of EIP AllocationIDs ({len(spec.eip_allocations)}) "
                f"and SubnetIDs ({len(subnet_ids)})",
            )
        lb = described if described is not None else self.describe(name)
        existing_groups = list(lb.get("SecurityGroups", [])) if lb is not None else []
        security_groups, managed = self._security_groups(cluster_name, service, spec, lb)
        tags = self._tags(service, spec)
        if lb is None:
            lb = self._create(name, service, spec, subnet_ids, tags, instance_ids, security_groups)
        else:
            lb = self._reconcile(lb, service, spec, tags, instance_ids, security_groups)
        if spec.target_group_attributes:
            self._reconcile_target_group_attributes(lb["LoadBalancerArn"], spec)
        if managed and security_groups:
            self.groups.sync_ingress(security_groups[0], managed_security_group_rules(spec))
        detached = sorted(set(existing_groups) - set(security_groups))
        if detached:
            self._remove_detached_groups(name, detached, service)
        self._sync_node_rules(name, lb, instances, spec)
        return status_of(lb)

    def _sync_node_rules(
        self,
        name: str,
        lb: LoadBalancerTypeDef,
        instances: Sequence[InstanceTypeDef],
        spec: NLBSpec,
    ) -> None:
        """The node rules for the NLB's subnets (the health checks' sources) and ``spec``."""
        ensured = [z.get("SubnetId", "") for z in lb.get("AvailabilityZones", [])]
        if not ensured:
            raise CloudError(f"did not find ensured subnets on LB {name}")
        subnet_cidrs = self._subnet_cidrs(ensured)
        self._update_node_rules(
            name,
            instances,
            subnet_cidrs=subnet_cidrs,
            client_cidrs=list(spec.source_ranges),
            mappings=spec.mappings,
        )

    def _create(
        self,
        name: str,
        service: Service,
        spec: NLBSpec,
        subnet_ids: Sequence[str],
        tags: dict[str, str],
        instance_ids: Sequence[str],
        security_groups: Sequence[str],
    ) -> LoadBalancerTypeDef:
        mappings: list[dict[str, str]] = []
        for i, sid in enumerate(subnet_ids):
            m = {"SubnetId": sid}
            if spec.eip_allocations:
                m["AllocationId"] = spec.eip_allocations[i]
            mappings.append(m)
        kwargs: dict[str, Any] = {
            "Name": name,
            "Type": "network",
            "SubnetMappings": mappings,
            "Tags": tag_list(tags),
        }
        if spec.internal:
            kwargs["Scheme"] = "internal"
        if security_groups:
            kwargs["SecurityGroups"] = list(security_groups)
        log.info("creating network load balancer %s for %s", name, service.key)
        lb = self.elbv2.create_load_balancer(**kwargs)["LoadBalancers"][0]
        for mapping in spec.mappings:
            self._create_listener(lb, mapping, service, tags, instance_ids)
        self._reconcile_lb_attributes(lb["LoadBalancerArn"], spec)
        return lb

    def _create_listener(
        self,
        lb: LoadBalancerTypeDef,
        mapping: PortMapping,
        service: Service,
        tags: dict[str, str],
        instance_ids: Sequence[str],
    ) -> None:
        tg = self._create_target_group(lb["VpcId"], mapping, service, tags, instance_ids)
        kwargs: dict[str, Any] = {
            "LoadBalancerArn": lb["LoadBalancerArn"],
            "Port": mapping.frontend_port,
            "Protocol": mapping.frontend_protocol,
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": tg["TargetGroupArn"]}],
            "Tags": tag_list(tags),
        }
        kwargs.update(_tls_fields(mapping))
        self.elbv2.create_listener(**kwargs)

    def _create_target_group(
        self,
        vpc_id: str,
        mapping: PortMapping,
        service: Service,
        tags: dict[str, str],
        instance_ids: Sequence[str],
    ) -> TargetGroupTypeDef:
        hc = mapping.health_check
        name = target_group_name(self.ctx.tags.cluster_id, service.namespace, service.name, mapping)
        kwargs: dict[str, Any] = {
            "Name": name,
            "VpcId": vpc_id,
            "Port": mapping.traffic_port,
            "Protocol": mapping.traffic_protocol,
            "TargetType": "instance",
            "HealthCheckIntervalSeconds": hc.interval,
            "HealthCheckPort": hc.port,
            "HealthCheckProtocol": hc.protocol,
            "HealthyThresholdCount": hc.healthy_threshold,
            "UnhealthyThresholdCount": hc.unhealthy_threshold,
            "Tags": tag_list(tags),
        }
        if hc.protocol != "TCP":
            kwargs["HealthCheckPath"] = hc.path
        log.info("creating target group %s for %s", name, service.key)
        tg = self.elbv2.create_target_group(**kwargs)["TargetGroups"][0]
        self._sync_targets(tg["TargetGroupArn"], mapping.traffic_port, instance_ids, actual=[])
        return tg

    def _reconcile(
        self,
        lb: LoadBalancerTypeDef,
        service: Service,
        spec: NLBSpec,
        tags: dict[str, str],
        instance_ids: Sequence[str],
        security_groups: Sequence[str],
    ) -> LoadBalancerTypeDef:
        arn = lb["LoadBalancerArn"]
        current = list(lb.get("SecurityGroups", []))
        if security_groups and set(security_groups) != set(current):
            log.info(
                "setting security groups of %s (%s): %s -> %s",
                lb.get("LoadBalancerName"),
                service.key,
                current,
                list(security_groups),
            )
            self.elbv2.set_security_groups(
                LoadBalancerArn=arn, SecurityGroups=list(security_groups)
            )
            lb = cast("LoadBalancerTypeDef", {**lb, "SecurityGroups": list(security_groups)})
        listeners = self.elbv2.describe_listeners(LoadBalancerArn=arn).get("Listeners", [])
        actual: dict[tuple[int, str], ListenerTypeDef] = {
            (int(x.get("Port", 0)), str(x.get("Protocol", ""))): x for x in listeners
        }
        groups = self._target_groups(arn)
        by_node_port = {int(g.get("Port", 0)): g for g in groups}
        for mapping in spec.mappings:
            listener = actual.get((mapping.frontend_port, mapping.frontend_protocol))
            if listener is None:
                self._create_listener(lb, mapping, service, tags, instance_ids)
                continue
            self._reconcile_listener(
                lb, listener, by_node_port, mapping, service, tags, instance_ids
            )
        wanted = {(m.frontend_port, m.frontend_protocol) for m in spec.mappings}
        for key, listener in sorted(actual.items()):
            if key not in wanted:
                self.elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
                self.elbv2.delete_target_group(
                    TargetGroupArn=listener["DefaultActions"][0]["TargetGroupArn"]
                )
        self._reconcile_lb_attributes(arn, spec)
        return lb  # subnets and DNS name cannot change on an NLB: no second describe

    # -- security groups of the NLB (managed mode) -----------------------------------------

    def _security_groups(
        self,
        cluster_name: str,
        service: Service,
        spec: NLBSpec,
        lb: LoadBalancerTypeDef | None,
    ) -> tuple[list[str], bool]:
        """Upstream ``ensureNLBSecurityGroup``: the groups the NLB should have, and whether
        they are the managed group (whose rules we sync).

        Mode off: an existing NLB keeps what it has, a new one gets none. Managed: an existing
        NLB without groups keeps none (ELBv2 cannot add groups to an NLB created without
        them); the BYO annotation's groups are used as they are; otherwise the managed group is
        found by name in the VPC or created, tagged for the cluster.
        """
        current = list(lb.get("SecurityGroups", [])) if lb is not None else []
        if not self.ctx.config.nlb_security_group_managed:
            return current, False
        if lb is not None and not current:
            log.info(
                "NLB for service %s exists and has no security groups, skipping security group "
                "management",
                service.key,
            )
            return [], False
        if spec.security_groups:
            return list(spec.security_groups), False
        group_id = self.groups.ensure_lb_group(
            managed_security_group_name(cluster_name, service),
            MANAGED_SG_DESCRIPTION,
            service_key=service.key,
            extra_tags=spec.additional_tags,
        )
        return [group_id], True

    def _owned_groups(self, group_ids: Sequence[str], service: Service) -> list[str]:
        """Upstream ``buildSecurityGroupsToDelete`` with its NLB check (``isOwnedSecurityGroup``):
        of ``group_ids``, those tagged ``kubernetes.io/cluster/<id>=owned``, never
        ``ElbSecurityGroup`` and never a group the Service's ``security-groups`` or
        ``extra-security-groups`` annotation names. Upstream describes each candidate again
        for the owned check; one describe carries the same tags."""
        ids = [g for g in group_ids if g]
        if not ids:
            return []
        ann = service.annotations
        annotated = {
            *id_list(A_SECURITY_GROUPS, ann.get(A_SECURITY_GROUPS, "")),
            *id_list(A_EXTRA_SECURITY_GROUPS, ann.get(A_EXTRA_SECURITY_GROUPS, "")),
        }
        out: list[str] = []
        for group in self.groups.describe(filters=[{"Name": "group-id", "Values": ids}]):
            gid = group["GroupId"]
            tags = tag_map(cast(Any, group.get("Tags")))
            if gid == self.ctx.config.elb_security_group or gid in annotated:
                continue
            if not self.ctx.tags.is_owned(tags):
                log.info("security group %s is not owned by this cluster; not deleting", gid)
                continue
            out.append(gid)
        return sorted(out)

    def _remove_detached_groups(self, name: str, detached: Sequence[str], service: Service) -> None:
        """Upstream ``removeOwnedSecurityGroups`` for groups no longer on the NLB (the BYO
        annotation added, changed or removed): an owned group loses the rules that reference it
        on cluster-tagged groups and is deleted. Upstream also revokes those references to a
        group it does not own; ours leaves them (no NLB path adds group references, so they
        are the user's). Errors are logged, not raised, as upstream does."""
        try:
            owned = self._owned_groups(detached, service)
            for gid in owned:
                for ref in self.groups.groups_referencing(gid):
                    if ref["GroupId"] == gid:
                        continue
                    if not self.ctx.tags.has_cluster_tag(tag_map(cast(Any, ref.get("Tags")))):
                        continue
                    found = sgrules.references_group(cast(Any, ref.get("IpPermissions", [])), gid)
                    if found:
                        self.ctx.clients.ec2.revoke_security_group_ingress(
                            GroupId=ref["GroupId"],
                            IpPermissions=cast(
                                "list[IpPermissionUnionTypeDef]", sgrules.regroup(found)
                            ),
                        )
            if owned:
                self.groups.delete_with_backoff(owned, lb_name=name)
        except (ClientError, CloudError) as exc:
            log.warning("error cleaning up detached security groups of %s: %s", name, exc)

    def _delete_leftover_managed_group(
        self, cluster_name: str, service: Service, name: str
    ) -> None:
        """Managed mode, the NLB already gone: its managed group, found by name, is deleted if
        we own it. A deletion that failed after ``DeleteLoadBalancer`` (the group still in use
        past the timeout) is retried by the Service controller; upstream returns at "already
        deleted" and leaks the group (ours: ``DEVIATIONS.md``)."""
        if not self.ctx.config.nlb_security_group_managed:
            return
        found = self.groups.describe(
            filters=[
                {
                    "Name": "group-name",
                    "Values": [managed_security_group_name(cluster_name, service)],
                },
                {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
            ]
        )
        owned = [
            g["GroupId"]
            for g in found
            if self.ctx.tags.is_owned(tag_map(cast(Any, g.get("Tags"))))
            and tag_map(cast(Any, g.get("Tags"))).get(SERVICE_NAME_TAG, service.key) == service.key
        ]
        if owned:
            self.groups.delete_with_backoff(sorted(owned), lb_name=name)

    def _reconcile_listener(
        self,
        lb: LoadBalancerTypeDef,
        listener: ListenerTypeDef,
        by_node_port: dict[int, TargetGroupTypeDef],
        mapping: PortMapping,
        service: Service,
        tags: dict[str, str],
        instance_ids: Sequence[str],
    ) -> None:
        modify = False
        certs = listener.get("Certificates", [])
        if mapping.frontend_protocol == "TLS":
            modify = listener.get("SslPolicy", "") != mapping.ssl_policy or (
                not certs or certs[0].get("CertificateArn") != mapping.ssl_certificate_arn
            )
        elif mapping.frontend_protocol == "TCP":
            modify = bool(listener.get("SslPolicy")) or bool(certs)
        tg = by_node_port.get(mapping.traffic_port)
        recreate = tg is None or needs_new_target_group(tg, mapping)
        if recreate or tg is None:
            tg = self._create_target_group(lb["VpcId"], mapping, service, tags, instance_ids)
            modify = True
        if modify:
            kwargs: dict[str, Any] = {
                "ListenerArn": listener["ListenerArn"],
                "Port": mapping.frontend_port,
                "Protocol": mapping.frontend_protocol,
                "DefaultActions": [{"Type": "forward", "TargetGroupArn": tg["TargetGroupArn"]}],
            }
            kwargs.update(_tls_fields(mapping))
            self.elbv2.modify_listener(**kwargs)
        if recreate:
            self.elbv2.delete_target_group(
                TargetGroupArn=listener["DefaultActions"][0]["TargetGroupArn"]
            )
            return
        self._reconcile_target_group(tg, mapping, instance_ids)

    def _reconcile_target_group(
        self, tg: TargetGroupTypeDef, mapping: PortMapping, instance_ids: Sequence[str]
    ) -> None:
        self._refresh_targets(tg, mapping, instance_ids)
        change = health_check_changes(tg, mapping)
        if change:
            self.elbv2.modify_target_group(TargetGroupArn=tg["TargetGroupArn"], **change)

    def _refresh_targets(
        self, tg: TargetGroupTypeDef, mapping: PortMapping, instance_ids: Sequence[str]
    ) -> None:
        """``DescribeTargetHealth``, then register / deregister what differs (targets being
        deregistered count as gone)."""
        arn = tg["TargetGroupArn"]
        health = self.elbv2.describe_target_health(TargetGroupArn=arn)
        actual = [
            d["Target"]
            for d in health.get("TargetHealthDescriptions", [])
            if d.get("TargetHealth", {}).get("Reason") != "Target.DeregistrationInProgress"
        ]
        self._sync_targets(arn, mapping.traffic_port, instance_ids, actual=actual)

    def _sync_targets(
        self, arn: str, port: int, instance_ids: Sequence[str], *, actual: Sequence[Any]
    ) -> None:
        """Upstream ``ensureTargetGroupTargets`` (see :mod:`controller.aws.targets`)."""
        register, deregister = targets.diff_targets(
            targets.expected_targets(instance_ids, port), targets.actual_targets(actual)
        )
        for chunk in targets.chunk_targets(register):
            self.elbv2.register_targets(
                TargetGroupArn=arn, Targets=cast(Any, targets.payload(chunk))
            )
        for chunk in targets.chunk_targets(deregister):
            self.elbv2.deregister_targets(
                TargetGroupArn=arn, Targets=cast(Any, targets.payload(chunk))
            )

    def _reconcile_lb_attributes(self, arn: str, spec: NLBSpec) -> None:
        resp = self.elbv2.describe_load_balancer_attributes(LoadBalancerArn=arn)
        current = {a.get("Key", ""): a.get("Value", "") for a in resp.get("Attributes", [])}
        change = desired_lb_attributes(spec, current)
        if change:
            self.elbv2.modify_load_balancer_attributes(
                LoadBalancerArn=arn, Attributes=cast(Any, change)
            )

    def _reconcile_target_group_attributes(self, lb_arn: str, spec: NLBSpec) -> None:
        """Current upstream ``reconcileTargetGroupsAttributes``: annotated values that differ
        from what AWS reports; attributes AWS does not report are skipped."""
        for tg in self._target_groups(lb_arn):
            arn = tg["TargetGroupArn"]
            resp = self.elbv2.describe_target_group_attributes(TargetGroupArn=arn)
            current = {a.get("Key", ""): a.get("Value", "") for a in resp.get("Attributes", [])}
            change = [
                {"Key": k, "Value": v}
                for k, v in spec.target_group_attributes
                if k in current and current[k] != v
            ]
            if change:
                self.elbv2.modify_target_group_attributes(
                    TargetGroupArn=arn, Attributes=cast(Any, change)
                )

    def _vpc_cidr(self) -> str:
        """The VPC's CIDR (old upstream's ``getVpcCidrBlock``: its health rules' source)."""
        vpcs = self.ctx.wave.read(  # once per sync wave
            "ec2",
            ("DescribeVpcs", self.ctx.vpc_id),
            lambda: self.ctx.clients.ec2.describe_vpcs(VpcIds=[self.ctx.vpc_id]).get("Vpcs", []),
        )
        if len(vpcs) != 1:
            raise CloudError(f"error querying VPC for ELB, got {len(vpcs)} for {self.ctx.vpc_id}")
        return vpcs[0].get("CidrBlock", "")

    def _subnet_cidrs(self, subnet_ids: Sequence[str]) -> list[str]:
        """Upstream ``getSubnetCidrs``: the CIDRs the health checks come from."""
        subnets = self.subnets.known(subnet_ids)
        if subnets is None:
            resp = self.ctx.clients.ec2.describe_subnets(SubnetIds=list(subnet_ids))
            subnets = list(resp.get("Subnets", []))
        if len(subnets) != len(subnet_ids):
            raise CloudError(f"error querying Subnet for ELB, got {len(subnets)} for {subnet_ids}")
        return sorted(s.get("CidrBlock", "") for s in subnets)

    # -- node security groups -----------------------------------------------------------

    def _update_node_rules(
        self,
        lb_name: str,
        instances: Sequence[InstanceTypeDef],
        *,
        subnet_cidrs: Sequence[str],
        client_cidrs: Sequence[str],
        mappings: Sequence[PortMapping],
    ) -> None:
        """Upstream ``updateInstanceSecurityGroupsForNLB`` (no instances: revoke all ours)."""
        if self.ctx.config.disable_security_group_ingress:
            return
        desired, groups = self._node_groups(instances)
        client_ports = {m.traffic_port for m in mappings}
        protocol = "udp" if any(m.traffic_protocol == "UDP" for m in mappings) else "tcp"
        check_ports: set[int] = set()
        for m in mappings:
            check_ports |= nlbrules.health_ports([m.traffic_port], m.health_check.port)
        legacy = self.ctx.legacy
        vpc_cidr = self._vpc_cidr() if legacy.enabled("k8s-70421") and groups else ""
        for gid in sorted(groups):
            perms = groups[gid].get("IpPermissions", [])
            if legacy.enabled("k8s-70421"):
                plan = nlbrules.legacy_plan_group_70421(
                    perms,
                    lb_name=lb_name,
                    serves_targets=gid in desired,
                    client_protocol=protocol,
                    client_ports=client_ports,
                    client_cidrs=client_cidrs,
                    check_ports=check_ports,
                    vpc_cidr=vpc_cidr,
                )
            else:
                plan = nlbrules.plan_group(
                    perms,
                    lb_name=lb_name,
                    serves_targets=gid in desired,
                    client_protocol=protocol,
                    client_ports=client_ports,
                    client_cidrs=client_cidrs,
                    check_ports=check_ports,
                    subnet_cidrs=subnet_cidrs,
                )
            self._apply_group_plan(gid, perms, plan, lb_name=lb_name)

    def _node_groups(self, instances: Sequence[InstanceTypeDef]) -> tuple[set[str], dict[str, Any]]:
        """The groups the instances' rules go to (one per instance, as upstream's
        ``findSecurityGroupForInstance``) and every group to plan: the cluster's tagged groups
        plus the instances' groups that are untagged (described here)."""
        cluster = self.groups.cluster_groups()
        desired: set[str] = set()
        for inst in instances:
            gid = find_group_for_instance(inst, cluster)
            if gid is None:
                log.warning("ignoring instance without security group: %s", inst.get("InstanceId"))
                continue
            desired.add(gid)
        groups: dict[str, Any] = dict(cluster)
        untagged = sorted(desired - set(cluster))
        if untagged:
            for g in self.groups.describe(group_ids=untagged):
                groups[g["GroupId"]] = g
        return desired, groups

    def _apply_group_plan(
        self,
        gid: str,
        perms: Sequence[Mapping[str, Any]],
        plan: nlbrules.GroupPlan,
        *,
        lb_name: str,
    ) -> None:
        """One group's plan to EC2: revoke, then authorize (each only if non-empty)."""
        revoke = nlbrules.to_permissions(plan.revoke)
        if self.ctx.legacy.enabled("k8s-98278"):
            bundles, again = nlbrules.legacy_bundles_98278(perms, plan, lb_name=lb_name)
            sent = nlbrules.ungroup(bundles)
            rest = [r for r in plan.revoke if r not in sent]
            revoke = bundles + nlbrules.to_permissions(rest)
            plan.grant += again
        if revoke:
            log.info("revoking %d NLB permission(s) of %s on %s", len(revoke), lb_name, gid)
            self.ctx.clients.ec2.revoke_security_group_ingress(
                GroupId=gid, IpPermissions=cast("list[IpPermissionUnionTypeDef]", revoke)
            )
        if plan.grant:
            log.info("authorizing %d NLB rule(s) of %s on %s", len(plan.grant), lb_name, gid)
            self.ctx.clients.ec2.authorize_security_group_ingress(
                GroupId=gid,
                IpPermissions=cast(
                    "list[IpPermissionUnionTypeDef]", nlbrules.to_permissions(plan.grant)
                ),
            )


def needs_new_target_group(tg: TargetGroupTypeDef, mapping: PortMapping) -> bool:
    """Upstream ``ensureTargetGroup``'s test: what an existing target group cannot change (its
    target protocol, health-check protocol and interval) differs from ``mapping``."""
    hc = mapping.health_check
    return (
        tg.get("Protocol") != mapping.traffic_protocol
        or str(tg.get("HealthCheckProtocol", "")).upper() != hc.protocol.upper()
        or tg.get("HealthCheckIntervalSeconds") != hc.interval
    )


def health_check_changes(tg: TargetGroupTypeDef, mapping: PortMapping) -> dict[str, Any]:
    """The ``ModifyTargetGroup`` fields that differ from ``mapping``'s health check (none: in
    step): port, thresholds, and the path of a non-TCP check."""
    hc = mapping.health_check
    change: dict[str, Any] = {}
    if tg.get("HealthCheckPort") != hc.port:
        change["HealthCheckPort"] = hc.port
    if (
        tg.get("HealthyThresholdCount") != hc.healthy_threshold
        or tg.get("UnhealthyThresholdCount") != hc.unhealthy_threshold
    ):
        change["HealthyThresholdCount"] = hc.healthy_threshold
        change["UnhealthyThresholdCount"] = hc.unhealthy_threshold
    if hc.protocol != "TCP" and tg.get("HealthCheckPath") != hc.path:
        change["HealthCheckPath"] = hc.path
    return change


def _tls_fields(mapping: PortMapping) -> dict[str, Any]:
    if mapping.frontend_protocol != "TLS":
        return {}
    out: dict[str, Any] = {"Certificates": [{"CertificateArn": mapping.ssl_certificate_arn}]}
    if mapping.ssl_policy:
        out["SslPolicy"] = mapping.ssl_policy
    return out
