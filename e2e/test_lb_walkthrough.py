"""lb-walkthrough: a ``type: LoadBalancer`` Service becoming a Classic ELB, read from the trail.

Source: seed 001 (a kops cluster's Service traced to its ELB through the code and CloudTrail);
catalog §7; exact call order in ``reference/upstream-ccm.md`` §3.4 (new ELB), §3.6 (node-group
rule) and §3.7 (deletion); the generic service controller's events and finalizer in §7.

Story. The write-up followed a Service from ``kubectl expose`` to a configured ELB and used the
CloudTrail event history to see which AWS calls the controller makes. The lab's trail plays
CloudTrail here. For a new Service the controller (after the informer, work queue and the
finalizer ``service.kubernetes.io/load-balancer-cleanup``, event ``EnsuringLoadBalancer``)
creates the ELB's own group ``k8s-elb-<lbName>`` and syncs its ingress (one rule per Service
port plus ICMP 3/4 for path-MTU discovery, from the source ranges), creates the ELB, reads and
(if needed) modifies its attributes, configures the health check, lets the ELB's group into the
node group ("all traffic from"), registers the worker's instance, records
``EnsuredLoadBalancer`` and writes the ELB's DNS name into ``status.loadBalancer``. Deletion
revokes the node rule before deleting the ELB and then its group.

The write-up's two cloud-config switches: ``DisableSecurityGroupIngress`` (the node group's
rules are never touched) and ``ElbSecurityGroup`` (that group is used for every ELB, never
created nor deleted). Annotations override the defaults (health check, idle timeout, draining,
cross-zone, internal, source ranges); a malformed one fails the sync before any AWS change.

``shared-elb-sg`` (beyond upstream; kops#4197, kops#6583, kubernetes#62489): with a shared
``ElbSecurityGroup`` the node group holds one "all traffic from <shared group>" rule that every
ELB needs. Deleting one Service revokes it (legacy, ``--legacy-behavior=shared-elb-sg``), cutting
the others off until their next sync; fixed, the rule stays while another ELB lists the group.

Stand-ins on sim: the kubelet stand-in registers the nodes (``lab.cluster.kubelet``; the
control plane carries kubeadm's exclusion label, so only the worker is registered with the
ELB); NodePorts are allocated by the API simulator. The AWS side is identical on kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from e2e.catalog import conformance
from e2e.support import (
    ANN,
    FINALIZER,
    Rule,
    all_traffic_from,
    cluster_tag,
    controller_calls,
    create_service,
    create_user_group,
    describe_elb,
    elb_name,
    finalizers,
    get_service,
    group_exists,
    group_id_by_name,
    ingress_rules,
    is_mutating,
    lb_service,
    registered_instances,
    wait_for,
    wait_gone,
    wait_hostname,
)
from e2e.workloads import create_pod, decided_traffic, wait_running
from lab.compose import Lab
from lab.traffic.report import TrafficReport

pytestmark = pytest.mark.owncluster(
    "the Service's pod and the traffic through its ELB run on the lab's nodes"
)

SG_RETRY = ("--sg-delete-retry", "0.2s,2s")
EVERYWHERE = "0.0.0.0/0"


# --- the trail as a sequence of steps ------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One expected AWS call: its action, summarized parameters it must carry (a scalar equal
    to the value or a list containing it), its error code, and whether it has no filter."""

    action: str
    params: Mapping[str, str] = field(default_factory=dict)
    error_code: str | None = None
    unfiltered: bool = False

    def matches(self, event: Any) -> bool:
        if event.action != self.action or event.error_code != self.error_code:
            return False
        if self.unfiltered and ("Filters" in event.params or "GroupIds" in event.params):
            return False
        for key, want in self.params.items():
            have = event.params.get(key)
            if have != want and not (isinstance(have, list) and want in have):
                return False
        return True

    def __str__(self) -> str:
        extra = f" {dict(self.params)}" if self.params else ""
        return f"{self.action}{extra}" + (f" -> {self.error_code}" if self.error_code else "")


