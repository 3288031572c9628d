"""Pure parts of security-group and subnet selection: ordering, node groups, tie-breaks."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.aws.securitygroups import (
    SecurityGroupError,
    find_group_for_instance,
    sort_lb_groups,
)
from controller.aws.subnets import SubnetInfo, pick_subnets, public_subnet_ids
from controller.aws.tags import ClusterTags

TAGS = ClusterTags("lab")
CT = {"kubernetes.io/cluster/lab": "owned"}


def test_sort_annotated_first_managed_middle_extra_last() -> None:
    assert sort_lb_groups(
        ["sg-extra", "sg-managed", "sg-b", "sg-a"],
        security_groups=["sg-a", "sg-b"],
        extra_security_groups=["sg-extra"],
    ) == ["sg-a", "sg-b", "sg-managed", "sg-extra"]


def test_sort_prefers_owned_among_unannotated() -> None:
    assert (
        sort_lb_groups(
            ["sg-manual", "sg-owned"],
            security_groups=[],
            extra_security_groups=[],
            preferred=["sg-owned"],
        )[0]
        == "sg-owned"
    )


_ids = st.lists(st.sampled_from([f"sg-{i}" for i in range(8)]), unique=True, min_size=1)


@settings(max_examples=100, deadline=None)
@given(groups=_ids, data=st.data())
def test_sort_never_puts_extra_ahead_of_a_non_extra(groups: list[str], data: Any) -> None:
    extra = data.draw(st.lists(st.sampled_from(groups), unique=True))
    preferred = data.draw(st.lists(st.sampled_from(groups), unique=True))
    out = sort_lb_groups(
        groups, security_groups=[], extra_security_groups=extra, preferred=preferred
    )
    assert sorted(out) == sorted(groups)
    if any(g not in extra for g in groups):
        assert out[0] not in extra


def inst(*groups: str) -> Any:
    return cast(Any, {"InstanceId": "i-1", "SecurityGroups": [{"GroupId": g} for g in groups]})


def test_find_group_for_instance() -> None:
    assert find_group_for_instance(inst("sg-a", "sg-b"), {"sg-b": {}}) == "sg-b"
    assert find_group_for_instance(inst("sg-a"), {}) == "sg-a"
    assert find_group_for_instance(inst(), {}) is None
    with pytest.raises(SecurityGroupError, match="Multiple tagged"):
        find_group_for_instance(inst("sg-a", "sg-b"), {"sg-a": {}, "sg-b": {}})
    with pytest.raises(SecurityGroupError, match="Multiple untagged"):
        find_group_for_instance(inst("sg-a", "sg-b"), {})


def test_public_subnets_by_explicit_or_main_route_table() -> None:
    subnets: Any = [{"SubnetId": "subnet-1"}, {"SubnetId": "subnet-2"}, {"SubnetId": "subnet-3"}]
    tables: Any = [
        {"Associations": [{"Main": True}], "Routes": [{"GatewayId": "igw-1"}]},
        {"Associations": [{"SubnetId": "subnet-2"}], "Routes": [{"GatewayId": "local"}]},
    ]
    assert public_subnet_ids(subnets, tables) == {"subnet-1", "subnet-3"}


def test_pick_one_subnet_per_zone_with_upstream_tie_breaks() -> None:
    role = {"kubernetes.io/role/elb": "1"}
    cands = [
        SubnetInfo("subnet-b", "z1", {**CT}, True),
        SubnetInfo("subnet-a", "z1", {}, True),
        SubnetInfo("subnet-c", "z1", {**role}, True),  # role tag wins
        SubnetInfo("subnet-e", "z2", {}, True),
        SubnetInfo("subnet-d", "z2", {}, True),  # smallest id wins
        SubnetInfo("subnet-f", "z3", {**CT, **role}, False),  # private
    ]
    assert pick_subnets(cands, internal=False, tags=TAGS) == ["subnet-c", "subnet-d"]
    internal = pick_subnets(cands, internal=True, tags=TAGS)
    assert internal == ["subnet-b", "subnet-d", "subnet-f"]  # cluster tag wins in z1


def test_cluster_tags() -> None:
    assert TAGS.has_cluster_tag({"kubernetes.io/cluster/lab": "shared"})
    assert not TAGS.is_owned({"kubernetes.io/cluster/lab": "shared"})
    assert TAGS.tagged_for_other_cluster({"kubernetes.io/cluster/other": "owned"})
    legacy = ClusterTags("lab", legacy=True)
    assert legacy.owned_tags([("a", "b")]) == {
        "a": "b",
        "kubernetes.io/cluster/lab": "owned",
        "KubernetesCluster": "lab",
    }
