"""k8s-70421: an NLB Service's port change leaves the old port open; a node change closes it.

Sources: kubernetes#70421 (v1.12: "When I modify the port of this service ... will only add a
new port in the security group, and will not delete the port that was originally opened");
kubernetes#60825 (v1.9: after a rolling update "security group did not have rules for new EC2
instance") and #64148 (v1.10: "When scaling up or down the amount of worker nodes, all rules in
the security group managed by the controller-manager are removed"). Fixed by kubernetes PR
#68422 (fixes #60825: "valid security group ports were removed unintentionally when updating
a service or when node changes occur ... an assumption that the list of security groups was
actually a set"), then replaced by PR #74692's rule sets (2019).

Mechanism, from the code (cloud-provider-aws carries the in-tree history: ``aws_loadbalancer.go``
at 378a746d, kubernetes' merge of PR #57569 on 2018-02-25 (v1.10 development), and the same
code in the copy of 2018-09-24, 87ce39a8, ``pkg/cloudprovider/providers/aws/``):
``filterForIPRangeDescription`` appends a node group once per IPv4 range described as this
NLB's client or health rule, so a group with one client rule (0.0.0.0/0) and one health rule
(the VPC's CIDR) is listed twice. ``updateInstanceSecurityGroupsForNLBTraffic`` starts a plan
with every wanted port "add" and, per listing, takes the group's desired ports from the plan's
keys, removals included, deletes the ports already open and marks the other open ports
"remove". Listed twice, the second visit undoes the first: on a port change the old port's
"remove" is cancelled (#70421), and on a sync that changes nothing the ports in place are
marked "remove" (#60825, #64148); the next sync, finding no rule, adds them again.

Legacy switch ``k8s-70421`` plans that way (``controller/aws/nlbrules.py``
``legacy_plan_group_70421``, health rules from the VPC's CIDR as then). Fixed (ours, as
upstream v1.33.0): each description's rules become exactly the wanted ports and CIDRs.

Evidence: the node group's NLB rules, the trail's revokes, and the traffic consequence through
the lab's security-group evaluation: may a client outside the VPC open the old / new node port
on the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.catalog import conformance
from e2e.support import (
    ENSURE_OUTCOMES,
    NLB_RULE,
    OUTSIDE_CLIENT,
    DescribedRule,
    create_service,
    get_service,
    instance_groups,
    nlb_rules,
    nlb_service,
    node_leaves_and_joins,
    node_port_of,
    quiet,
    sync_count,
    wait_for,
    wait_hostname,
    wait_synced,
)
from lab.compose import Lab
from lab.traffic.report import Gate

CLIENT = NLB_RULE + "client="


@dataclass(frozen=True)
class Evidence:
    old_port: int
    new_port: int
    rules_before: frozenset[DescribedRule]
    rules_after: frozenset[DescribedRule]
    #: the ports of each RevokeSecurityGroupIngress on the node group after the change
    revoked: list[str]
    old_port_open: Gate
    new_port_open: Gate


def _start(lab: Lab, core: Any, ec2: Any, *, legacy: bool, say: Callable[[str], None]) -> int:
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    say("start the controller " + ("with --legacy-behavior=k8s-70421" if legacy else "(fixed)"))
    lab.start_controller(legacy=["k8s-70421"] if legacy else [])
    say("create an NLB Service and wait for its node rules")
    create_service(core, nlb_service("web"))
    wait_hostname(core, "web", timeout=30)
    port = node_port_of(core, "web")
    wait_for(
        lambda: any(
            r.from_port == port and CLIENT in r.description for r in nlb_rules(ec2, node_group)
        ),
        what="the client rule",
    )
    return port


def _client(lab: Lab, ec2: Any, port: int) -> Gate:
    """May a client outside the VPC open ``port`` on the worker (its groups' inbound rules)?"""
    return lab.traffic.gates.ingress(
        dest_groups=instance_groups(ec2, lab.workers[0].instance_id),
        protocol="tcp",
        port=port,
        source_ip=OUTSIDE_CLIENT,
    )


def _revoked_ports(lab: Lab, node_group: str, since: int) -> list[str]:
    return [
        str(e.params.get("IpPermissions"))
        for e in lab.aws.trail.events()
        if e.seq > since
        and e.action == "RevokeSecurityGroupIngress"
        and e.params.get("GroupId") == node_group
    ]


def run_port_change(
    lab: Lab, core: Any, ec2: Any, *, legacy: bool, say: Callable[[str], None] = quiet
) -> Evidence:
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    old = _start(lab, core, ec2, legacy=legacy, say=say)
    rules_before = nlb_rules(ec2, node_group)
    new = old + 1 if old < 32767 else old - 1
    say(f"move the Service from port 80 / node port {old} to 8080 / {new}")
    mark = lab.aws.trail.last_seq
    ensured = sync_count(core, "web", ENSURE_OUTCOMES)
    svc = get_service(core, "web")
    svc.spec.ports[0].port = 8080
    svc.spec.ports[0].node_port = new
    core.replace_namespaced_service("web", "default", svc)
    wait_for(
        lambda: any(
            r.from_port == new and CLIENT in r.description for r in nlb_rules(ec2, node_group)
        ),
        timeout=30,
        what="the new port's client rule",
    )
    wait_synced(core, "web", ENSURE_OUTCOMES, ensured)
    return Evidence(
        old_port=old,
        new_port=new,
        rules_before=rules_before,
        rules_after=nlb_rules(ec2, node_group),
        revoked=_revoked_ports(lab, node_group, mark),
        old_port_open=_client(lab, ec2, old),
        new_port_open=_client(lab, ec2, new),
    )


def run_node_change(
    lab: Lab, core: Any, ec2: Any, *, legacy: bool, say: Callable[[str], None] = quiet
) -> Evidence:
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    port = _start(lab, core, ec2, legacy=legacy, say=say)
    rules_before = nlb_rules(ec2, node_group)
    worker = lab.workers[0]
    say(f"the worker {worker.name} leaves, then registers again (two node syncs)")
    mark = node_leaves_and_joins(lab, worker.name)
    return Evidence(
        old_port=port,
        new_port=port,
        rules_before=rules_before,
        rules_after=nlb_rules(ec2, node_group),
        revoked=_revoked_ports(lab, node_group, mark),
        old_port_open=_client(lab, ec2, port),
        new_port_open=_client(lab, ec2, port),
    )


def _client_rule_ports(rules: frozenset[DescribedRule]) -> set[int | None]:
    return {r.from_port for r in rules if CLIENT in r.description}


def assert_port_change_fixed(ev: Evidence) -> None:
    """Only the new node port is open: the old port's rules were revoked."""
    assert _client_rule_ports(ev.rules_after) == {ev.new_port}, ev.rules_after
    assert ev.new_port_open.allowed, ev.new_port_open.reason
    assert not ev.old_port_open.allowed, ev.old_port_open.reason
    assert any(f"{ev.old_port}-{ev.old_port}" in r for r in ev.revoked), ev.revoked


def assert_port_change_reproduced(ev: Evidence) -> None:
    """The new port is added, the old one never revoked: still open from 0.0.0.0/0."""
    assert _client_rule_ports(ev.rules_after) == {ev.old_port, ev.new_port}, ev.rules_after
    assert ev.rules_before <= ev.rules_after, "nothing of the old port's rules revoked"
    assert ev.revoked == [], ev.revoked
    assert ev.new_port_open.allowed, ev.new_port_open.reason
    assert ev.old_port_open.allowed, "the old node port stays open to the world"
    assert f"tcp/{ev.old_port} from 0.0.0.0/0" in ev.old_port_open.reason


def assert_node_change_fixed(ev: Evidence) -> None:
    """After the node came back the NLB's rules are as before and its clients get in."""
    assert ev.rules_after == ev.rules_before, (ev.rules_before, ev.rules_after)
    assert ev.old_port_open.allowed, ev.old_port_open.reason


def assert_node_change_reproduced(ev: Evidence) -> None:
    """The sync after the node came back revoked the NLB's client and health rules: clients
    outside the VPC can no longer reach the node port (until some later sync adds them)."""
    assert _client_rule_ports(ev.rules_after) == set(), ev.rules_after
    assert any(f"{ev.old_port}-{ev.old_port}" in r for r in ev.revoked), ev.revoked
    assert not ev.old_port_open.allowed, "the NLB's clients are cut off"


@conformance(failure="k8s-70421", expect="reproduce")
def test_reproduce_port_change_leaves_the_old_port_open(lab: Lab, core_v1: Any, ec2: Any) -> None:
    ev = run_port_change(lab, core_v1, ec2, legacy=True)
    assert_port_change_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_port_change_fixed(ev)


@conformance(failure="k8s-70421", expect="fixed")
def test_fixed_port_change_closes_the_old_port(lab: Lab, core_v1: Any, ec2: Any) -> None:
    ev = run_port_change(lab, core_v1, ec2, legacy=False)
    assert_port_change_fixed(ev)
    with pytest.raises(AssertionError):
        assert_port_change_reproduced(ev)


@pytest.mark.standin("re-registers the worker")
def test_reproduce_node_change_revokes_the_rules(lab: Lab, core_v1: Any, ec2: Any) -> None:
    """kubernetes#60825 / #64148, the same plan on a sync that changes no port."""
    ev = run_node_change(lab, core_v1, ec2, legacy=True)
    assert_node_change_reproduced(ev)
    with pytest.raises(AssertionError):
        assert_node_change_fixed(ev)


@pytest.mark.standin("re-registers the worker")
def test_fixed_node_change_keeps_the_rules(lab: Lab, core_v1: Any, ec2: Any) -> None:
    ev = run_node_change(lab, core_v1, ec2, legacy=False)
    assert_node_change_fixed(ev)
    with pytest.raises(AssertionError):
        assert_node_change_reproduced(ev)
