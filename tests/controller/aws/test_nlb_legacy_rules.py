"""The legacy twins of :mod:`controller.aws.nlbrules`, pure: old upstream's port plan over
duplicate group listings (``k8s-70421``) and upstream's whole-piece revokes (``k8s-98278``)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.aws.nlbrules import (
    DescribedRule,
    GroupPlan,
    legacy_bundles_98278,
    legacy_port_changes,
    listings,
)

LB = "lb1"
CLIENT = f"kubernetes.io/rule/nlb/client={LB}"
HEALTH = f"kubernetes.io/rule/nlb/health={LB}"


@pytest.mark.parametrize(
    ("existing", "wanted", "listed", "changes"),
    [
        # a port change, the client and health rule listed: the old port is never revoked
        ({30080}, {30081}, 2, {30081: True}),
        # listed once (what PR #68422's fix amounts to): the old port goes
        ({30080}, {30081}, 1, {30081: True, 30080: False}),
        # odd listings plan as one
        ({30080}, {30081}, 3, {30081: True, 30080: False}),
        # nothing changed, listed twice: the rule in place is revoked (kubernetes#64148)
        ({30080}, {30080}, 2, {30080: False}),
        ({30080}, {30080}, 1, {}),
        # revoked last time: not listed, added again
        (set(), {30080}, 0, {30080: True}),
    ],
)
def test_legacy_port_changes(
    existing: set[int], wanted: set[int], listed: int, changes: dict[int, bool]
) -> None:
    assert legacy_port_changes(existing, wanted, listed) == changes


def test_listings_count_each_described_ipv4_range_of_this_lb() -> None:
    perms: list[dict[str, Any]] = [
        {
            "IpProtocol": "tcp",
            "FromPort": 30080,
            "ToPort": 30080,
            "IpRanges": [
                {"CidrIp": "0.0.0.0/0", "Description": CLIENT},
                {"CidrIp": "10.0.0.0/16", "Description": HEALTH},
                {"CidrIp": "10.1.0.0/16", "Description": "kubernetes.io/rule/nlb/health=lb2"},
            ],
        },
        {"IpProtocol": "icmp", "FromPort": 3, "ToPort": 4, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
    ]
    assert listings(perms, LB) == 2


def _all_traffic(*, pair: str | None, desc: str = CLIENT) -> dict[str, Any]:
    perm: dict[str, Any] = {
        "IpProtocol": "-1",
        "IpRanges": [{"CidrIp": "10.20.0.0/16", "Description": desc}],
    }
    if pair:
        perm["UserIdGroupPairs"] = [{"GroupId": pair, "UserId": "123456789012"}]
    return perm


def test_98278_a_revoked_range_takes_its_group_pair() -> None:
    rule = DescribedRule("-1", -1, -1, "10.20.0.0/16", CLIENT)
    bundles, again = legacy_bundles_98278(
        [_all_traffic(pair="sg-nodes")], GroupPlan([rule], []), lb_name=LB
    )
    assert bundles == [_all_traffic(pair="sg-nodes")]
    assert again == []


def test_98278_a_wanted_rule_alone_is_left_and_one_sharing_is_granted_again() -> None:
    wanted = DescribedRule("tcp", 30080, 30080, "0.0.0.0/0", CLIENT)
    alone = wanted.to_permission()
    assert legacy_bundles_98278([alone], GroupPlan([], []), lb_name=LB) == ([], [])
    shared = {**alone, "UserIdGroupPairs": [{"GroupId": "sg-bastion", "UserId": "1"}]}
    bundles, again = legacy_bundles_98278([shared], GroupPlan([], []), lb_name=LB)
    assert bundles == [shared]
    assert again == [wanted]


def test_98278_another_lbs_rules_are_not_this_syncs() -> None:
    other = _all_traffic(pair="sg-nodes", desc="kubernetes.io/rule/nlb/client=lb2")
    assert legacy_bundles_98278([other], GroupPlan([], []), lb_name=LB) == ([], [])
