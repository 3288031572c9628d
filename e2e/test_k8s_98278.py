"""k8s-98278: a node joining revokes a user's all-traffic rule along with an NLB rule.

Sources: kubernetes#98278 (2021, v1.15+ in-tree provider: a user added an all-traffic rule to
the worker group carrying the NLB's rule description; "Once a new worker node is added, it
will delete the rule, but in addition it will delete other rules that have ALL traffic
configured even though the description is not set to the nlb generated string. this will cause
downtime as it can remove security group rule that allow communication between node and
api-server"); kubernetes#64148 (v1.10: rules removed "when adding/removing worker nodes", whose
own mechanism is scenario ``k8s-70421``). #98278 was closed by the stale bot, not by a fix: the
mechanism is still in upstream v1.33.0.

Mechanism, from the code (kubernetes PR #74692 on; cloud-provider-aws v1.33.0, 40f1f7ac,
``pkg/providers/v1/sets_ippermissions.go`` ``Ungroup`` and ``aws_loadbalancer.go``
``updateInstanceSecurityGroupForNLBTraffic``; upstream's own ``TestUngroup`` in
``sets_ippermissions_test.go`` shows the shape): EC2 lists all rules of one protocol and port
range as one permission, so the user's ``-1`` rule from a CIDR and the node group's ``-1`` rule
from itself come back as ``{-1, IpRanges: [the CIDR], UserIdGroupPairs: [the node group]}``.
``Ungroup`` splits a permission only by IPv4 range (then group pair, then prefix list), so the
piece keeps both; it carries the NLB's description, is not a wanted rule, and is revoked whole
on the next sync (a node joining or leaving starts one): the self rule goes with it.

Legacy switch ``k8s-98278`` revokes such pieces as upstream does (``controller/aws/nlbrules.py``
``legacy_bundles_98278``). Fixed (ours; listed in ``controller/DEVIATIONS.md`` as a difference
from v1.33.0): only the described CIDR rule is revoked; group and prefix-list sources are never
touched.

Evidence: the node group's rules (the self rule), the trail's revokes (the group pair in the
request), and the traffic consequence through the lab's security-group evaluation: the worker
opening the control plane's API server port (``lab.traffic.between``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.catalog import conformance
from e2e.support import (
    NLB_RULE,
    Rule,
    all_traffic_from,
    create_service,
    elb_name,
    ingress_rules,
    nlb_rules,
    nlb_service,
    node_leaves_and_joins,
    node_port_of,
    quiet,
    wait_for,
    wait_hostname,
)
from lab.compose import Lab
from lab.traffic.report import PathVerdict

pytestmark = pytest.mark.standin("re-registers the worker")

API_SERVER_PORT = 6443
#: the report's user rule: all traffic from an office network, described as the NLB's rule
OFFICE = "198.51.100.0/24"


@dataclass(frozen=True)
class Evidence:
    node_group: str
    node_port: int
    rules_before: frozenset[Rule]
    rules_after: frozenset[Rule]
    client_rule_after: bool
    #: the group ids named in each RevokeSecurityGroupIngress on the node group
    revoked_groups: list[list[str]]
    api_before: PathVerdict
    api_after: PathVerdict


def run_scenario(
    lab: Lab, core: Any, ec2: Any, *, legacy: bool, say: Callable[[str], None] = quiet
) -> Evidence:
    aws = lab.aws
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    worker, cp = lab.workers[0].name, lab.control_plane.name
    say("start the controller " + ("with --legacy-behavior=k8s-98278" if legacy else "(fixed)"))
    lab.start_controller(legacy=["k8s-98278"] if legacy else [])
    say("create an NLB Service and wait for its node rules")
    svc = create_service(core, nlb_service("web"))
    wait_hostname(core, "web", timeout=30)
    name = elb_name(svc)
    port = node_port_of(core, "web")
    client = NLB_RULE + f"client={name}"
    wait_for(lambda: nlb_rules(ec2, node_group), what="the NLB's node rules")
    say(f"a user adds all traffic from {OFFICE}, described {client!r}")
    ec2.authorize_security_group_ingress(
        GroupId=node_group,
        IpPermissions=[
            {"IpProtocol": "-1", "IpRanges": [{"CidrIp": OFFICE, "Description": client}]}
        ],
    )
    rules_before = ingress_rules(ec2, node_group)
    api_before = lab.traffic.between(worker, cp, API_SERVER_PORT)
    say(f"the worker {worker} leaves, then joins again")
    mark = node_leaves_and_joins(lab, worker)
    revoked_groups = [
        [v for k, v in e.raw_params.items() if k.endswith(".GroupId")]
        for e in aws.trail.events()
        if e.seq > mark
        and e.action == "RevokeSecurityGroupIngress"
        and e.params.get("GroupId") == node_group
    ]
    return Evidence(
        node_group=node_group,
        node_port=port,
        rules_before=rules_before,
        rules_after=ingress_rules(ec2, node_group),
        client_rule_after=any(
            r.from_port == port and r.description == client for r in nlb_rules(ec2, node_group)
        ),
        revoked_groups=revoked_groups,
        api_before=api_before,
        api_after=lab.traffic.between(worker, cp, API_SERVER_PORT),
    )


def assert_start(ev: Evidence) -> None:
    """Either way: the self rule and the described rule were there, nodes reached the API
    server; after the node change the described rule is gone (it carries the NLB's
    description) and the NLB's own client rule is back."""
    assert all_traffic_from(ev.node_group) in ev.rules_before
    assert Rule("-1", None, None, OFFICE) in ev.rules_before
    assert ev.api_before.allowed, ev.api_before.reason
    assert Rule("-1", None, None, OFFICE) not in ev.rules_after
    assert ev.client_rule_after
    assert ev.revoked_groups, "the node change started a sync that revoked"


def assert_fixed(ev: Evidence) -> None:
    """The self rule survives; nodes still reach the API server; no group source revoked."""
    assert all_traffic_from(ev.node_group) in ev.rules_after
    assert ev.rules_after == ev.rules_before - {Rule("-1", None, None, OFFICE)}
    assert all(groups == [] for groups in ev.revoked_groups), ev.revoked_groups
    assert ev.api_after.allowed, ev.api_after.reason


def assert_reproduced(ev: Evidence) -> None:
    """The self rule went with the described rule: node to API server traffic is denied."""
    assert all_traffic_from(ev.node_group) not in ev.rules_after, "self rule revoked"
    assert [ev.node_group] in ev.revoked_groups, "revoked as the group pair of the piece"
    assert not ev.api_after.allowed, "node to API server traffic cut"
    assert ev.node_group in ev.api_after.reason


@conformance(failure="k8s-98278", expect="reproduce")
def test_reproduce_self_rule_revoked_with_the_described_rule(
    lab: Lab, core_v1: Any, ec2: Any
) -> None:
    ev = run_scenario(lab, core_v1, ec2, legacy=True)
    assert_start(ev)
    assert_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@conformance(failure="k8s-98278", expect="fixed")
def test_fixed_only_the_described_rule_revoked(lab: Lab, core_v1: Any, ec2: Any) -> None:
    ev = run_scenario(lab, core_v1, ec2, legacy=False)
    assert_start(ev)
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_reproduced(ev)
