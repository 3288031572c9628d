"""The AWS layer's load balancer defaults, checked against botocore's ELB models (issue 30).

What AWS gives a new network target group (attributes and health check) is read from the
ELBv2 model's documentation (``TargetGroupAttribute.Key``, ``CreateTargetGroup``), not from a
table here; a Classic listener sent again with other properties is ``DuplicateListener``
(the ELB model's ``CreateLoadBalancerListeners`` and ``DuplicateListenerException``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer

#: the sections of ``TargetGroupAttribute.Key`` that apply to a Network Load Balancer's groups
_NLB_SECTIONS = (
    "supported by all load balancers",
    "supported by Application Load Balancers and Network Load Balancers",
    "supported only by Network Load Balancers",
)


@functools.cache
def _attribute_docs() -> dict[str, dict[str, str]]:
    """Per section of the model's attribute list: each attribute and its text."""
    model = botocore.session.get_session().get_service_model("elbv2")
    text = model.shape_for("TargetGroupAttribute").members["Key"].documentation
    sections: dict[str, dict[str, str]] = {}
    for part in text.split("<p>The following attribute")[1:]:
        heading, _, body = part.partition(":</p>")
        items = re.split(r"<li> <p> <code>([a-z0-9_.]+)</code> - ", body)
        sections[heading.split(" ", 2)[-1]] = dict(zip(items[1::2], items[2::2], strict=True))
    return sections


def _nlb_attributes() -> dict[str, str]:
    docs = _attribute_docs()
    return {key: text for section in _NLB_SECTIONS for key, text in docs[section].items()}


def _plain_default(text: str) -> str | None:
    """The default a text states without a condition ("The default is X."), else None."""
    found = re.search(r"The default (?:value )?is (?:<code>)?([\w.]+)(?:</code>)?( if)?", text)
    if found is None or found.group(2):
        return None
    return found.group(1).rstrip(".")


def _target_group(aws: AwsServer, name: str, **kwargs: Any) -> dict[str, Any]:
    ec2, elbv2 = aws.client("ec2"), aws.client("elbv2")
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    created = elbv2.create_target_group(Name=name, Port=30080, VpcId=vpc, **kwargs)
    group: dict[str, Any] = created["TargetGroups"][0]
    return group


def _attributes(aws: AwsServer, arn: str) -> dict[str, str]:
    found = aws.client("elbv2").describe_target_group_attributes(TargetGroupArn=arn)
    return {a["Key"]: a["Value"] for a in found["Attributes"]}


def test_the_model_text_is_read() -> None:
    """The parse above finds what it must (a botocore whose text moved fails here first)."""
    attributes = _nlb_attributes()
    assert "proxy_protocol_v2.enabled" in attributes
    assert _plain_default(attributes["deregistration_delay.timeout_seconds"]) == "300"
    assert _plain_default(attributes["preserve_client_ip.enabled"]) is None  # conditional


@pytest.mark.parametrize(
    ("protocol", "target_type"), [("TCP", "instance"), ("TLS", "ip"), ("UDP", "instance")]
)
def test_network_target_group_attributes_are_the_models(
    aws: AwsServer, protocol: str, target_type: str
) -> None:
    """Exactly the attributes the model lists for Network Load Balancers (none of an
    Application Load Balancer's, none missing), each with the default it states."""
    group = _target_group(aws, "tg-attrs", Protocol=protocol, TargetType=target_type)
    got = _attributes(aws, group["TargetGroupArn"])
    documented = _nlb_attributes()
    assert set(got) == set(documented)
    udp = protocol == "UDP"
    # stated plainly, but "can't be enabled for UDP and TCP_UDP target groups": checked below
    conditional = {"target_health_state.unhealthy.connection_termination.enabled"} if udp else set()
    plain = {
        k: d
        for k, text in documented.items()
        if (d := _plain_default(text)) is not None and k not in conditional
    }
    assert {k: got[k] for k in plain} == plain
    # the conditional ones, as their text states them
    assert got["preserve_client_ip.enabled"] == ("true" if target_type == "instance" else "false")
    assert got["deregistration_delay.connection_termination.enabled"] == str(udp).lower()
    assert (
        got["target_health_state.unhealthy.connection_termination.enabled"] == str(not udp).lower()
    )
    assert got["stickiness.type"] == "source_ip"  # "source_ip for Network Load Balancers"