def assert_in_order(calls: Sequence[Any], steps: Sequence[Step]) -> list[Any]:
    """Each step matches a call after the previous step's call; returns the matched calls."""
    found: list[Any] = []
    pos = 0
    for step in steps:
        for index in range(pos, len(calls)):
            if step.matches(calls[index]):
                found.append(calls[index])
                pos = index + 1
                break
        else:
            seen = "\n  ".join(f"{e.action} {e.params} {e.error_code or ''}" for e in calls)
            after = f"{found[-1].action} (seq {found[-1].seq})" if found else "the start"
            raise AssertionError(f"no call {step} after {after}; calls were:\n  {seen}")
    return found


def mutations(calls: Sequence[Any]) -> list[tuple[str, str]]:
    """(action, target) of every mutating call, in order."""
    return [
        (
            e.action,
            str(
                e.params.get("GroupId")
                or e.params.get("LoadBalancerName")
                or e.params.get("GroupName")
                or ""
            ),
        )
        for e in calls
        if is_mutating(e.action)
    ]


def touches_group(calls: Sequence[Any], group_id: str) -> list[Any]:
    """Authorize/Revoke calls whose target is ``group_id``."""
    return [
        e
        for e in calls
        if e.action in ("AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress")
        and e.params.get("GroupId") == group_id
    ]


def assert_before(reasons: Sequence[str], first: str, then: str) -> None:
    assert first in reasons, f"{first} in {reasons}"
    assert then in reasons, f"{then} in {reasons}"
    assert reasons.index(first) < reasons.index(then), reasons


def ordered_reasons(core: Any, name: str) -> list[str]:
    """Event reasons about Service ``name`` in recording order (event names end in the hex
    nanosecond time they were made, as upstream's recorder names them)."""
    listed = core.list_namespaced_event(
        "default", field_selector=f"involvedObject.kind=Service,involvedObject.name={name}"
    )
    return [e.reason for e in sorted(listed.items, key=lambda e: e.metadata.name)]


# --- one Service's life: create, then delete ----------------------------------------------------


@dataclass(frozen=True)
class Lifecycle:
    name: str
    node_ports: list[int]
    node_group: str
    node_rules_before: frozenset[Rule]
    hostname: str
    lb: dict[str, Any]
    attributes: dict[str, Any]
    managed_group: str | None
    lb_group_rules: dict[str, frozenset[Rule]]
    node_rules_after_create: frozenset[Rule]
    registered: set[str]
    finalizers_after_create: list[str]
    reasons_after_create: list[str]
    create_calls: list[Any]
    delete_calls: list[Any]
    elb_after_delete: dict[str, Any] | None
    groups_after_delete: dict[str, bool]
    node_rules_after_delete: frozenset[Rule]
    reasons_after_delete: list[str]
    service_gone: bool
    #: requests through the ELB to the Service's pod once the health checks decided
    traffic: TrafficReport
    #: after the user opens the node group to the ELB's group themselves (only when asked)
    traffic_after_opening: TrafficReport | None = None


