"""The fidelity layer's corrections of moto's answers: what AWS keeps and answers instead.

Role: after moto answered a call, the layer (:meth:`lab.aws.fidelity.FidelityLayer.after`)
hands the answer here with the moto backend it concerns: :func:`elb_fixes` (a new Classic
ELB's default health check and draining timeout, one ``AdditionalAttributes`` entry,
register/deregister results, the listeners' ``InstanceProtocol``), :func:`elbv2_fixes` (NLB
attributes and ``DNSName``, target-group attributes, no ``SslPolicy`` on TCP/UDP listeners,
each target group's ``LoadBalancerArns`` from the listeners and rules forwarding to it)
and :func:`reorder_groups` (a Classic ELB's ``SecurityGroups`` order). The gap numbers are
those of :mod:`lab.aws.fidelity`'s docstring.

Neighbours: called by :mod:`lab.aws.fidelity` only, which decides from the switches whether
a fix applies; the wire types are :mod:`lab.aws.protocol`'s.

Design: split from the layer so its decisions (which call, which switch, before or after
moto) read apart from the byte-level rewriting of moto's answers; these functions take the
backend they change, not the layer.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from collections.abc import Mapping
from typing import Any

from lab.aws.protocol import AwsRequest, WireResponse

_SG_BLOCK = re.compile(rb"<SecurityGroups>(.*?)</SecurityGroups>", re.DOTALL)
_MEMBER = re.compile(rb"<member>(.*?)</member>", re.DOTALL)


def elbv2_fixes(elbv2: Any, request: AwsRequest, response: WireResponse) -> WireResponse:
    """Backend state as AWS keeps it (the answers of later calls follow from it), and the
    answer of the fixed call itself (gaps 13 and 18; ``elbv2`` is moto's ELBv2 backend)."""
    if request.action == "CreateLoadBalancer":
        for lb in list(elbv2.load_balancers.values()):
            if lb.name == request.params.get("Name") and lb.type == "network":
                lb.attrs.setdefault("access_logs.s3.enabled", "false")
                old = str(lb.dns_name)
                if old.endswith(".elb.amazonaws.com"):
                    suffix = hashlib.sha1(str(lb.arn).encode(), usedforsecurity=False)
                    lb.dns_name = (
                        f"{lb.name}-{suffix.hexdigest()[:16]}.elb.{request.region}.amazonaws.com"
                    )
                    return response.with_body(
                        response.body.replace(old.encode(), lb.dns_name.encode())
                    )
    elif request.action == "CreateTargetGroup":
        for tg in list(elbv2.target_groups.values()):
            if tg.name != request.params.get("Name") or tg.protocol not in _NLB_PROTOCOLS:
                continue
            if _network_target_group(tg, request.params) and b"<HealthCheckPath>" not in (
                response.body
            ):
                return response.with_body(
                    response.body.replace(
                        b"</HealthCheckPort>",
                        b"</HealthCheckPort><HealthCheckPath>/</HealthCheckPath>",
                        1,
                    )
                )
    if request.action in _FORWARDING_ACTIONS:
        link_target_groups(elbv2)
    if request.action in ("CreateListener", "ModifyListener"):
        for lb in list(elbv2.load_balancers.values()):
            for listener in list(lb.listeners.values()):
                if listener.protocol not in ("HTTPS", "TLS"):
                    listener.ssl_policy = None
        proto = _PROTOCOL.search(response.body)
        if proto is not None and proto.group(1) not in (b"HTTPS", b"TLS"):
            return response.with_body(_SSL_POLICY.sub(b"", response.body))
    return response


#: the calls that change which target groups a load balancer's listeners and rules forward to
_FORWARDING_ACTIONS = frozenset(
    {
        "CreateListener",
        "ModifyListener",
        "DeleteListener",
        "CreateRule",
        "ModifyRule",
        "DeleteRule",
        "DeleteLoadBalancer",
    }
)


def link_target_groups(elbv2: Any) -> None:
    """Each target group's ``LoadBalancerArns`` as AWS has them: the load balancers (in
    creation order, each once) with a listener whose default actions or one of whose rules
    forward to the group, read from moto's listeners and rules (gap 18). moto keeps the list
    on the group apart from them: it appends on ``CreateListener``/``CreateRule`` (once per
    listener) and never updates it on ``ModifyListener``, ``ModifyRule``, ``DeleteListener``,
    ``DeleteRule`` or ``DeleteLoadBalancer``."""
    linked: dict[str, list[str]] = {str(arn): [] for arn in list(elbv2.target_groups)}
    for lb_arn, lb in list(elbv2.load_balancers.items()):
        for listener in list(lb.listeners.values()):
            for rule in list(listener.rules.values()):
                for action in list(rule.actions):
                    if action.type != "forward":
                        continue
                    for tg_arn in elbv2._get_target_group_arns_from(action_data=action.data):
                        arns = linked.get(str(tg_arn))
                        if arns is not None and lb_arn not in arns:
                            arns.append(lb_arn)
    for tg_arn, arns in linked.items():
        elbv2.target_groups[tg_arn].load_balancer_arns = arns


def _network_target_group(tg: Any, params: Mapping[str, str]) -> bool:
    """A new TCP/UDP/TCP_UDP/TLS target group's attributes and health check as AWS gives them
    (``TargetGroupAttribute.Key`` and ``CreateTargetGroup`` in botocore's ELBv2 model; the
    keys are checked against the model's text in ``tests/aws/test_elb_defaults.py``); True
    when its health check got the default path ``/``."""
    attrs = tg.attributes
    for alb_only in _ALB_ONLY_ATTRIBUTES:
        attrs.pop(alb_only, None)
    udp = tg.protocol in ("UDP", "TCP_UDP")
    preserve = tg.target_type == "instance" or udp
    defaults = {
        **_NLB_ATTRIBUTE_DEFAULTS,
        "preserve_client_ip.enabled": "true" if preserve else "false",
        "deregistration_delay.connection_termination.enabled": "true" if udp else "false",
        "target_health_state.unhealthy.connection_termination.enabled": "false" if udp else "true",
    }
    for key, value in defaults.items():
        attrs.setdefault(key, value)
    if tg.health_check_protocol in ("HTTP", "HTTPS") and not params.get("HealthCheckPath"):
        tg.health_check_path = "/"
        return True
    return False


#: moto gives every target group these; they are an Application Load Balancer's (the model's
#: "supported only if the load balancer is an Application Load Balancer"; ``waf.fail_open`` is
#: an ALB's load balancer attribute)
_ALB_ONLY_ATTRIBUTES = (
    "load_balancing.algorithm.type",
    "slow_start.duration_seconds",
    "waf.fail_open.enabled",
)
#: a network target group's attributes whose default does not depend on its protocol or
#: target type ("The default is ..." in the model's ``TargetGroupAttribute.Key``)
_NLB_ATTRIBUTE_DEFAULTS = {
    "deregistration_delay.timeout_seconds": "300",
    "stickiness.enabled": "false",
    "stickiness.type": "source_ip",
    "load_balancing.cross_zone.enabled": "use_load_balancer_configuration",
    "proxy_protocol_v2.enabled": "false",
    "target_health_state.unhealthy.draining_interval_seconds": "0",
    "target_group_health.dns_failover.minimum_healthy_targets.count": "1",
    "target_group_health.dns_failover.minimum_healthy_targets.percentage": "off",
    "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count": "1",
    "target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage": "off",
}


def reorder_groups(response: WireResponse, order: str, shuffle: random.Random) -> WireResponse:
    """Each Classic ELB's ``SecurityGroups`` in ``order`` (``reversed``, else a draw of
    ``shuffle``; gap 4)."""

    def reorder(match: re.Match[bytes]) -> bytes:
        members = _MEMBER.findall(match.group(1))
        if order == "reversed":
            members.reverse()
        else:
            shuffle.shuffle(members)
        inner = b"".join(b"<member>" + m + b"</member>" for m in members)
        return b"<SecurityGroups>" + inner + b"</SecurityGroups>"

    return response.with_body(_SG_BLOCK.sub(reorder, response.body))


def elb_fixes(elb: Any, request: AwsRequest, response: WireResponse) -> WireResponse:
    """Classic ELB state and answers as AWS keeps them (gaps 5-7 and 16; ``elb`` is moto's
    Classic ELB backend)."""
    action = request.action
    name = request.params.get("LoadBalancerName", "")
    lb = elb.load_balancers.get(name)
    if lb is None:
        return response
    if action in ("CreateLoadBalancer", "CreateLoadBalancerListeners"):
        _keep_instance_protocols(lb, request.params)
    if action == "CreateLoadBalancer":
        if lb.health_check is None and lb.listeners:
            port = lb.listeners[0].instance_port
            elb.configure_health_check(
                load_balancer_name=name,
                timeout="5",
                healthy_threshold="10",
                unhealthy_threshold="2",
                interval="30",
                target=f"TCP:{port}",
            )
        draining = lb.attributes.get("connection_draining", {})
        draining.setdefault("timeout", 300)
        lb.attributes["connection_draining"] = draining
    elif action == "ModifyLoadBalancerAttributes":
        extra = lb.attributes.get("additional_attributes") or []
        lb.attributes["additional_attributes"] = list(dict.fromkeys(extra))
    elif action in ("RegisterInstancesWithLoadBalancer", "DeregisterInstancesFromLoadBalancer"):
        lb.instance_sparse_ids = list(dict.fromkeys(lb.instance_sparse_ids))
        return response.with_body(_instances_result(action, lb.instance_sparse_ids, response))
    return response


def sent_instance_protocols(params: Mapping[str, str]) -> dict[str, str]:
    """The ``InstanceProtocol`` (upper-cased) each listener of a call was sent with, by its
    ``LoadBalancerPort``."""
    sent: dict[str, str] = {}
    for key, value in params.items():
        match = _LISTENER_INSTANCE_PROTOCOL.fullmatch(key)
        if match is not None and value:
            port = params.get(f"Listeners.member.{match.group(1)}.LoadBalancerPort")
            if port is not None:
                sent[str(port)] = value.upper()
    return sent


def _keep_instance_protocols(lb: Any, params: Mapping[str, str]) -> None:
    """Give each listener the call created the ``InstanceProtocol`` it was sent with."""
    sent = sent_instance_protocols(params)
    mine = _elb_listener_class()
    for listener in lb.listeners:
        if type(listener) is mine:
            continue  # it existed before this call (moto leaves an equal one in place)
        listener.__class__ = mine  # every listener this layer has seen is of the class
        protocol = sent.get(str(listener.load_balancer_port))
        if protocol is not None:
            listener.__dict__[_SENT_INSTANCE_PROTOCOL] = protocol


_LISTENER_INSTANCE_PROTOCOL = re.compile(r"Listeners\.member\.(\d+)\.InstanceProtocol")


_SENT_INSTANCE_PROTOCOL = "_lab_instance_protocol"


@functools.cache
def _elb_listener_class() -> type:
    """moto's Classic listener whose ``instance_protocol`` is the one it was created with, else
    its ``protocol`` (moto's property answers ``protocol`` always). Made on first use:
    importing moto here would make every ``import lab.aws`` (the front door's too) pay for
    moto's EC2 models."""
    from moto.elb.models import FakeListener

    def instance_protocol(self: Any) -> str:
        return str(self.__dict__.get(_SENT_INSTANCE_PROTOCOL) or self.protocol)

    return type("ElbListener", (FakeListener,), {"instance_protocol": property(instance_protocol)})


_NLB_PROTOCOLS = ("TCP", "UDP", "TCP_UDP", "TLS")
_PROTOCOL = re.compile(rb"<Protocol>([A-Z_]+)</Protocol>")
_SSL_POLICY = re.compile(rb"<SslPolicy>[^<]*</SslPolicy>")


def _instances_result(action: str, instance_ids: list[str], response: WireResponse) -> bytes:
    """The ELB XML result of (De)RegisterInstances listing ``instance_ids`` (as AWS does)."""
    match = re.search(rb"<RequestId>([^<]*)</RequestId>", response.body)
    request_id = match.group(1).decode() if match else ""
    members = "".join(
        f"<member><InstanceId>{instance_id}</InstanceId></member>" for instance_id in instance_ids
    )
    return (
        f'<{action}Response xmlns="http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/">'
        f"<{action}Result><Instances>{members}</Instances></{action}Result>"
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    ).encode()
