"""The fidelity layer's corrections of moto's answers: what AWS keeps and answers instead.

Role: after moto answered a call, the layer (:meth:`lab.aws.fidelity.FidelityLayer.after`)
hands the answer here with the moto backend it concerns: :func:`elb_fixes` (a new Classic
ELB's default health check and draining timeout, one ``AdditionalAttributes`` entry,
register/deregister results, the listeners' ``InstanceProtocol``), :func:`elbv2_fixes` (NLB
attributes and ``DNSName``, target-group attributes, no ``SslPolicy`` on TCP/UDP listeners)
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
    answer of the fixed call itself (gap 13; ``elbv2`` is moto's ELBv2 backend)."""
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
            if tg.name == request.params.get("Name") and tg.protocol in _NLB_PROTOCOLS:
                tg.attributes.setdefault("proxy_protocol_v2.enabled", "false")
                preserve = tg.target_type == "instance" or tg.protocol in ("UDP", "TCP_UDP")
                tg.attributes.setdefault(
                    "preserve_client_ip.enabled", "true" if preserve else "false"
                )
    elif request.action in ("CreateListener", "ModifyListener"):
        for lb in list(elbv2.load_balancers.values()):
            for listener in list(lb.listeners.values()):
                if listener.protocol not in ("HTTPS", "TLS"):
                    listener.ssl_policy = None
        proto = _PROTOCOL.search(response.body)
        if proto is not None and proto.group(1) not in (b"HTTPS", b"TLS"):
            return response.with_body(_SSL_POLICY.sub(b"", response.body))
    return response


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


def _keep_instance_protocols(lb: Any, params: Mapping[str, str]) -> None:
    """Give each listener the call created the ``InstanceProtocol`` it was sent with."""
    sent: dict[str, str] = {}
    for key, value in params.items():
        match = _LISTENER_INSTANCE_PROTOCOL.fullmatch(key)
        if match is not None and value:
            port = params.get(f"Listeners.member.{match.group(1)}.LoadBalancerPort")
            if port is not None:
                sent[str(port)] = value.upper()
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