def run_lifecycle(
    lab: Lab,
    core: Any,
    ec2: Any,
    elb: Any,
    *,
    body: dict[str, Any] | None = None,
    extra_global: Sequence[tuple[str, str]] = (),
    legacy: Sequence[str] = (),
    open_node_group: bool = False,
) -> Lifecycle:
    """One Service's life, with a pod behind it whose traffic is judged after the create
    (``open_node_group``: then the user adds "all traffic from the ELB's group" to the node
    group, as ``DisableSecurityGroupIngress`` leaves them to, and traffic is judged again)."""
    aws = lab.aws
    assert aws is not None
    assert lab.topology is not None
    body = body or lb_service("web", ports=(80, 443))
    svc_name = body["metadata"]["name"]
    node_group = lab.topology.node_security_group.group_id
    node_rules_before = ingress_rules(ec2, node_group)
    if extra_global:
        lab.write_cloud_config(extra_global=extra_global)
    mark = aws.trail.last_seq
    lab.start_controller(legacy=legacy, args=SG_RETRY)
    svc = create_service(core, body)
    name = elb_name(svc)
    create_pod(core, f"{svc_name}-0", namespace="default", app=svc_name, node=lab.workers[0].name)
    wait_running(lab, core, f"{svc_name}-0", "default")
    hostname = wait_hostname(core, svc_name)
    wait_for(
        lambda: "EnsuredLoadBalancer" in ordered_reasons(core, svc_name),
        what="the EnsuredLoadBalancer event",
    )
    lb = describe_elb(elb, name)
    assert lb is not None
    lb_groups = list(lb["SecurityGroups"])
    created: dict[str, Any] = {
        "name": name,
        "node_ports": [p.node_port for p in get_service(core, svc_name).spec.ports],
        "node_group": node_group,
        "node_rules_before": node_rules_before,
        "hostname": hostname,
        "lb": lb,
        "attributes": elb.describe_load_balancer_attributes(LoadBalancerName=name)[
            "LoadBalancerAttributes"
        ],
        "managed_group": group_id_by_name(ec2, f"k8s-elb-{name}"),
        "lb_group_rules": {g: ingress_rules(ec2, g) for g in lb_groups},
        "node_rules_after_create": ingress_rules(ec2, node_group),
        "registered": registered_instances(elb, name),
        "finalizers_after_create": finalizers(core, svc_name),
        "reasons_after_create": ordered_reasons(core, svc_name),
        "create_calls": controller_calls(aws.trail, since_seq=mark),
        "traffic": decided_traffic(lab, svc_name),
    }
    if open_node_group:
        ec2.authorize_security_group_ingress(
            GroupId=node_group,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": lb_groups[0]}]}],
        )
        created["traffic_after_opening"] = wait_for(
            lambda: (r := lab.traffic.send(svc_name, requests=60)).answered_total == 60 and r,
            timeout=30,
            what="the pod answering once the node group lets the ELB in",
        )
        ec2.revoke_security_group_ingress(
            GroupId=node_group,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": lb_groups[0]}]}],
        )  # the user's rule goes before the delete, so the delete's calls are the controller's

    mark = aws.trail.last_seq
    core.delete_namespaced_service(svc_name, "default")
    wait_gone(core, svc_name, timeout=30)
    # Upstream removes the finalizer first and records DeletedLoadBalancer right after.
    wait_for(
        lambda: "DeletedLoadBalancer" in ordered_reasons(core, svc_name),
        what="the DeletedLoadBalancer event",
    )
    return Lifecycle(
        **created,
        delete_calls=controller_calls(aws.trail, since_seq=mark),
        elb_after_delete=describe_elb(elb, name),
        groups_after_delete={g: group_exists(ec2, g) for g in lb_groups},
        node_rules_after_delete=ingress_rules(ec2, node_group),
        reasons_after_delete=ordered_reasons(core, svc_name),
        service_gone=get_service(core, svc_name) is None,
    )


# --- assertion sets -------------------------------------------------------------------------------


def create_steps(ev: Lifecycle, *, vpc_id: str, worker: str) -> list[Step]:
    """Upstream §3.4 for a new CLB with its own group (ignoring cached lookups)."""
    name, sg, nodes = ev.name, ev.managed_group or "<k8s-elb group>", ev.node_group
    return [
        Step("DescribeSubnets", {"Filters": f"vpc-id={vpc_id}"}),
        Step("DescribeRouteTables", {"Filters": f"vpc-id={vpc_id}"}),
        Step("DescribeSecurityGroups", {"Filters": f"group-name=k8s-elb-{name}"}),
        Step("CreateSecurityGroup", {"GroupName": f"k8s-elb-{name}", "VpcId": vpc_id}),
        Step("DescribeSecurityGroups", {"GroupIds": sg}),
        Step("AuthorizeSecurityGroupIngress", {"GroupId": sg}),
        Step("DescribeLoadBalancers", {"LoadBalancerNames": name}, "LoadBalancerNotFound"),
        Step("CreateLoadBalancer", {"LoadBalancerName": name, "SecurityGroups": sg}),
        Step("DescribeLoadBalancerAttributes", {"LoadBalancerName": name}),
        Step("DescribeLoadBalancers", {"LoadBalancerNames": name}),
        Step("ConfigureHealthCheck", {"LoadBalancerName": name}),
        Step("DescribeSecurityGroups", unfiltered=True),
        Step("DescribeSecurityGroups", {"Filters": f"ip-permission.group-id={sg}"}),
        Step("DescribeSecurityGroups", {"GroupIds": nodes}),
        Step(
            "AuthorizeSecurityGroupIngress", {"GroupId": nodes, "IpPermissions": f"all from {sg}"}
        ),
        Step("RegisterInstancesWithLoadBalancer", {"LoadBalancerName": name, "Instances": worker}),
    ]