def test_network_target_group_health_check_defaults(aws: AwsServer) -> None:
    """CreateTargetGroup's documented defaults for a TCP group (TCP checks on the traffic
    port every 30 s, 10 s timeout, 5 healthy / 2 unhealthy), and ``/`` as the path of an
    HTTP check (``HealthCheckPath``: "The default is /"), in the answer and when described."""
    group = _target_group(aws, "tg-tcp", Protocol="TCP")
    assert {
        k: group[k]
        for k in (
            "HealthCheckProtocol",
            "HealthCheckPort",
            "HealthCheckIntervalSeconds",
            "HealthCheckTimeoutSeconds",
            "HealthyThresholdCount",
            "UnhealthyThresholdCount",
        )
    } == {
        "HealthCheckProtocol": "TCP",
        "HealthCheckPort": "traffic-port",
        "HealthCheckIntervalSeconds": 30,
        "HealthCheckTimeoutSeconds": 10,
        "HealthyThresholdCount": 5,
        "UnhealthyThresholdCount": 2,
    }
    assert "HealthCheckPath" not in group
    http = _target_group(aws, "tg-http-check", Protocol="TCP", HealthCheckProtocol="HTTP")
    described = aws.client("elbv2").describe_target_groups(Names=["tg-http-check"])
    assert http["HealthCheckPath"] == described["TargetGroups"][0]["HealthCheckPath"] == "/"
    custom = _target_group(
        aws, "tg-own-path", Protocol="TCP", HealthCheckProtocol="HTTP", HealthCheckPath="/hz"
    )
    assert custom["HealthCheckPath"] == "/hz"


def _listener(protocol: str, instance_protocol: str, instance_port: int = 30080) -> Any:
    return {
        "Protocol": protocol,
        "LoadBalancerPort": 80,
        "InstanceProtocol": instance_protocol,
        "InstancePort": instance_port,
    }


def test_a_listener_sent_again_with_another_instance_protocol_is_a_duplicate(
    aws: AwsServer,
) -> None:
    """``CreateLoadBalancerListeners``: the same listener again changes nothing; one on the
    same port with another ``InstanceProtocol`` is ``DuplicateListener`` and changes
    nothing either (moto accepted it)."""
    ec2, elb = aws.client("ec2"), aws.client("elb")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    elb.create_load_balancer(
        LoadBalancerName="dup", Listeners=[_listener("TCP", "TCP")], Subnets=[subnet]
    )
    try:
        _duplicate_listener_refused(aws, elb)
    finally:  # moto's state is process-wide: leave no Classic ELB to a later test's second moto
        elb.delete_load_balancer(LoadBalancerName="dup")


def _duplicate_listener_refused(aws: AwsServer, elb: Any) -> None:
    elb.create_load_balancer_listeners(LoadBalancerName="dup", Listeners=[_listener("TCP", "TCP")])
    with pytest.raises(ClientError) as caught:
        elb.create_load_balancer_listeners(
            LoadBalancerName="dup", Listeners=[_listener("TCP", "SSL")]
        )
    error = caught.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (
        "DuplicateListener",
        400,
    )
    described = elb.describe_load_balancers(LoadBalancerNames=["dup"])
    listeners = [
        d["Listener"] for d in described["LoadBalancerDescriptions"][0]["ListenerDescriptions"]
    ]
    assert listeners == [_listener("TCP", "TCP")]
    assert aws.trail.calls("CreateLoadBalancerListeners")[-1].answered_by == (
        "fidelity:elb_duplicate_listener"
    )
