"""The existence checks of request validation: the ids a call names must exist.

Role: ``validate_existence`` (:data:`lab.aws.validation.validator.RULES`): the VPC of
``CreateSecurityGroup``, the groups of Authorize/Revoke, the instances of
``CreateTags``/``DeleteTags``, the subnets and groups of ELB/ELBv2 calls and a Classic ELB's
``LoadBalancerName`` are looked up in moto's backends; a missing one is refused with the code
the service's model lists (``InvalidGroup.NotFound``, ``SubnetNotFound``, ...).

Design: apart from :mod:`.rules` because these are the only rules that read moto's state
(through the check's lazy :class:`lab.aws.fidelity.MotoView`), under the endpoint's lock.

Neighbours: :mod:`.rules` (:class:`~lab.aws.validation.rules.Check`, the permission walk),
:mod:`.model` (the ELB model's error lists), :mod:`.validator`.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from lab.aws.exceptions import (
    AwsError,
    InvalidGroupNotFound,
    InvalidID,
    InvalidInstanceIDNotFound,
    InvalidPrefixListIDNotFound,
    InvalidSecurityGroup,
    InvalidVpcIDNotFound,
    LoadBalancerNotFound,
    SubnetNotFound,
)
from lab.aws.protocol import AwsRequest
from lab.aws.validation.model import model_validator
from lab.aws.validation.rules import SG_PERMISSION_ACTIONS, Check, permissions, sub
from lab.aws.validation.tree import list_items

if TYPE_CHECKING:
    from lab.aws.fidelity import MotoView


def _missing(message: str, error: type[AwsError]) -> AwsError:
    """An existence check's refusal: AWS's ``...NotFound``-style error for a named id."""
    return error(message, source="validation:existence")


def rule_existence(check: Check) -> AwsError | None:
    """The VPC, subnets and security groups a create/attach call names must exist."""
    request = check.request
    action = request.action
    if request.service == "ec2":
        if action == "CreateSecurityGroup":
            vpc_id = request.params.get("VpcId")
            if vpc_id is not None and vpc_id not in check.view().ec2.vpcs:
                return _missing(f"The vpc ID '{vpc_id}' does not exist", InvalidVpcIDNotFound)
        if action in ("CreateTags", "DeleteTags"):
            return _tagged_instances(check)
        if action in SG_PERMISSION_ACTIONS:
            return _missing_group(check) or _missing_prefix_list(check)
        return None
    if request.service not in ("elb", "elbv2"):
        return None
    if request.service == "elb" and action in _elb_not_found_actions():
        name = request.params.get("LoadBalancerName")
        if name is not None and name not in check.view().elb.load_balancers:
            return _missing(
                f"The specified load balancer does not exist: {name}", LoadBalancerNotFound
            )
    subnets: list[str] = []
    groups: list[str] = []
    if action in ("CreateLoadBalancer", "AttachLoadBalancerToSubnets", "SetSubnets"):
        subnets = [
            v
            for _, v in list_items(check.tree.get("Subnets"), member="member")
            if isinstance(v, str)
        ]
    if action in ("CreateLoadBalancer", "ApplySecurityGroupsToLoadBalancer", "SetSecurityGroups"):
        groups = [
            v
            for _, v in list_items(check.tree.get("SecurityGroups"), member="member")
            if isinstance(v, str)
        ]
    if subnets:
        known_subnets = {
            sid for zone in list(check.view().ec2.subnets.values()) for sid in list(zone)
        }
        found = _first_missing(
            request, subnets, known_subnets, "subnet ID", "subnets", SubnetNotFound
        )
        if found is not None:
            return found
    if groups:
        known = _group_ids(check.view())
        return _first_missing(
            request, groups, known, "security group", "security groups", InvalidSecurityGroup
        )
    return None


def _missing_group(check: Check) -> AwsError | None:
    """The group an Authorize/Revoke call changes, and its source groups, must exist."""
    known = _group_ids(check.view())
    group_id = check.request.params.get("GroupId")
    wanted = [group_id] if group_id else []
    for _, node in permissions(check):
        wanted += sub(node, "Groups", "GroupId")
    for gid in wanted:
        if gid not in known:
            return _missing(f"The security group '{gid}' does not exist", InvalidGroupNotFound)
    return None


def _missing_prefix_list(check: Check) -> AwsError | None:
    """A permission's prefix list must exist ("The prefix list ID 'pl-...' does not exist", as
    EC2's message reaches CloudFormation users; moto stores a rule naming any id)."""
    lists: list[str] = []
    for _, node in permissions(check):
        lists += sub(node, "PrefixListIds", "PrefixListId")
    if not lists:
        return None
    known = set(check.view().ec2.managed_prefix_lists)
    for list_id in lists:
        if list_id not in known:
            message = f"The prefix list ID '{list_id}' does not exist"
            return _missing(message, InvalidPrefixListIDNotFound)
    return None


#: an EC2 instance id as EC2 issues them (8 hex digits before 2016, 17 since)
_INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


def _tagged_instances(check: Check) -> AwsError | None:
    """The instances ``CreateTags``/``DeleteTags`` name must be well-formed ids (``InvalidID``,
    "The ID '...' is not valid": kubernetes/cloud-provider-aws#1387 quotes it for a KWOK
    node's id) of instances that exist (``InvalidInstanceID.NotFound``, "The instance ID '...'
    does not exist", as EC2 answers a tag call on an instance it does not know). Ids of other
    resource types are not checked."""
    ids = [
        v
        for _, v in list_items(check.tree.get("ResourceId"), member=None)
        if isinstance(v, str) and v.startswith("i-")
    ]
    for resource in ids:
        if not _INSTANCE_ID.fullmatch(resource):
            return _missing(f"The ID '{resource}' is not valid", InvalidID)
    if ids:
        known = {str(i.id) for i in check.view().ec2.all_instances()}
        for resource in ids:
            if resource not in known:
                return _missing(
                    f"The instance ID '{resource}' does not exist", InvalidInstanceIDNotFound
                )
    return None


def _first_missing(
    request: AwsRequest,
    ids: list[str],
    known: set[str],
    one: str,
    many: str,
    error: type[AwsError],
) -> AwsError | None:
    """ELBv2 names the first unknown id; Classic ELB says "One or more ... do not exist"."""
    missing = [i for i in ids if i not in known]
    if not missing:
        return None
    return _missing(
        f"The {one} '{missing[0]}' does not exist"
        if request.service == "elbv2"
        else f"One or more of the specified {many} do not exist.",
        error,
    )


@functools.cache
def _elb_not_found_actions() -> frozenset[str]:
    """Classic ELB actions on one named load balancer whose model lists ``LoadBalancerNotFound``."""
    model = model_validator("elb").model
    found = set()
    for name in model.operation_names:
        op = model.operation_model(name)
        codes = {e.metadata.get("error", {}).get("code") for e in op.error_shapes}
        if "LoadBalancerNotFound" in codes and "LoadBalancerName" in op.input_shape.members:
            found.add(name)
    return frozenset(found)


def _group_ids(view: MotoView) -> set[str]:
    return {str(g.id) for groups in list(view.ec2.groups.values()) for g in list(groups.values())}