def load_balancer_rules(ports: Sequence[int], cidrs: Sequence[str]) -> frozenset[Rule]:
    """The ELB group's exact ingress: each Service port and ICMP 3/4, from each range."""
    return frozenset(
        [Rule("tcp", p, p, c) for p in ports for c in cidrs]
        + [Rule("icmp", 3, 4, c) for c in cidrs]
    )


def assert_upstream_create(ev: Lifecycle, lab: Lab, *, ports: Sequence[int] = (80, 443)) -> None:
    """The walkthrough's path for a new Service, call by call, and its end state."""
    assert lab.topology is not None
    worker = lab.workers[0].instance_id
    sg = ev.managed_group
    assert sg is not None, "the controller creates k8s-elb-<lbName>"
    found = assert_in_order(
        ev.create_calls, create_steps(ev, vpc_id=lab.topology.vpc_id, worker=worker)
    )
    by_action = {e.action: e for e in found}
    assert mutations(ev.create_calls) == [
        ("CreateSecurityGroup", f"k8s-elb-{ev.name}"),
        ("AuthorizeSecurityGroupIngress", sg),
        ("CreateLoadBalancer", ev.name),
        ("ConfigureHealthCheck", ev.name),
        ("AuthorizeSecurityGroupIngress", ev.node_group),
        ("RegisterInstancesWithLoadBalancer", ev.name),
    ], "exactly these changes, in this order"
    assert sorted(found[5].params["IpPermissions"]) == sorted(
        [f"tcp {p}-{p} from {EVERYWHERE}" for p in ports] + [f"icmp 3-4 from {EVERYWHERE}"]
    )
    assert ev.lb_group_rules[sg] == load_balancer_rules(ports, [EVERYWHERE])
    create = by_action["CreateLoadBalancer"]
    assert create.params["Listeners"] == [
        f"TCP:{p}->TCP:{n}" for p, n in zip(ports, ev.node_ports, strict=True)
    ]
    assert sorted(create.params["Subnets"]) == sorted(
        s.subnet_id for s in lab.topology.subnets.values()
    ), "one public subnet per zone"
    assert ev.node_rules_after_create == ev.node_rules_before | {all_traffic_from(sg)}
    assert ev.registered == {worker}, "the worker only (the control plane is excluded)"
    assert_before(ev.reasons_after_create, "EnsuringLoadBalancer", "EnsuredLoadBalancer")
    assert FINALIZER in ev.finalizers_after_create
    assert ev.hostname.endswith(".elb.amazonaws.com")
    assert ev.hostname == ev.lb["DNSName"]


def assert_default_settings(ev: Lifecycle) -> None:
    """What an unannotated Service gets (upstream §2, §3.3)."""
    assert ev.lb["Scheme"] == "internet-facing"
    assert ev.lb["HealthCheck"] == {
        "Target": f"TCP:{ev.node_ports[0]}",
        "Interval": 10,
        "Timeout": 5,
        "UnhealthyThreshold": 6,
        "HealthyThreshold": 2,
    }
    assert ev.attributes["ConnectionSettings"]["IdleTimeout"] == 60
    assert ev.attributes["CrossZoneLoadBalancing"]["Enabled"] is False
    assert ev.attributes["ConnectionDraining"]["Enabled"] is False
    if ev.managed_group is not None:
        assert {r.source for r in ev.lb_group_rules[ev.managed_group]} == {EVERYWHERE}


