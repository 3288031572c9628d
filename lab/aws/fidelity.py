"""The fidelity layer: AWS behaviours stock moto 5.2.5 lacks, restored around moto.

Role: the failure catalog hinges on AWS behaviours that moto does not model. The layer sees each
parsed query-protocol call before moto (:meth:`FidelityLayer.before` may answer it with an AWS
error) and after moto (:meth:`FidelityLayer.after` may fix the backend state or the response).
It reads and adjusts moto's in-process backends (``moto.ec2.models.ec2_backends`` etc.); moto's
source files are never patched. Every behaviour has a switch in
:class:`~lab.aws.fidelity_config.FidelityConfig`; ``enabled=False`` gives stock moto.

Gaps found in moto 5.2.5 and fixed here (each has a test in ``tests/aws/test_fidelity.py``):

1. ``DeleteSecurityGroup`` never fails. Real EC2 answers ``DependencyViolation`` ("resource
   sg-… has a dependent object") while another group's ingress/egress rule references the group,
   an instance or ENI uses it, or a Classic ELB / ELBv2 load balancer has it attached; and for a
   configurable time after such a load balancer was deleted (its ENIs detach with a lag;
   ``elb_sg_release_s``, default 0). A group's rule referencing itself does not block.
2. Deleting a VPC's ``default`` group succeeds in moto; EC2 answers ``CannotDelete``.
3. Instance state transitions are instant (:mod:`lab.aws.lifecycle`: ``pending``, ``stopping``,
   ``shutting-down`` last a configurable time; terminated instances vanish after
   ``terminated_visible_s``).
4. The order of each Classic ELB's ``SecurityGroups`` in ``DescribeLoadBalancers`` (moto keeps
   creation / ``ApplySecurityGroupsToLoadBalancer`` order; AWS guarantees none): ``creation``,
   ``reversed`` or ``shuffle`` (seeded; a new draw per call) — kubernetes#84926.
5. A new Classic ELB has no ``HealthCheck`` in moto; AWS gives it a default check
   (``TCP:<first instance port>``, interval 30, timeout 5, unhealthy 2, healthy 10), which is
   why the controller always calls ``ConfigureHealthCheck`` on create.
6. ``ModifyLoadBalancerAttributes`` appends another ``elb.http.desyncmitigationmode`` entry to
   ``AdditionalAttributes`` on every call in moto (AWS has one); ``ConnectionDraining`` lacks
   its default ``Timeout`` of 300 until modified.
7. ``RegisterInstancesWithLoadBalancer`` / ``DeregisterInstancesFromLoadBalancer`` return an
   empty ``Instances`` list in moto (AWS returns the registered set), and registering an instance
   twice lists it twice (AWS is idempotent).
8. ``RegisterInstancesWithLoadBalancer`` accepts instance ids that do not exist; AWS answers
   ``InvalidInstance``.
9. The primary network interface of a terminated instance stays in moto (its
   ``DeleteOnTermination`` defaults to false there, true on EC2) and keeps its groups; the
   dependency check ignores it, so a group frees up when its instances are terminated.
10. EC2 is eventually consistent; moto is not. ``instance_describe_lag_s`` keeps a new instance
    out of ``DescribeInstances``/``DescribeInstanceStatus`` for a while (by id:
    ``InvalidInstanceID.NotFound``), as in kubernetes#81636.
11. moto never health-checks: ``DescribeInstanceHealth`` says ``InService`` for every running
    registered instance. :mod:`lab.aws.health.classic` (owned by ``AwsLab``, called by ``AwsApp``)
    counts each load balancer's health checks on the lab clock through a prober that evaluates
    the security groups (:mod:`lab.aws.sgeval`) and answers with AWS's ``State``,
    ``ReasonCode`` and ``Description``, connection draining included
    (``elb_health_checks``).
12. ``AddTags`` / ``CreateLoadBalancer`` with a tag without ``Value`` (optional in the model)
    raise ``KeyError`` in moto (500); :mod:`lab.aws.motostages` adds the empty value AWS stores
    (``elb_fixes``).
13. ELBv2 (``elbv2_fixes``), the calls the NLB path makes: ``CreateListener`` gives every
    listener moto's default ``SslPolicy`` (``ELBSecurityPolicy-2016-08``), so a TCP or UDP
    listener reports one; AWS has a policy only on TLS/HTTPS listeners (a controller that, like
    upstream, modifies a TCP listener reporting a policy would do so on every sync). A new
    network load balancer lacks the ``access_logs.s3.enabled`` attribute (``false`` on AWS; an
    upstream-style attribute sync then modifies on every create). A network load balancer's
    ``DNSName`` has the Classic form ``<name>-1.<region>.elb.amazonaws.com`` in moto; AWS
    names NLBs ``<name>-<hex>.elb.<region>.amazonaws.com``, the form that tells a Service's
    status an NLB from a Classic ELB (upstream's type-switch guard). ``RegisterTargets`` accepts
    instance ids that do not exist; AWS answers ``InvalidTarget`` (stopped instances are
    already refused by moto). A TCP/UDP/TLS target group lacks the ``proxy_protocol_v2.enabled``
    (``false``) and ``preserve_client_ip.enabled`` (``true`` for instance targets) attributes,
    so the target-group-attributes annotation has nothing to compare with; it also lacks the
    other attributes the model lists for Network Load Balancers and has an Application Load
    Balancer's (a client syncing attributes by key sees them come and go), and an HTTP check
    on it has no path (AWS: ``/``). ``SetSecurityGroups``
    on a network load balancer created without security groups succeeds in moto; AWS refuses
    it (``InvalidConfigurationRequest``, "You cannot set security groups on a Network Load
    Balancer which was created without any security groups.": the ``SetSecurityGroups`` API
    reference, and the error as kubernetes-sigs/cluster-api-provider-aws#4790 quotes it).
14. ``DescribeInstanceTopology`` is not implemented in moto (500); the lab answers it from
    moto's instances (:mod:`lab.aws.instance_topology`, ``instance_topology``).
16. A Classic listener's ``InstanceProtocol`` is dropped by moto, which describes it as the
    listener's ``Protocol`` whatever was sent (an SSL listener to TCP backends is described as
    SSL to SSL, so a controller comparing listeners, as upstream's ``syncElbListeners`` does,
    replaces that listener on every sync). The layer keeps what ``CreateLoadBalancer`` and
    ``CreateLoadBalancerListeners`` sent (``elb_fixes``); one sent without it stays the
    listener's ``Protocol``, moto's choice, not checked against AWS. A listener sent again to
    ``CreateLoadBalancerListeners`` with only another ``InstanceProtocol`` is accepted by moto
    and changes nothing; AWS answers ``DuplicateListener`` (the model's
    ``CreateLoadBalancerListeners``: "the properties of the new listener must match the
    properties of the existing listener"); the layer refuses it so (``elb_fixes``).
15. moto never health-checks ELBv2 targets: ``DescribeTargetHealth`` says ``healthy`` for
    every registered running instance. :mod:`lab.aws.health.network` (owned by ``AwsLab``, called
    by ``AwsApp``) runs each NLB instance target group's checks on the lab clock through the
    Classic model's prober and answers with AWS's target states and reason codes, the
    deregistration delay included (``nlb_health_checks``).
17. ``AuthorizeSecurityGroupIngress``/``Egress`` and ``RevokeSecurityGroupIngress``/``Egress``
    apply their permissions one by one in moto and keep those before the one refused (70
    permissions: ``RulesPerSecurityGroupLimitExceeded`` and 60 rules stored; a new rule beside
    a duplicate added; an existing rule beside a missing one revoked). EC2 applies a call as
    one change; the layer snapshots the region's rules before such a call and restores them
    when moto refuses it (:mod:`lab.aws.sgatomic`; with ``enabled``).

18. A target group's ``LoadBalancerArns`` (and so ``DescribeTargetGroups(LoadBalancerArn=...)``
    and the target health model's "not in use") is a list moto appends to on
    ``CreateListener``/``CreateRule`` and never updates: after ``ModifyListener`` or
    ``ModifyRule`` forwards to another group, the new group lists no load balancer and the old
    one still does; a deleted listener, rule or load balancer stays listed; two listeners
    forwarding to one group list its load balancer twice. On AWS a group is associated with a
    load balancer through the listeners and rules that forward to it. The layer derives every
    group's list from moto's listeners and rules after each call that changes them
    (``elbv2_fixes``; :func:`lab.aws.fidelity_fixes.link_target_groups`).

Checked and already right in moto 5.2.5 (no layer needed): ELB ``DNSName`` ends with
``.elb.amazonaws.com``; ``ApplySecurityGroupsToLoadBalancer`` replaces the set in the given
order; ``DescribeLoadBalancerAttributes``; ``ConfigureHealthCheck``; ``DescribeSecurityGroups``
filters ``ip-permission.group-id``, ``group-name``, ``vpc-id``, ``group-id``.

Neighbours: called by the ``fidelity`` stage (:mod:`lab.aws.motostages`) under the endpoint's
lock; the switches are :mod:`lab.aws.fidelity_config`'s, the corrections of moto's answers
after a call :mod:`lab.aws.fidelity_fixes`' (this module decides which apply); instance timing
lives in :mod:`lab.aws.lifecycle`; errors are :mod:`lab.aws.exceptions` classes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from lab.aws import fidelity_fixes, instance_topology
from lab.aws.exceptions import (
    AwsError,
    CannotDelete,
    DependencyViolation,
    InvalidConfigurationRequest,
    InvalidInstance,
    InvalidTarget,
)
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.lifecycle import InstanceLifecycle
from lab.aws.protocol import AwsRequest, WireResponse, new_request_id
from lab.aws.sgatomic import PERMISSION_ACTIONS, RulesSnapshot


def _unknown_instances(view: Any, params: Mapping[str, str], prefix: str, suffix: str) -> list[str]:
    """The instance ids a call names (``<prefix>N<suffix>`` parameters) that do not exist or
    are terminated, in the call's order."""
    known = {i.id for i in view.ec2.all_instances() if i.state != "terminated"}
    return [
        value
        for key, value in params.items()
        if key.startswith(prefix) and key.endswith(suffix) and value not in known
    ]


