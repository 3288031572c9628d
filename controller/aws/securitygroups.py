"""Security groups around a Classic ELB: its own group, node-group rules, safe deletion.

Neighbours: :mod:`controller.aws.loadbalancer` drives these steps in upstream order;
:mod:`controller.aws.sgrules` does the pure rule arithmetic; :mod:`controller.aws.tags` says
which groups are the cluster's.

Design: three questions decide whether the controller breaks a cluster's networking, and each
has one function here so its legacy twin can sit beside it:

* which of the ELB's groups is "the load balancer's group" (:func:`choose_lb_group`; legacy
  ``k8s-84926`` takes the last one AWS lists, the fix sorts deterministically);
* which groups may be deleted (:meth:`SecurityGroups.groups_to_delete`; legacy ``k8s-84256``
  includes annotated groups);
* whether a shared group's node rule may be revoked (legacy ``shared-elb-sg``).

Only rules that reference the chosen group are ever added or revoked on node groups, and no
group the controller does not own is modified or deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from controller.aws import sgrules
from controller.aws.clients import error_code
from controller.aws.context import AWSContext
from controller.aws.tags import SERVICE_NAME_TAG, tag_list, tag_map
from controller.cloud import CloudError

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import (
        FilterTypeDef,
        InstanceTypeDef,
        IpPermissionUnionTypeDef,
        SecurityGroupTypeDef,
    )

log = logging.getLogger(__name__)


class SecurityGroupError(CloudError):
    """A node or load balancer security group cannot be determined or changed."""


class SecurityGroupDeleteTimeout(CloudError):
    """Deleting the load balancer's groups kept failing with ``DependencyViolation``."""


def sort_lb_groups(
    group_ids: Sequence[str],
    *,
    security_groups: Sequence[str],
    extra_security_groups: Sequence[str],
    preferred: Iterable[str] = (),
) -> list[str]:
    """Upstream ``sortELBSecurityGroupList``: annotated ``security-groups`` first (in
    annotation order), then the rest (the managed ``k8s-elb-*`` or ``ElbSecurityGroup``),
    ``extra-security-groups`` last. ``preferred`` (the groups this controller owns) win ties
    so that an ambiguous list still yields the owned group; an extra group is never moved
    ahead of a non-extra one. Stable for equal keys."""
    sg_index = {g: i for i, g in enumerate(security_groups)}
    extra_index = {g: i for i, g in enumerate(extra_security_groups)}
    pref = set(preferred)

    def rank(item: tuple[int, str]) -> tuple[int, int, int]:
        pos, gid = item
        if gid in sg_index:
            order = sg_index[gid]
        elif gid in extra_index:
            order = len(sg_index) + 1 + extra_index[gid]
        else:
            order = len(sg_index)
        return (order, 0 if gid in pref else 1, pos)

    return [gid for _, gid in sorted(enumerate(group_ids), key=rank)]


def choose_lb_group(
    ctx: AWSContext,
    described_groups: Sequence[str],
    *,
    security_groups: Sequence[str],
    extra_security_groups: Sequence[str],
    preferred: Iterable[str] = (),
) -> str:
    """Which of the ELB's groups the node groups must let in (and revoke on delete)."""
    groups = [g for g in described_groups if g]
    if not groups:
        raise SecurityGroupError("could not determine security group for load balancer")
    if ctx.legacy.enabled("k8s-84926"):
        # LEGACY kubernetes#84926 (before PR #92224): the last group in the ELB description,
        # whose order AWS does not guarantee, so an extra group can be taken for the ELB's own.
        if len(groups) > 1:
            log.warning("multiple security groups for load balancer %s; using the last", groups)
        return groups[-1]
    # FIXED (kubernetes PR #92224, cloud-provider-aws PR #752): deterministic choice.
    return sort_lb_groups(
        groups,
        security_groups=security_groups,
        extra_security_groups=extra_security_groups,
        preferred=preferred,
    )[0]