def assert_upstream_delete(ev: Lifecycle) -> None:
    """§3.7: revoke the node rule, delete the ELB, then its group; everything as before."""
    sg = ev.managed_group
    assert sg is not None
    assert_in_order(
        ev.delete_calls,
        [
            Step("DescribeLoadBalancers", {"LoadBalancerNames": ev.name}),
            Step("DescribeSecurityGroups", {"Filters": f"group-id={sg}"}),
            Step("DescribeSecurityGroups", unfiltered=True),
            Step("DescribeSecurityGroups", {"Filters": f"ip-permission.group-id={sg}"}),
            Step(
                "RevokeSecurityGroupIngress",
                {"GroupId": ev.node_group, "IpPermissions": f"all from {sg}"},
            ),
            Step("DeleteLoadBalancer", {"LoadBalancerName": ev.name}),
            Step("DeleteSecurityGroup", {"GroupId": sg}),
        ],
    )
    assert mutations(ev.delete_calls) == [
        ("RevokeSecurityGroupIngress", ev.node_group),
        ("DeleteLoadBalancer", ev.name),
        ("DeleteSecurityGroup", sg),
    ], "revoke, then delete the ELB, then its group, each once"
    assert ev.elb_after_delete is None
    assert ev.groups_after_delete == {sg: False}, "k8s-elb-<lbName> is gone"
    assert ev.node_rules_after_delete == ev.node_rules_before, "node group exactly as before"
    assert ev.service_gone, "the finalizer was removed, so the Service is gone"
    assert_before(ev.reasons_after_delete, "DeletingLoadBalancer", "DeletedLoadBalancer")
    assert "SyncLoadBalancerFailed" not in ev.reasons_after_delete


def assert_node_group_untouched(ev: Lifecycle) -> None:
    """``DisableSecurityGroupIngress``: no call changes the node group's rules."""
    assert touches_group(ev.create_calls + ev.delete_calls, ev.node_group) == []
    assert ev.node_rules_after_create == ev.node_rules_before
    assert ev.node_rules_after_delete == ev.node_rules_before


def assert_uses_configured_group(ev: Lifecycle, group: str, rules: frozenset[Rule]) -> None:
    """``ElbSecurityGroup``: the ELB uses that group; it is never created, edited nor deleted."""
    calls = ev.create_calls + ev.delete_calls
    assert ev.lb["SecurityGroups"] == [group]
    assert ev.managed_group is None, "no k8s-elb-* group"
    assert [e for e in calls if e.action in ("CreateSecurityGroup", "DeleteSecurityGroup")] == []
    assert touches_group(calls, group) == [], "its own rules are the operator's"
    assert ev.lb_group_rules[group] == rules
    assert ev.groups_after_delete == {group: True}, "still there after the Service is gone"


def assert_no_mutation(calls: Sequence[Any]) -> None:
    assert mutations(calls) == [], "not a single Create/Authorize/Register/Modify/Delete call"


# --- the path of a new Service, and its deletion ----------------------------------------------


def assert_pod_answered(ev: Lifecycle) -> None:
    assert ev.traffic.answered_total == 60, ev.traffic.to_json()
    assert dict(ev.traffic.answered) == {"default/web-0": 60}


