"""Classic ELBs for ``type: LoadBalancer`` Services (``controller.cloud.LoadBalancer``).

Neighbours: :mod:`controller.aws.annotations` validates the Service first;
:mod:`controller.aws.securitygroups`, :mod:`controller.aws.subnets` and
:class:`controller.aws.instances.InstanceCache` do the per-resource work; the generic service
controller (outside this package) calls the five contract methods.

Design: the AWS call order follows upstream (``reference/upstream-ccm.md`` §3.4-§3.7) so the
lab's call trail can be compared with it: ensure = instances, subnets, LB group and its
ingress, ELB create-or-reconcile, attributes, health check, node-group rules, registration;
update = registration then node-group rules; delete = choose the groups to delete, revoke the
node rules that reference the ELB's group, delete the ELB, delete the groups with a bounded
``DependencyViolation`` retry. Two deliberate differences: all input is validated before the
first call (see annotations), and attributes are modified only when a field we manage
differs, not on every ensure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from controller.aws import sgrules
from controller.aws.annotations import (
    A_EXTRA_SECURITY_GROUPS,
    A_SECURITY_GROUPS,
    Listener,
    LoadBalancerSpec,
    id_list,
    parse_service,
)
from controller.aws.clients import aws_errors, error_code
from controller.aws.context import AWSContext
from controller.aws.instances import InstanceCache
from controller.aws.securitygroups import SecurityGroups, choose_lb_group
from controller.aws.subnets import Subnets
from controller.aws.tags import SERVICE_NAME_TAG, tag_list, tag_map
from controller.aws.wave import MISS
from controller.cloud import (
    CloudError,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    load_balancer_name,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef
    from mypy_boto3_elb.type_defs import LoadBalancerDescriptionTypeDef

log = logging.getLogger(__name__)

PROXY_POLICY = "k8s-proxyprotocol-enabled"
SSL_POLICY_PREFIX = "k8s-SSLNegotiationPolicy-"


class LoadBalancerNotFound(CloudError):
    """``update_load_balancer`` for a Service whose ELB does not exist (yet)."""


def protocols_equal(left: str | None, right: str | None) -> bool:
    """Upstream ``elbProtocolsAreEqual``: the same protocol in any case; absent equals only
    absent (kubernetes/cloud-provider-aws v1.33.0 ``pkg/providers/v1/aws_loadbalancer.go``)."""
    if left is None or right is None:
        return left is right
    return left.casefold() == right.casefold()


def arns_equal(left: str | None, right: str | None) -> bool:
    """Upstream ``awsArnEquals``: the same ARN in any case; absent equals only absent."""
    return protocols_equal(left, right)


def listeners_equal(actual: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """Upstream ``elbListenersAreEqual``: both protocols (any case), both ports and the
    certificate ARN (any case) of two ``Listener`` dicts."""
    return (
        protocols_equal(actual.get("Protocol"), expected.get("Protocol"))
        and protocols_equal(actual.get("InstanceProtocol"), expected.get("InstanceProtocol"))
        and int(actual.get("InstancePort", 0)) == int(expected.get("InstancePort", 0))
        and int(actual.get("LoadBalancerPort", 0)) == int(expected.get("LoadBalancerPort", 0))
        and arns_equal(actual.get("SSLCertificateId"), expected.get("SSLCertificateId"))
    )


def sync_listeners(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any] | None]
) -> tuple[list[Mapping[str, Any]], list[int]]:
    """Upstream ``syncElbListeners``: (listeners to create, load-balancer ports to delete).

    An existing listener equal to a wanted one stays; any other is deleted by its port and
    every wanted listener without an equal existing one is created (so a changed listener is
    deleted, then created again). An absent existing listener is skipped. Creations follow
    ``expected``'s order, deletions ``actual``'s.
    """
    found: set[int] = set()
    delete: list[int] = []
    for have in actual:
        if have is None:
            log.warning("ignoring an empty listener in the load balancer's description")
            continue
        match = next((i for i, want in enumerate(expected) if listeners_equal(have, want)), None)
        if match is None:
            delete.append(int(have.get("LoadBalancerPort", 0)))
        else:
            found.add(match)
    return [want for i, want in enumerate(expected) if i not in found], delete


def _listener_payload(listener: Listener) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Protocol": listener.protocol,
        "LoadBalancerPort": listener.load_balancer_port,
        "InstanceProtocol": listener.instance_protocol,
        "InstancePort": listener.instance_port,
    }
    if listener.ssl_certificate_id:
        out["SSLCertificateId"] = listener.ssl_certificate_id
    return out


def desired_attributes(spec: LoadBalancerSpec) -> dict[str, dict[str, Any]]:
    access: dict[str, Any] = {"Enabled": spec.access_log.enabled}
    if spec.access_log.emit_interval is not None:
        access["EmitInterval"] = spec.access_log.emit_interval
    if spec.access_log.s3_bucket_name:
        access["S3BucketName"] = spec.access_log.s3_bucket_name
    if spec.access_log.s3_bucket_prefix:
        access["S3BucketPrefix"] = spec.access_log.s3_bucket_prefix
    draining: dict[str, Any] = {"Enabled": spec.connection_draining_enabled}
    if spec.connection_draining_timeout is not None:
        draining["Timeout"] = spec.connection_draining_timeout
    return {
        "CrossZoneLoadBalancing": {"Enabled": spec.cross_zone},
        "AccessLog": access,
        "ConnectionDraining": draining,
        "ConnectionSettings": {"IdleTimeout": spec.idle_timeout},
    }


def attributes_differ(desired: dict[str, dict[str, Any]], actual: Any) -> bool:
    """True when any field we set differs from what AWS reports (fields we leave alone,
    such as the default draining timeout, are not compared)."""
    for section, fields in desired.items():
        have = actual.get(section) or {}
        for key, value in fields.items():
            if have.get(key) != value:
                return True
    return False


class ClassicLoadBalancers:
    """``controller.cloud.LoadBalancer`` on Classic ELB."""

    def __init__(
        self, ctx: AWSContext, *, instances: InstanceCache, subnets: Subnets, groups: SecurityGroups
    ) -> None:
        self.ctx = ctx
        self.elb = ctx.clients.elb
        self.instances = instances
        self.subnets = subnets
        self.groups = groups

    # -- helpers -------------------------------------------------------------------------

    def _spec(self, service: Service, *, ensuring: bool = False) -> LoadBalancerSpec:
        return parse_service(service, shared_probe=self.ctx.config.shared_probe, ensuring=ensuring)

    def describe(self, name: str) -> LoadBalancerDescriptionTypeDef | None:
        """The ELB named ``name``, or ``None``. In a sync wave the answer is kept until a
        call changes that ELB; in a batched wave one listing of every ELB answers first
        (:mod:`controller.aws.wave`)."""
        wave = self.ctx.wave
        if wave.active:
            found: Any = wave.get("elb", name)
            if found is MISS and wave.first_listing("elb"):
                since = wave.mark()
                listed: dict[Hashable, Any] = {}
                for page in self.elb.get_paginator("describe_load_balancers").paginate(
                    PaginationConfig={"PageSize": 400}
                ):
                    for each in page.get("LoadBalancerDescriptions", []):
                        listed[each.get("LoadBalancerName", "")] = each
                wave.put_many("elb", listed, since=since)
                found = listed.get(name, MISS)
            if found is not MISS:
                return cast("LoadBalancerDescriptionTypeDef | None", found)
        since = wave.mark()
        lb = self._describe_one(name)
        wave.put("elb", name, lb, since=since)
        return lb

    def _describe_one(self, name: str) -> LoadBalancerDescriptionTypeDef | None:
        try:
            resp = self.elb.describe_load_balancers(LoadBalancerNames=[name])
        except ClientError as exc:
            if error_code(exc) in ("LoadBalancerNotFound", "AccessPointNotFound"):
                return None
            raise
        found = resp.get("LoadBalancerDescriptions", [])
        return found[0] if found else None

    @staticmethod
    def _status(lb: LoadBalancerDescriptionTypeDef) -> LoadBalancerStatus:
        dns = lb.get("DNSName", "")
        return LoadBalancerStatus((LoadBalancerIngress(hostname=dns),) if dns else ())

    def _may_revoke(self, lb_group: str, *, name: str, owned: bool) -> Callable[[], bool]:
        """Whether node rules referencing ``lb_group`` may be revoked for this ELB."""

        def check() -> bool:
            if owned:
                return True  # only this ELB uses its own k8s-elb-* group
            if self.ctx.legacy.enabled("shared-elb-sg"):
                # LEGACY kops#4197 / kubernetes#62489: revoke even though other ELBs still
                # rely on the shared group's node rule.
                return True
            # FIXED (beyond upstream): keep the rule while another ELB still uses the group.
            others = self.groups.load_balancers_using(lb_group, exclude=name)
            if others:
                log.info("keeping node rules for %s: still used by %s", lb_group, others)
            return not others

        return check

    # -- contract ------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return load_balancer_name(service)

    @aws_errors
    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        name = load_balancer_name(service)
        lb = self.describe(name)
        if lb is not None:
            return self._status(lb), True
        if self._leftover_group(name):
            # The ELB is gone but its owned group is not (deletion timed out while AWS still
            # held the group): report "exists" so the controller calls ensure_deleted again
            # instead of dropping the finalizer and leaking the group (cloud-provider-aws #566).
            return None, True
        return None, False

    @aws_errors
    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        # every validation error surfaces before any AWS call
        spec = self._spec(service, ensuring=True)
        name = load_balancer_name(service)
        instances = self.instances.for_nodes(nodes, target_labels=spec.target_node_labels)
        subnet_ids = self.subnets.for_load_balancer(internal=spec.internal, annotated=spec.subnets)

        managed = ""
        if spec.security_groups:
            lb_groups = list(spec.security_groups)
        elif self.ctx.config.elb_security_group:
            lb_groups = [self.ctx.config.elb_security_group]
        else:
            managed = self.groups.ensure_lb_group(
                f"k8s-elb-{name}",
                f"Security group for Kubernetes ELB {name} ({service.key})",
                service_key=service.key,
                extra_tags=spec.additional_tags,
            )
            lb_groups = [managed]
        lb_groups += [g for g in spec.extra_security_groups if g not in lb_groups]
        if managed:
            ports = sorted({x.load_balancer_port for x in spec.listeners})
            self.groups.sync_ingress(
                managed, sgrules.load_balancer_rules(ports, spec.source_ranges)
            )

        lb = self.describe(name)
        if lb is None:
            self._create(name, service, spec, subnet_ids, lb_groups)
        else:
            self._reconcile(name, spec, lb, subnet_ids, lb_groups)
        self._ensure_attributes(name, spec)
        lb = self.describe(name)
        if lb is None:
            raise CloudError(f"load balancer {name} vanished while it was being ensured")
        self._ensure_ssl_policy(name, spec)
        self._ensure_health_check(name, spec, lb)

        lb_group = choose_lb_group(
            self.ctx,
            lb.get("SecurityGroups", []),
            security_groups=spec.security_groups,
            extra_security_groups=spec.extra_security_groups,
            preferred=[managed] if managed else (),
        )
        self.groups.update_node_rules(
            lb_group,
            instances,
            deleting=False,
            may_revoke=self._may_revoke(lb_group, name=name, owned=lb_group == managed),
        )
        self._ensure_instances(name, lb, instances)
        return self._status(lb)

    @aws_errors
    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        spec = self._spec(service)
        name = load_balancer_name(service)
        instances = self.instances.for_nodes(nodes, target_labels=spec.target_node_labels)
        lb = self.describe(name)
        if lb is None:
            raise LoadBalancerNotFound(f"Load balancer not found: {name} ({service.key})")
        self._ensure_ssl_policy(name, spec)
        self._ensure_instances(name, lb, instances)
        lb_group = choose_lb_group(
            self.ctx,
            lb.get("SecurityGroups", []),
            security_groups=spec.security_groups,
            extra_security_groups=spec.extra_security_groups,
        )
        owned = (
            lb_group not in spec.annotated_security_groups
            and lb_group != self.ctx.config.elb_security_group
        )
        self.groups.update_node_rules(
            lb_group,
            instances,
            deleting=False,
            may_revoke=self._may_revoke(lb_group, name=name, owned=owned),
        )

    @aws_errors
    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        name = load_balancer_name(service)
        lb = self.describe(name)
        if lb is None:
            leftover = self._leftover_group(name)
            if leftover:
                self._delete_leftover_group(name, leftover)
            return
        # Lenient parse: a malformed annotation must not block deletion.
        ann = service.annotations
        sgs = id_list(A_SECURITY_GROUPS, ann.get(A_SECURITY_GROUPS, ""))
        extra = id_list(A_EXTRA_SECURITY_GROUPS, ann.get(A_EXTRA_SECURITY_GROUPS, ""))
        lb_sgs = list(lb.get("SecurityGroups", []))
        to_delete = self.groups.groups_to_delete(lb_sgs, annotated=[*sgs, *extra])
        if lb_sgs:
            lb_group = choose_lb_group(
                self.ctx,
                lb_sgs,
                security_groups=sgs,
                extra_security_groups=extra,
                preferred=to_delete,
            )
            deleting = lb_group in to_delete
            self.groups.update_node_rules(
                lb_group,
                [],
                deleting=deleting,
                may_revoke=self._may_revoke(lb_group, name=name, owned=deleting),
            )
        self.elb.delete_load_balancer(LoadBalancerName=name)
        log.info("deleted load balancer %s (%s)", name, service.key)
        if to_delete:
            self.groups.delete_with_backoff(to_delete, lb_name=name)

    # -- steps ---------------------------------------------------------------------------

    def _leftover_group(self, name: str) -> str:
        """The owned ``k8s-elb-<name>`` group of an ELB that no longer exists, if any."""
        if self.ctx.legacy.enabled("k8s-84926"):
            # LEGACY (upstream until today, cloud-provider-aws #566): once the ELB is gone
            # nobody looks for its group again; the group leaks.
            return ""
        found = self.groups.describe(
            filters=[
                {"Name": "group-name", "Values": [f"k8s-elb-{name}"]},
                {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
            ]
        )
        for group in found:
            if self.ctx.tags.is_owned(tag_map(cast(Any, group.get("Tags")))):
                return group["GroupId"]
        return ""

    def _delete_leftover_group(self, name: str, group_id: str) -> None:
        """Revoke every rule that references the leftover group, then delete it."""
        for ref in self.groups.groups_referencing(group_id):
            rules = sgrules.references_group(cast(Any, ref.get("IpPermissions", [])), group_id)
            if rules and ref["GroupId"] != group_id:
                self.ctx.clients.ec2.revoke_security_group_ingress(
                    GroupId=ref["GroupId"], IpPermissions=cast(Any, sgrules.regroup(rules))
                )
        log.info("deleting leftover security group %s of load balancer %s", group_id, name)
        self.groups.delete_with_backoff([group_id], lb_name=name)

    def _create(
        self,
        name: str,
        service: Service,
        spec: LoadBalancerSpec,
        subnet_ids: Sequence[str],
        lb_groups: Sequence[str],
    ) -> None:
        tags = self.ctx.tags.owned_tags([*spec.additional_tags, (SERVICE_NAME_TAG, service.key)])
        kwargs: dict[str, Any] = {
            "LoadBalancerName": name,
            "Listeners": [_listener_payload(x) for x in spec.listeners],
            "Subnets": list(subnet_ids),
            "SecurityGroups": list(lb_groups),
            "Tags": tag_list(tags),
        }
        if spec.internal:
            kwargs["Scheme"] = "internal"
        log.info("creating load balancer %s for %s", name, service.key)
        self.elb.create_load_balancer(**kwargs)
        if spec.proxy_protocol:
            self._create_proxy_policy(name)
            for port in sorted({x.instance_port for x in spec.listeners}):
                self.elb.set_load_balancer_policies_for_backend_server(
                    LoadBalancerName=name, InstancePort=port, PolicyNames=[PROXY_POLICY]
                )

    def _create_proxy_policy(self, name: str) -> None:
        self.elb.create_load_balancer_policy(
            LoadBalancerName=name,
            PolicyName=PROXY_POLICY,
            PolicyTypeName="ProxyProtocolPolicyType",
            PolicyAttributes=[{"AttributeName": "ProxyProtocol", "AttributeValue": "true"}],
        )

    def _reconcile(
        self,
        name: str,
        spec: LoadBalancerSpec,
        lb: LoadBalancerDescriptionTypeDef,
        subnet_ids: Sequence[str],
        lb_groups: Sequence[str],
    ) -> None:
        have_subnets = set(lb.get("Subnets", []))
        want_subnets = set(subnet_ids)
        if have_subnets - want_subnets:
            self.elb.detach_load_balancer_from_subnets(
                LoadBalancerName=name, Subnets=sorted(have_subnets - want_subnets)
            )
        if want_subnets - have_subnets:
            self.elb.attach_load_balancer_to_subnets(
                LoadBalancerName=name, Subnets=sorted(want_subnets - have_subnets)
            )
        have_groups = list(lb.get("SecurityGroups", []))
        if set(have_groups) != set(lb_groups):
            self.elb.apply_security_groups_to_load_balancer(
                LoadBalancerName=name, SecurityGroups=list(lb_groups)
            )
            self._remove_owned_groups(name, [g for g in have_groups if g not in lb_groups], spec)

        create, stale = sync_listeners(
            [_listener_payload(x) for x in spec.listeners],
            [d.get("Listener") for d in lb.get("ListenerDescriptions", [])],
        )
        if stale:
            self.elb.delete_load_balancer_listeners(
                LoadBalancerName=name, LoadBalancerPorts=sorted(set(stale))
            )
        if create:
            self.elb.create_load_balancer_listeners(
                LoadBalancerName=name, Listeners=cast(Any, create)
            )
        self._reconcile_proxy_policy(name, spec, lb)
        if spec.additional_tags:
            self.elb.add_tags(
                LoadBalancerNames=[name], Tags=cast(Any, tag_list(dict(spec.additional_tags)))
            )

    def _reconcile_proxy_policy(
        self, name: str, spec: LoadBalancerSpec, lb: LoadBalancerDescriptionTypeDef
    ) -> None:
        backends = {
            int(b.get("InstancePort", 0)): list(b.get("PolicyNames", []))
            for b in lb.get("BackendServerDescriptions", [])
        }
        ports = {x.instance_port for x in spec.listeners}
        if spec.proxy_protocol:
            existing = lb.get("Policies", {}).get("OtherPolicies", [])
            if PROXY_POLICY not in existing:
                self._create_proxy_policy(name)
            for port in sorted(ports):
                if PROXY_POLICY not in backends.get(port, []):
                    self.elb.set_load_balancer_policies_for_backend_server(
                        LoadBalancerName=name, InstancePort=port, PolicyNames=[PROXY_POLICY]
                    )
        for port, policies in sorted(backends.items()):
            if PROXY_POLICY in policies and (not spec.proxy_protocol or port not in ports):
                self.elb.set_load_balancer_policies_for_backend_server(
                    LoadBalancerName=name, InstancePort=port, PolicyNames=[]
                )

    def _remove_owned_groups(
        self, name: str, replaced: Sequence[str], spec: LoadBalancerSpec
    ) -> None:
        """Groups dropped from the ELB: those we own lose every reference and are deleted;
        for the others (the user's) the node rules that let them in are revoked
        (upstream ``removeOwnedSecurityGroups``; see ``revoke_dropped_group_rules``)."""
        owned = self.groups.groups_to_delete(replaced, annotated=spec.annotated_security_groups)
        for gid in sorted(set(replaced) - set(owned)):
            self.groups.revoke_dropped_group_rules(
                gid, may_revoke=self._may_revoke(gid, name=name, owned=False)
            )
        for gid in owned:
            for ref in self.groups.groups_referencing(gid):
                rules = sgrules.references_group(cast(Any, ref.get("IpPermissions", [])), gid)
                if rules:
                    self.ctx.clients.ec2.revoke_security_group_ingress(
                        GroupId=ref["GroupId"], IpPermissions=cast(Any, sgrules.regroup(rules))
                    )
        if owned:
            self.groups.delete_with_backoff(owned, lb_name=name)

    def _ensure_attributes(self, name: str, spec: LoadBalancerSpec) -> None:
        desired = desired_attributes(spec)
        actual = self.elb.describe_load_balancer_attributes(LoadBalancerName=name).get(
            "LoadBalancerAttributes", {}
        )
        if attributes_differ(desired, actual):
            self.elb.modify_load_balancer_attributes(
                LoadBalancerName=name, LoadBalancerAttributes=cast(Any, desired)
            )

    def _ensure_ssl_policy(self, name: str, spec: LoadBalancerSpec) -> None:
        if spec.ssl_negotiation_policy is None:
            return
        policy = self.ensure_ssl_negotiation_policy(name, spec.ssl_negotiation_policy)
        for listener in spec.listeners:
            if listener.protocol in ("SSL", "HTTPS"):
                self.elb.set_load_balancer_policies_of_listener(
                    LoadBalancerName=name,
                    LoadBalancerPort=listener.load_balancer_port,
                    PolicyNames=[policy],
                )

    def ensure_ssl_negotiation_policy(self, name: str, reference: str) -> str:
        """Upstream ``ensureSSLNegotiationPolicy``: the ELB's ``k8s-SSLNegotiationPolicy-<ref>``
        policy, created when ELB does not have it; its name. ``reference`` is sent as the
        annotation gives it, even empty (ELB then refuses it)."""
        policy = SSL_POLICY_PREFIX + reference
        try:
            self.elb.describe_load_balancer_policies(LoadBalancerName=name, PolicyNames=[policy])
        except ClientError as exc:
            if error_code(exc) not in ("PolicyNotFound", "PolicyNotFoundException"):
                raise
            self.elb.create_load_balancer_policy(
                LoadBalancerName=name,
                PolicyName=policy,
                PolicyTypeName="SSLNegotiationPolicyType",
                PolicyAttributes=[
                    {"AttributeName": "Reference-Security-Policy", "AttributeValue": reference}
                ],
            )
        return policy

    def _ensure_health_check(
        self, name: str, spec: LoadBalancerSpec, lb: LoadBalancerDescriptionTypeDef
    ) -> None:
        hc = spec.health_check
        want = {
            "Target": hc.target,
            "Interval": hc.interval,
            "Timeout": hc.timeout,
            "UnhealthyThreshold": hc.unhealthy_threshold,
            "HealthyThreshold": hc.healthy_threshold,
        }
        have = dict(lb.get("HealthCheck", {}))
        if any(have.get(k) != v for k, v in want.items()):
            self.elb.configure_health_check(LoadBalancerName=name, HealthCheck=cast(Any, want))

    def _ensure_instances(
        self, name: str, lb: LoadBalancerDescriptionTypeDef, instances: Sequence[InstanceTypeDef]
    ) -> None:
        have = {i.get("InstanceId", "") for i in lb.get("Instances", [])}
        want = {i.get("InstanceId", "") for i in instances}
        if want - have:
            self.elb.register_instances_with_load_balancer(
                LoadBalancerName=name, Instances=[{"InstanceId": i} for i in sorted(want - have)]
            )
        if have - want:
            self.elb.deregister_instances_from_load_balancer(
                LoadBalancerName=name, Instances=[{"InstanceId": i} for i in sorted(have - want)]
            )