def find_group_for_instance(instance: InstanceTypeDef, tagged: Mapping[str, Any]) -> str | None:
    """Upstream ``findSecurityGroupForInstance``: the instance's one cluster-tagged group, or
    its only group when none is tagged. ``None`` when it has no groups. Each listed group
    counts, so a group listed twice is two groups (upstream's rule); the error names each
    as ``id(name)``."""
    iid = instance.get("InstanceId", "")
    groups = [g for g in instance.get("SecurityGroups", []) if g.get("GroupId")]
    tagged_here = [g for g in groups if g["GroupId"] in tagged]
    untagged = [g for g in groups if g["GroupId"] not in tagged]
    if len(tagged_here) == 1:
        return tagged_here[0]["GroupId"]
    if len(tagged_here) > 1:
        named = " ".join(f"{g['GroupId']}({g.get('GroupName', '')})" for g in tagged_here)
        raise SecurityGroupError(
            f"Multiple tagged security groups found for instance {iid}; ensure only the k8s "
            f"security group is tagged; the tagged groups were {named}"
        )
    if len(untagged) == 1:
        return untagged[0]["GroupId"]
    if not untagged:
        log.warning("no security group found for instance %s", iid)
        return None
    raise SecurityGroupError(
        f"Multiple untagged security groups found for instance {iid}; "
        "ensure the k8s security group is tagged"
    )


def _matches(group: SecurityGroupTypeDef, name: str, values: Sequence[str]) -> bool:
    if name == "group-id":
        return group.get("GroupId", "") in values
    if name == "group-name":
        return group.get("GroupName", "") in values
    if name == "vpc-id":
        return group.get("VpcId", "") in values
    # ip-permission.group-id: a group referenced in an inbound rule
    return any(
        pair.get("GroupId", "") in values
        for perm in group.get("IpPermissions", [])
        for pair in perm.get("UserIdGroupPairs", [])
    )


_LOCAL_FILTERS = frozenset({"group-id", "group-name", "vpc-id", "ip-permission.group-id"})


def select_groups(
    every: Sequence[SecurityGroupTypeDef],
    group_ids: Sequence[str],
    filters: Sequence[FilterTypeDef],
) -> list[SecurityGroupTypeDef] | None:
    """What ``DescribeSecurityGroups(GroupIds=group_ids, Filters=filters)`` answers, read
    from the unfiltered answer ``every``: each filter's values OR'ed, filters AND'ed, as EC2
    does. ``None`` when that cannot be decided here (a filter not handled, a wildcard in a
    value, or an id ``every`` lacks, which EC2 answers with ``InvalidGroup.NotFound``)."""
    by_id = {g.get("GroupId", ""): g for g in every}
    if any(i not in by_id for i in group_ids):
        return None
    wanted: list[tuple[str, list[str]]] = []
    for f in filters:
        name, values = f.get("Name", ""), [str(v) for v in f.get("Values", [])]
        if name not in _LOCAL_FILTERS or any(c in v for v in values for c in "*?\\"):
            return None
        wanted.append((name, values))
    chosen = [by_id[i] for i in dict.fromkeys(group_ids)] if group_ids else list(every)
    return [g for g in chosen if all(_matches(g, n, v) for n, v in wanted)]