def test_new_service_follows_the_walkthrough(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    ev = run_lifecycle(lab, core_v1, ec2, elb)
    assert_pod_answered(ev)
    assert_upstream_create(ev, lab)
    assert_default_settings(ev)
    assert_upstream_delete(ev)
    # Each switch's assertion set fails on the default path, for the right reason.
    with pytest.raises(AssertionError):
        assert_node_group_untouched(ev)
    with pytest.raises(AssertionError):
        assert_no_mutation(ev.create_calls)


def test_disable_security_group_ingress(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    ev = run_lifecycle(
        lab,
        core_v1,
        ec2,
        elb,
        extra_global=[("DisableSecurityGroupIngress", "true")],
        open_node_group=True,
    )
    assert_node_group_untouched(ev)
    # What the user sees: the ELB's health checks are dropped at the node group, so no request
    # gets through, until they open the node group to the ELB's group themselves.
    assert ev.traffic.answered_total == 0, ev.traffic.to_json()
    ((hop, reason),) = ev.traffic.dropped
    assert hop == "elb", ev.traffic.to_json()
    assert "the security groups drop the health check" in reason, reason
    assert f"no inbound rule of {ev.node_group}" in reason, reason
    assert ev.traffic_after_opening is not None
    assert dict(ev.traffic_after_opening.answered) == {"default/web-0": 60}
    with pytest.raises(AssertionError):
        assert_pod_answered(ev)
    # Everything else is as usual: own group with its exact ingress, ELB, registration.
    assert ev.managed_group is not None
    assert ev.lb_group_rules[ev.managed_group] == load_balancer_rules((80, 443), [EVERYWHERE])
    assert ev.registered == {lab.workers[0].instance_id}
    assert ev.elb_after_delete is None
    assert ev.groups_after_delete == {ev.managed_group: False}
    assert ev.service_gone
    with pytest.raises(AssertionError):
        assert_upstream_create(ev, lab)


def test_elb_security_group(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    assert lab.topology is not None
    operator_rules = frozenset({Rule("tcp", 80, 80, EVERYWHERE), Rule("tcp", 443, 443, EVERYWHERE)})
    configured = create_user_group(
        ec2,
        vpc_id=lab.topology.vpc_id,
        name="elbs.ccm-lab",
        tags={cluster_tag(lab.config.cluster_id): "owned"},
        rules=operator_rules,
    )
    ev = run_lifecycle(lab, core_v1, ec2, elb, extra_global=[("ElbSecurityGroup", configured)])
    assert_uses_configured_group(ev, configured, operator_rules)
    assert group_id_by_name(ec2, f"k8s-elb-{ev.name}") is None
    # The node group still lets that group in while the ELB exists, and is restored after.
    assert ev.node_rules_after_create == ev.node_rules_before | {all_traffic_from(configured)}
    assert ev.node_rules_after_delete == ev.node_rules_before
    assert ev.registered == {lab.workers[0].instance_id}
    assert ev.elb_after_delete is None
    assert ev.service_gone
    with pytest.raises(AssertionError):
        assert_upstream_create(ev, lab)


# --- annotations ----------------------------------------------------------------------------


OVERRIDES = {
    ANN + "healthcheck-protocol": "HTTP",
    ANN + "healthcheck-port": "8080",
    ANN + "healthcheck-path": "/healthz",
    ANN + "healthcheck-healthy-threshold": "3",
    ANN + "healthcheck-unhealthy-threshold": "4",
    ANN + "healthcheck-timeout": "6",
    ANN + "healthcheck-interval": "15",
    ANN + "connection-idle-timeout": "120",
    ANN + "connection-draining-enabled": "true",
    ANN + "connection-draining-timeout": "45",
    ANN + "cross-zone-load-balancing-enabled": "true",
    ANN + "internal": "true",
}
SOURCE_RANGES = ("10.0.0.0/8", "192.168.1.0/24")


def test_annotations_override_defaults(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    body = lb_service("web", annotations=OVERRIDES, ports=(80,), source_ranges=SOURCE_RANGES)
    ev = run_lifecycle(lab, core_v1, ec2, elb, body=body)
    assert ev.lb["HealthCheck"] == {
        "Target": "HTTP:8080/healthz",
        "Interval": 15,
        "Timeout": 6,
        "UnhealthyThreshold": 4,
        "HealthyThreshold": 3,
    }
    assert ev.attributes["ConnectionSettings"]["IdleTimeout"] == 120
    assert ev.attributes["ConnectionDraining"] == {"Enabled": True, "Timeout": 45}
    assert ev.attributes["CrossZoneLoadBalancing"]["Enabled"] is True
    assert ev.lb["Scheme"] == "internal"
    assert ev.managed_group is not None
    assert ev.lb_group_rules[ev.managed_group] == load_balancer_rules((80,), SOURCE_RANGES)
    # The trail shows where each setting was sent.
    calls = {e.action: e for e in ev.create_calls}
    assert calls["CreateLoadBalancer"].params["Scheme"] == "internal"
    assert calls["ConfigureHealthCheck"].params["HealthCheck.Target"] == "HTTP:8080/healthz"
    assert "ModifyLoadBalancerAttributes" in calls
    assert_upstream_delete(ev)
    with pytest.raises(AssertionError):
        assert_default_settings(ev)


def test_malformed_annotation_changes_nothing(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    aws = lab.aws
    assert aws is not None
    mark = aws.trail.last_seq
    lab.start_controller(args=SG_RETRY)
    key = ANN + "connection-idle-timeout"
    svc = create_service(core_v1, lb_service("web", annotations={key: "abc"}))

    def failure() -> Any:
        listed = core_v1.list_namespaced_event(
            "default", field_selector="involvedObject.kind=Service,involvedObject.name=web"
        )
        return next((e for e in listed.items if e.reason == "SyncLoadBalancerFailed"), None)

    event = wait_for(failure, what="a SyncLoadBalancerFailed event")
    assert event.type == "Warning"
    assert key in event.message, event.message
    assert "abc" in event.message, event.message
    calls = controller_calls(aws.trail, since_seq=mark)
    assert calls, "the controller did talk to AWS (start-up, node sync)"
    assert_no_mutation(calls)
    assert describe_elb(elb, elb_name(svc)) is None
    assert group_id_by_name(ec2, f"k8s-elb-{elb_name(svc)}") is None
    assert "EnsuredLoadBalancer" not in ordered_reasons(core_v1, "web")


# --- shared-elb-sg --------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedEvidence:
    shared: str
    node_group: str
    node_rules_before: frozenset[Rule]
    node_rules_with_both: frozenset[Rule]
    node_rules_after_first: frozenset[Rule]
    node_rules_after_last: frozenset[Rule]
    other_lb_after_first: dict[str, Any] | None
    revokes_first: list[Any]
    revokes_last: list[Any]
    deletes: list[Any]
    shared_exists_after: bool
    #: requests to the other Service ("blog") before and right after "shop" is deleted
    other_traffic_before: TrafficReport
    other_traffic_after_first: TrafficReport
    both_gone: bool


def run_shared(lab: Lab, core: Any, ec2: Any, elb: Any, *, legacy: bool) -> SharedEvidence:
    aws = lab.aws
    assert aws is not None
    assert lab.topology is not None
    node_group = lab.topology.node_security_group.group_id
    node_rules_before = ingress_rules(ec2, node_group)
    shared = create_user_group(
        ec2,
        vpc_id=lab.topology.vpc_id,
        name="elbs.ccm-lab",
        tags={cluster_tag(lab.config.cluster_id): "owned"},
        rules=[Rule("tcp", 80, 80, EVERYWHERE)],
    )
    lab.write_cloud_config(extra_global=[("ElbSecurityGroup", shared)])
    lab.start_controller(legacy=["shared-elb-sg"] if legacy else [], args=SG_RETRY)
    names = {}
    for svc_name in ("shop", "blog"):
        names[svc_name] = elb_name(create_service(core, lb_service(svc_name)))
        create_pod(core, f"{svc_name}-0", namespace="default", app=svc_name,
                   node=lab.workers[0].name)  # fmt: skip
    for svc_name in names:
        wait_running(lab, core, f"{svc_name}-0", "default")
        wait_hostname(core, svc_name)
    node_rules_with_both = ingress_rules(ec2, node_group)
    other_traffic_before = decided_traffic(lab, "blog")

    def revokes(since: int) -> list[Any]:
        return touches_group(
            [
                e
                for e in controller_calls(aws.trail, since_seq=since)
                if e.action == "RevokeSecurityGroupIngress"
            ],
            node_group,
        )

    start = mark = aws.trail.last_seq
    core.delete_namespaced_service("shop", "default")
    wait_gone(core, "shop", timeout=30)
    revokes_first = revokes(mark)
    node_rules_after_first = ingress_rules(ec2, node_group)
    other_traffic_after_first = lab.traffic.send("blog", requests=60, seed=6)
    other_lb = describe_elb(elb, names["blog"])

    mark = aws.trail.last_seq
    core.delete_namespaced_service("blog", "default")
    wait_gone(core, "blog", timeout=30)
    return SharedEvidence(
        shared=shared,
        node_group=node_group,
        node_rules_before=node_rules_before,
        node_rules_with_both=node_rules_with_both,
        node_rules_after_first=node_rules_after_first,
        node_rules_after_last=ingress_rules(ec2, node_group),
        other_lb_after_first=other_lb,
        revokes_first=revokes_first,
        revokes_last=revokes(mark),
        deletes=[
            e
            for e in controller_calls(aws.trail, since_seq=start)
            if e.action == "DeleteSecurityGroup"
        ],
        shared_exists_after=group_exists(ec2, shared),
        other_traffic_before=other_traffic_before,
        other_traffic_after_first=other_traffic_after_first,
        both_gone=all(get_service(core, n) is None for n in names),
    )


def assert_shared_rule_revoked(ev: SharedEvidence) -> None:
    """kops#4197: deleting one Service cuts the node rule the other ELB still needs."""
    rule = all_traffic_from(ev.shared)
    assert ev.other_lb_after_first is not None, "the other ELB still exists..."
    assert ev.shared in ev.other_lb_after_first["SecurityGroups"], "...behind the shared group"
    assert [e.params["IpPermissions"] for e in ev.revokes_first] == [[f"all from {ev.shared}"]]
    assert rule not in ev.node_rules_after_first, "but the node group no longer lets it in"
    # What blog's users see: it answered every request before shop was deleted, none after.
    assert ev.other_traffic_before.answered_total == 60, ev.other_traffic_before.to_json()
    after = ev.other_traffic_after_first
    assert after.answered_total == 0, after.to_json()
    assert all(ev.node_group in reason for _, reason in after.dropped), after.to_json()


def assert_fixed(ev: SharedEvidence) -> None:
    """The rule stays while another ELB uses the group and goes with the last one."""
    rule = all_traffic_from(ev.shared)
    assert ev.node_rules_with_both == ev.node_rules_before | {rule}
    assert ev.revokes_first == [], "no revoke while the other ELB still uses the group"
    assert ev.node_rules_after_first == ev.node_rules_with_both
    assert [e.params["IpPermissions"] for e in ev.revokes_last] == [[f"all from {ev.shared}"]]
    assert ev.node_rules_after_last == ev.node_rules_before
    assert ev.deletes == [], "the shared ElbSecurityGroup is never deleted"
    assert ev.shared_exists_after
    assert ev.both_gone
    assert ev.other_traffic_after_first.answered_total == 60, "blog keeps answering"


@conformance(failure="shared-elb-sg", expect="reproduce")
def test_reproduce_shared_elb_sg(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    ev = run_shared(lab, core_v1, ec2, elb, legacy=True)
    assert ev.node_rules_with_both == ev.node_rules_before | {all_traffic_from(ev.shared)}
    assert_shared_rule_revoked(ev)
    with pytest.raises(AssertionError):
        assert_fixed(ev)


@conformance(failure="shared-elb-sg", expect="fixed")
def test_fixed_shared_elb_sg(lab: Lab, core_v1: Any, ec2: Any, elb: Any) -> None:
    ev = run_shared(lab, core_v1, ec2, elb, legacy=False)
    assert_fixed(ev)
    with pytest.raises(AssertionError):
        assert_shared_rule_revoked(ev)