class MotoView:
    """The moto backends of one account and region (process-global moto state)."""

    def __init__(self, account: str, region: str) -> None:
        from moto.ec2.models import ec2_backends
        from moto.elb.models import elb_backends
        from moto.elbv2.models import elbv2_backends

        self.ec2: Any = ec2_backends[account][region]
        self.elb: Any = elb_backends[account][region]
        self.elbv2: Any = elbv2_backends[account][region]

    def security_group(self, params: Mapping[str, str]) -> Any:
        group_id = params.get("GroupId")
        if group_id:
            return self.ec2.get_security_group_from_id(group_id)
        name = params.get("GroupName")
        if name:
            return self.ec2.get_security_group_from_name(name)
        return None


def _group_ids(groups: Any) -> list[str]:
    return [str(getattr(g, "id", g)) for g in groups or []]


def _dies_with_terminated_instance(eni: Any) -> bool:
    """Whether EC2 would have deleted ``eni`` with its terminated instance (gap 9).

    A primary interface (device index 0) made by ``RunInstances`` has ``DeleteOnTermination``
    true on EC2; moto keeps it around (false unless asked), still holding the groups.
    """
    instance = getattr(eni, "instance", None)
    if instance is None or instance.state != "terminated":
        return False
    return bool(getattr(eni, "device_index", None) in (0, None) or eni.delete_on_termination)