class SecurityGroups:
    """EC2 security-group operations, in upstream call order."""

    def __init__(self, ctx: AWSContext) -> None:
        self.ctx = ctx
        self.ec2 = ctx.clients.ec2

    # -- reading -------------------------------------------------------------------------

    def describe(
        self, *, group_ids: Sequence[str] = (), filters: Sequence[FilterTypeDef] = ()
    ) -> list[SecurityGroupTypeDef]:
        """``DescribeSecurityGroups``: in a sync wave the unfiltered answer is asked once; in
        a batched wave every question :func:`select_groups` can answer is answered from it."""
        wave = self.ctx.wave
        if not group_ids and not filters:
            return wave.read("ec2", "DescribeSecurityGroups", self._describe)
        if wave.batched:
            found = select_groups(
                wave.read("ec2", "DescribeSecurityGroups", self._describe), group_ids, filters
            )
            if found is not None:
                return found
        return self._describe(group_ids=group_ids, filters=filters)

    def _describe(
        self, *, group_ids: Sequence[str] = (), filters: Sequence[FilterTypeDef] = ()
    ) -> list[SecurityGroupTypeDef]:
        out: list[SecurityGroupTypeDef] = []
        kwargs: dict[str, Any] = {}
        if group_ids:
            kwargs["GroupIds"] = list(group_ids)
        if filters:
            kwargs["Filters"] = list(filters)
        for page in self.ec2.get_paginator("describe_security_groups").paginate(**kwargs):
            out.extend(page.get("SecurityGroups", []))
        return out

    def cluster_groups(self) -> dict[str, SecurityGroupTypeDef]:
        """Every cluster-tagged group (upstream describes all groups without a filter)."""
        return {
            g["GroupId"]: g
            for g in self.describe()
            if self.ctx.tags.has_cluster_tag(tag_map(cast(Any, g.get("Tags"))))
        }

    def groups_referencing(self, group_id: str) -> list[SecurityGroupTypeDef]:
        return self.describe(filters=[{"Name": "ip-permission.group-id", "Values": [group_id]}])

    # -- the load balancer's own group ------------------------------------------------------

    def ensure_lb_group(
        self,
        name: str,
        description: str,
        *,
        service_key: str,
        extra_tags: Sequence[tuple[str, str]],
    ) -> str:
        """Find ``name`` in the VPC or create it, tagged for the cluster and the Service."""
        existing = self.describe(
            filters=[
                {"Name": "group-name", "Values": [name]},
                {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
            ]
        )
        if existing:
            group = existing[0]
            tags = tag_map(cast(Any, group.get("Tags")))
            if not self.ctx.tags.has_cluster_tag(tags):
                if any(k.startswith("kubernetes.io/cluster/") for k in tags):
                    raise SecurityGroupError(
                        f"security group {group['GroupId']} ({name}) belongs to another cluster"
                    )
                self.ec2.create_tags(
                    Resources=[group["GroupId"]],
                    Tags=cast(Any, tag_list(self.ctx.tags.owned_tags())),
                )
            return group["GroupId"]
        tags = self.ctx.tags.owned_tags([*extra_tags, (SERVICE_NAME_TAG, service_key)])
        for attempt in range(30):
            try:
                created = self.ec2.create_security_group(
                    GroupName=name,
                    Description=description,
                    VpcId=self.ctx.vpc_id,
                    TagSpecifications=[
                        {"ResourceType": "security-group", "Tags": cast(Any, tag_list(tags))}
                    ],
                )
                log.info("created security group %s (%s)", created["GroupId"], name)
                return created["GroupId"]
            except ClientError as exc:
                if error_code(exc) != "InvalidGroup.Duplicate" or attempt == 29:
                    raise
                self.ctx.sleep(1.0)
                again = self.describe(
                    filters=[
                        {"Name": "group-name", "Values": [name]},
                        {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
                    ]
                )
                if again:
                    return again[0]["GroupId"]
        raise SecurityGroupError(f"could not create security group {name}")  # pragma: no cover

    def sync_ingress(self, group_id: str, desired: frozenset[sgrules.Rule]) -> sgrules.RuleDiff:
        """Exact sync of the managed group's ingress (manual rules are removed)."""
        groups = self.describe(group_ids=[group_id])
        if not groups:
            raise SecurityGroupError(f"security group {group_id} not found")
        actual = sgrules.ungroup(cast(Any, groups[0].get("IpPermissions", [])))
        change = sgrules.diff(desired, actual)
        if change.authorize:
            self.ec2.authorize_security_group_ingress(
                GroupId=group_id,
                IpPermissions=cast(
                    "list[IpPermissionUnionTypeDef]", sgrules.regroup(change.authorize)
                ),
            )
        if change.revoke:
            self.ec2.revoke_security_group_ingress(
                GroupId=group_id,
                IpPermissions=cast(
                    "list[IpPermissionUnionTypeDef]", sgrules.regroup(change.revoke)
                ),
            )
        return change

    # -- node groups ---------------------------------------------------------------------

    def _add_lb_rule(self, target: str, lb_group: str) -> None:
        if target == self.ctx.config.elb_security_group:
            return
        groups = self.describe(group_ids=[target])
        have = sgrules.ungroup(cast(Any, groups[0].get("IpPermissions", []))) if groups else set()
        if any(r.protocol == "-1" and r.kind == "group" and r.source == lb_group for r in have):
            return  # an equivalent permission exists (the account is not compared)
        log.info("authorizing all traffic from %s on node group %s", lb_group, target)
        self.ec2.authorize_security_group_ingress(
            GroupId=target,
            IpPermissions=cast(
                "list[IpPermissionUnionTypeDef]",
                sgrules.regroup([sgrules.allow_all_from_group(lb_group)]),
            ),
        )

    def _remove_lb_rule(self, target: str, lb_group: str) -> None:
        if target == self.ctx.config.elb_security_group:
            return
        groups = self.describe(group_ids=[target])
        if not groups:
            return
        rules = [
            r
            for r in sgrules.references_group(
                cast(Any, groups[0].get("IpPermissions", [])), lb_group
            )
            if r.protocol == "-1"
        ]
        if not rules:
            return
        log.info("revoking all traffic from %s on node group %s", lb_group, target)
        self.ec2.revoke_security_group_ingress(
            GroupId=target,
            IpPermissions=cast("list[IpPermissionUnionTypeDef]", sgrules.regroup(rules)),
        )

    def update_node_rules(
        self,
        lb_group: str,
        instances: Sequence[InstanceTypeDef],
        *,
        deleting: bool,
        may_revoke: Callable[[], bool] = lambda: True,
    ) -> None:
        """Upstream ``updateInstanceSecurityGroupsForLoadBalancer``.

        Node groups of ``instances`` get "all traffic from ``lb_group``"; groups that reference
        ``lb_group`` but host no target lose it if cluster-tagged, or always when ``deleting``
        (``lb_group`` is about to be deleted, cloud-provider-aws PR #752). ``may_revoke`` is
        asked (once, lazily) before the first revocation: a shared group keeps its rules.
        """
        if self.ctx.config.disable_security_group_ingress:
            return
        tagged = self.cluster_groups()
        actual = {g["GroupId"]: g["GroupId"] in tagged for g in self.groups_referencing(lb_group)}
        desired: set[str] = set()
        for inst in instances:
            gid = find_group_for_instance(inst, tagged)
            if gid is not None:
                desired.add(gid)
        allowed: bool | None = None
        for gid, is_tagged in sorted(actual.items()):
            if gid in desired:
                continue
            if is_tagged or deleting:
                if allowed is None:
                    allowed = may_revoke()
                if allowed:
                    self._remove_lb_rule(gid, lb_group)
            else:
                log.info("not revoking %s from untagged group %s", lb_group, gid)
        for gid in sorted(desired - set(actual)):
            self._add_lb_rule(gid, lb_group)

    def revoke_dropped_group_rules(self, group_id: str, *, may_revoke: Callable[[], bool]) -> None:
        """A group the user named was dropped from the ELB: revoke the node rules that let it in.

        Upstream ``removeOwnedSecurityGroups`` revokes every rule that references the dropped
        group on every cluster-tagged group. Ours revokes only the rule shape this controller
        adds (all traffic from the group), only on cluster-tagged groups, never a group's rule
        naming itself (a node group's node-to-node rule), and not while ``may_revoke`` says
        another load balancer still lists the group. Port-specific rules and untagged groups
        are the user's and are kept.
        """
        if self.ctx.config.disable_security_group_ingress:
            return
        allowed: bool | None = None
        for ref in self.groups_referencing(group_id):
            target = ref["GroupId"]
            if target in (group_id, self.ctx.config.elb_security_group):
                continue
            if not self.ctx.tags.has_cluster_tag(tag_map(cast(Any, ref.get("Tags")))):
                log.info("not revoking %s from untagged group %s", group_id, target)
                continue
            rules = [
                r
                for r in sgrules.references_group(cast(Any, ref.get("IpPermissions", [])), group_id)
                if r.protocol == "-1"
            ]
            if not rules:
                continue
            if allowed is None:
                allowed = may_revoke()
            if not allowed:
                return
            log.info(
                "revoking all traffic from dropped group %s on node group %s", group_id, target
            )
            self.ec2.revoke_security_group_ingress(
                GroupId=target,
                IpPermissions=cast("list[IpPermissionUnionTypeDef]", sgrules.regroup(rules)),
            )

    # -- deletion ------------------------------------------------------------------------

    def groups_to_delete(self, lb_groups: Sequence[str], *, annotated: Iterable[str]) -> list[str]:
        """Upstream ``buildSecurityGroupsToDelete``: owned-by-cluster groups of the ELB, never
        ``ElbSecurityGroup``, never untagged groups, never annotated ones."""
        ids = [g for g in lb_groups if g]
        if not ids:
            return []
        described = self.describe(filters=[{"Name": "group-id", "Values": ids}])
        annotated_set = set(annotated)
        out: list[str] = []
        for group in described:
            gid = group["GroupId"]
            if gid == self.ctx.config.elb_security_group:
                continue
            if not self.ctx.tags.has_cluster_tag(tag_map(cast(Any, group.get("Tags")))):
                log.info("not deleting untagged security group %s", gid)
                continue
            if gid in annotated_set:
                if self.ctx.legacy.enabled("k8s-84256"):
                    # LEGACY kubernetes#84256 (before PR #84265): annotated groups are
                    # deletion candidates like any cluster-tagged group.
                    out.append(gid)
                # FIXED (PR #84265): groups named in annotations belong to the user.
                continue
            out.append(gid)
        return sorted(out)

    def delete_with_backoff(self, group_ids: Sequence[str], *, lb_name: str) -> None:
        """Delete each group, retrying ``DependencyViolation`` every ``sg_delete_interval``
        until ``sg_delete_timeout`` (upstream 5 s / 10 min); any other error aborts."""
        pending = list(group_ids)
        deadline = self.ctx.clock() + self.ctx.sg_delete_timeout
        while True:
            for gid in list(pending):
                try:
                    self.ec2.delete_security_group(GroupId=gid)
                    log.info("deleted security group %s of load balancer %s", gid, lb_name)
                    pending.remove(gid)
                except ClientError as exc:
                    code = error_code(exc)
                    if code == "InvalidGroup.NotFound":
                        pending.remove(gid)
                    elif code == "DependencyViolation":
                        log.info("security group %s still in use (%s); will retry", gid, exc)
                    else:
                        raise
            if not pending:
                return
            if self.ctx.clock() + self.ctx.sg_delete_interval > deadline:
                raise SecurityGroupDeleteTimeout(
                    f"could not delete security groups {', '.join(pending)} for Load Balancer "
                    f"{lb_name}: still in use (DependencyViolation) after "
                    f"{self.ctx.sg_delete_timeout:g}s"
                )
            self.ctx.sleep(self.ctx.sg_delete_interval)

    def load_balancers_using(self, group_id: str, *, exclude: str) -> list[str]:
        """Names of other ELBs that list ``group_id`` (for the shared-group fix)."""
        elb = self.ctx.clients.elb
        names: list[str] = []
        for page in elb.get_paginator("describe_load_balancers").paginate():
            for lb in page.get("LoadBalancerDescriptions", []):
                name = lb.get("LoadBalancerName", "")
                if name != exclude and group_id in lb.get("SecurityGroups", []):
                    names.append(name)
        return names
