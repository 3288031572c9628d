"""Upstream ``TestEnsureSSLNegotiationPolicyErrorHandling`` (kubernetes/cloud-provider-aws
``pkg/providers/v1/aws_loadbalancer_test.go`` at 63ec440c3275321b55afa45480e2fdfd2b0e93c4)
against ``ClassicLoadBalancers.ensure_ssl_negotiation_policy`` on the lab's ELB, and the
empty annotation sent to ELB as upstream sends it."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, ParamValidationError

import controller.aws.annotations as A
from controller.cloud import ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import nodes, service
from tests.controller.aws.topology import Topology

#: (case, load balancer name, policy name, an error expected). Upstream's fake ELB answers
#: the unnamed load balancer with an error and "test-lb" with PolicyNotFound (then the
#: policy is created); here "test-lb" is a real ELB in the lab.
SSL_NEGOTIATION_POLICY_ERRORS: list[tuple[str, str, str, bool]] = [
    ("Expect LoadBalancerAttributeNotFoundException, error", "", "", True),
    ("Expect PolicyNotFoundException, nil error", "test-lb", "", False),
]


@pytest.mark.parametrize(
    ("case", "lb_name", "policy", "fails"),
    SSL_NEGOTIATION_POLICY_ERRORS,
    ids=[r[0] for r in SSL_NEGOTIATION_POLICY_ERRORS],
)
def test_ensure_ssl_negotiation_policy_error_handling(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, case: str, lb_name: str, policy: str,
    fails: bool,
) -> None:  # fmt: skip
    aws.client("elb").create_load_balancer(
        LoadBalancerName="test-lb",
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 30080}],
        Subnets=[topo.public_subnets[0]],
    )
    classic = make_cloud().load_balancer().classic  # type: ignore[attr-defined]
    if fails:
        with pytest.raises((ClientError, ParamValidationError)):
            classic.ensure_ssl_negotiation_policy(lb_name, policy)
    else:
        assert classic.ensure_ssl_negotiation_policy(lb_name, policy) == (
            "k8s-SSLNegotiationPolicy-"
        )


def test_an_empty_ssl_negotiation_policy_annotation_is_sent_to_elb(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream sends a present annotation whatever its value (ELB refuses an empty one; the
    lab's ELB does not check the reference). Before, ours read an empty one as absent and
    set no policy, so the listener silently kept ELB's default."""
    cert = aws.client("acm").request_certificate(DomainName="a.example")["CertificateArn"]
    annotations = {A.A_SSL_CERT: cert, A.A_SSL_NEGOTIATION_POLICY: ""}
    ports = (ServicePort(port=443, node_port=30443, name="tls"),)
    make_cloud().load_balancer().ensure_load_balancer(
        "kubernetes", service(annotations, ports=ports), nodes(topo)
    )
    [created] = [
        e.raw_params
        for e in aws.trail.events()
        if e.action == "CreateLoadBalancerPolicy"
        and e.raw_params.get("PolicyTypeName") == "SSLNegotiationPolicyType"
    ]
    assert created["PolicyName"] == "k8s-SSLNegotiationPolicy-"
    assert created["PolicyAttributes.member.1.AttributeValue"] == ""
    [listener_set] = [
        e.raw_params for e in aws.trail.events() if e.action == "SetLoadBalancerPoliciesOfListener"
    ]
    assert listener_set["LoadBalancerPort"] == "443"
    assert listener_set["PolicyNames.member.1"] == "k8s-SSLNegotiationPolicy-"