_DESCRIBE_INSTANCES = frozenset({"DescribeInstances", "DescribeInstanceStatus"})


class FidelityLayer:
    """Applies :class:`FidelityConfig` to calls; one per endpoint, used under its lock."""

    def __init__(
        self,
        config: FidelityConfig,
        *,
        account: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._account = account
        self._clock = clock
        self.lifecycle = InstanceLifecycle(clock=clock)
        self._released: list[tuple[float, str, str, frozenset[str]]] = []
        self.config = config
        self._shuffle = random.Random(config.elb_sg_order_seed)

    @property
    def clock(self) -> Callable[[], float]:
        """The monotonic clock time-based behaviour runs on (tests swap in a fake one)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.lifecycle.clock = clock

    @property
    def config(self) -> FidelityConfig:
        return self._config

    @config.setter
    def config(self, value: FidelityConfig) -> None:
        self._config = value
        self._shuffle = random.Random(value.elb_sg_order_seed)
        self.lifecycle.configure(
            pending_s=value.instance_pending_s if value.enabled else 0.0,
            stopping_s=value.instance_stopping_s if value.enabled else 0.0,
            shutting_down_s=value.instance_shutting_down_s if value.enabled else 0.0,
            terminated_visible_s=value.terminated_visible_s if value.enabled else None,
            describe_lag_s=value.instance_describe_lag_s if value.enabled else 0.0,
        )

    def reset(self, config: FidelityConfig) -> None:
        """Forget pending transitions and lingering groups; apply ``config``."""
        self.lifecycle.clear()
        self._released.clear()
        self.config = config

    def tick(self) -> None:
        """Advance time-based behaviour (instance transitions, terminated instances)."""
        self.lifecycle.tick(self._views)

    def _views(self, region: str) -> MotoView:
        return MotoView(self._account, region)

    # --- instead of moto ----------------------------------------------------------------------

    def answer(self, request: AwsRequest) -> WireResponse | AwsError | None:
        """The lab's own answer to a call moto does not implement (or None: ask moto)."""
        cfg = self._config
        if not (cfg.enabled and cfg.instance_topology):
            return None
        if request.service != "ec2" or request.action != "DescribeInstanceTopology":
            return None
        view = self._views(request.region)
        zone_ids = {z.name: z.zone_id for z in view.ec2.describe_availability_zones()}
        body = instance_topology.describe(view.ec2, self._account, request.params, zone_ids)
        if isinstance(body, AwsError):
            return body
        request_id = new_request_id()
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<DescribeInstanceTopologyResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{request_id}</requestId>{body}</DescribeInstanceTopologyResponse>"
        )
        return WireResponse(200, [("Content-Type", "text/xml;charset=UTF-8")], xml.encode())

    # --- before moto ------------------------------------------------------------------------

    def before(self, request: AwsRequest) -> tuple[AwsError | None, dict[str, Any]]:
        """An error to answer ``request`` with instead of moto (or None), plus context for after."""
        cfg = self._config
        context: dict[str, Any] = {}
        if not cfg.enabled:
            return None, context
        if request.service == "ec2" and request.action in PERMISSION_ACTIONS:
            context["rules"] = RulesSnapshot.take(self._views(request.region).ec2)
        elif request.service == "ec2" and request.action in _DESCRIBE_INSTANCES:
            if cfg.instance_describe_lag_s > 0:
                context["hidden"] = self.lifecycle.hide_new(
                    self._views(request.region), request.region
                )
        elif request.service == "ec2" and request.action == "DeleteSecurityGroup":
            if cfg.sg_dependency_violation:
                return self._check_sg_delete(request), context
        elif request.action == "DeleteLoadBalancer" and cfg.elb_sg_release_s > 0:
            context["groups"] = self._lb_groups(request)
        elif (
            request.service == "elb"
            and request.action == "RegisterInstancesWithLoadBalancer"
            and cfg.elb_fixes
        ):
            return self._check_register(request), context
        elif request.service == "elb" and request.action == "CreateLoadBalancerListeners":
            if cfg.elb_fixes:
                return self._check_duplicate_listener(request), context
        elif request.service == "elbv2" and request.action == "RegisterTargets" and cfg.elbv2_fixes:
            return self._check_register_targets(request), context
        elif (
            request.service == "elbv2" and request.action == "SetSecurityGroups" and cfg.elbv2_fixes
        ):
            return self._check_set_security_groups(request), context
        return None, context

    def _check_register_targets(self, request: AwsRequest) -> AwsError | None:
        view = self._views(request.region)
        group = view.elbv2.target_groups.get(request.params.get("TargetGroupArn", ""))
        if group is None or getattr(group, "target_type", "instance") != "instance":
            return None  # moto answers TargetGroupNotFound itself; ip targets are not ids
        unknown = _unknown_instances(view, request.params, "Targets.member.", ".Id")
        if not unknown:
            return None
        return InvalidTarget(
            "The following targets are not valid instances: "
            + ", ".join(f"'{i}'" for i in unknown),
            source="fidelity:elbv2_register",
        )

    def _check_set_security_groups(self, request: AwsRequest) -> AwsError | None:
        view = self._views(request.region)
        lb = view.elbv2.load_balancers.get(request.params.get("LoadBalancerArn", ""))
        if lb is None or getattr(lb, "type", "") != "network":
            return None  # moto answers LoadBalancerNotFound itself; ALBs may always set groups
        if _group_ids(getattr(lb, "security_groups", None)):
            return None
        return InvalidConfigurationRequest(
            "You cannot set security groups on a Network Load Balancer which was created "
            "without any security groups.",
            source="fidelity:elbv2_nlb_security_groups",
        )

    def _check_register(self, request: AwsRequest) -> AwsError | None:
        view = self._views(request.region)
        unknown = _unknown_instances(view, request.params, "Instances.member.", ".InstanceId")
        if not unknown:
            return None
        return InvalidInstance(
            f"The specified EC2 instance(s) do not exist or are terminated: {', '.join(unknown)}",
            source="fidelity:elb_register",
        )

    def _check_duplicate_listener(self, request: AwsRequest) -> AwsError | None:
        """A listener sent again on a port that has one, with another ``InstanceProtocol``:
        ``DuplicateListener`` (moto compares the other properties, not that one: gap 16)."""
        name = request.params.get("LoadBalancerName", "")
        lb = self._views(request.region).elb.load_balancers.get(name)
        if lb is None:
            return None
        existing = {str(li.load_balancer_port): li for li in lb.listeners}
        for port, sent in fidelity_fixes.sent_instance_protocols(request.params).items():
            listener = existing.get(port)
            if listener is not None and str(listener.instance_protocol).upper() != sent:
                return AwsError(
                    f"A listener already exists for {name} with LoadBalancerPort {port}, but "
                    "with a different InstancePort, Protocol, or SSLCertificateId",
                    code="DuplicateListener",
                    status=400,
                    source="fidelity:elb_duplicate_listener",
                )
        return None

    def _lb_groups(self, request: AwsRequest) -> frozenset[str]:
        view = self._views(request.region)
        if request.service == "elb":
            lb = view.elb.load_balancers.get(request.params.get("LoadBalancerName", ""))
        else:
            lb = view.elbv2.load_balancers.get(request.params.get("LoadBalancerArn", ""))
        return frozenset(_group_ids(getattr(lb, "security_groups", None)))

    def _check_sg_delete(self, request: AwsRequest) -> AwsError | None:
        view = self._views(request.region)
        group = view.security_group(request.params)
        if group is None:
            return None  # moto answers InvalidGroup.NotFound itself
        gid = str(group.id)
        if group.name == "default":
            return CannotDelete(
                f'the specified group: "{gid}" name: "default" cannot be deleted by a user',
                source="fidelity:sg_default",
            )
        reason = self._sg_dependent(view, gid, request.region)
        if reason is None:
            return None
        return DependencyViolation(
            f"resource {gid} has a dependent object", source=f"fidelity:sg_dependency:{reason}"
        )

    def _sg_dependent(self, view: MotoView, gid: str, region: str) -> str | None:
        """What still depends on group ``gid`` (a short reason for the trail), or None."""
        for groups in list(view.ec2.groups.values()):
            for other in list(groups.values()):
                if other.id == gid:
                    continue
                for rule in list(other.ingress_rules) + list(other.egress_rules):
                    if (rule.source_group or {}).get("GroupId") == gid:
                        return f"rule:{other.id}"
        for instance in view.ec2.all_instances():
            if instance.state == "terminated":
                continue
            if gid in _group_ids(instance.security_groups):
                return f"instance:{instance.id}"
        for eni in list(view.ec2.enis.values()):
            if _dies_with_terminated_instance(eni):
                continue
            if gid in _group_ids(getattr(eni, "_group_set", [])):
                return f"eni:{eni.id}"
        for name, lb in list(view.elb.load_balancers.items()):
            if gid in _group_ids(lb.security_groups):
                return f"elb:{name}"
        for lb in list(view.elbv2.load_balancers.values()):
            if gid in _group_ids(getattr(lb, "security_groups", None)):
                return f"elbv2:{lb.name}"
        now = self._clock()
        self._released = [entry for entry in self._released if entry[0] > now]
        for _, lb_region, lb_name, groups_of_lb in self._released:
            if lb_region == region and gid in groups_of_lb:
                return f"deleted-lb:{lb_name}"
        return None

    def finish(self, context: Mapping[str, Any]) -> None:
        """Undo temporary changes made by :meth:`before` (always called, even on errors)."""
        hidden = context.get("hidden")
        if hidden is not None:
            hidden.restore()

    def abandon(self, context: Mapping[str, Any]) -> None:
        """A call that failed inside moto (a lab or moto bug, answered 500) changes nothing a
        permission call began: its rules snapshot is restored (gap 17)."""
        if "rules" in context:
            context["rules"].restore()

    # --- after moto -------------------------------------------------------------------------

    def after(
        self, request: AwsRequest, response: WireResponse, context: Mapping[str, Any]
    ) -> WireResponse:
        """Fix backend state or the response of a call moto answered."""
        cfg = self._config
        if response.status >= 400 and "rules" in context:
            context["rules"].restore()  # a refused permission call changes nothing (gap 17)
        if not cfg.enabled or response.status >= 400:
            return response
        action = request.action
        if request.service == "ec2":
            if action in ("RunInstances", "StartInstances", "StopInstances", "TerminateInstances"):
                self.lifecycle.observe(self._views(request.region), request, response)
            return response
        if action == "DeleteLoadBalancer" and context.get("groups"):
            name = request.params.get("LoadBalancerName") or request.params.get(
                "LoadBalancerArn", ""
            )
            self._released.append(
                (self._clock() + cfg.elb_sg_release_s, request.region, name, context["groups"])
            )
            if request.service != "elbv2":
                return response  # an ELBv2 one goes on: its groups' links to it go (gap 18)
        if request.service == "elbv2":
            if cfg.elbv2_fixes:
                return fidelity_fixes.elbv2_fixes(
                    self._views(request.region).elbv2, request, response
                )
            return response
        if request.service != "elb":
            return response
        if action == "DescribeLoadBalancers" and cfg.elb_sg_order != "creation":
            return fidelity_fixes.reorder_groups(response, cfg.elb_sg_order, self._shuffle)
        if cfg.elb_fixes:
            return fidelity_fixes.elb_fixes(self._views(request.region).elb, request, response)
        return response


__all__ = ["FidelityLayer", "MotoView"]
