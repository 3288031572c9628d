"""Network Load Balancers: ensure/update/delete against the lab's AWS endpoint, checked via the
call trail and the end state (boto3 against the same endpoint).

Sequences are upstream v1.33.0's (``controller/aws/README.md`` "NLB call sequences"), with
the differences listed in ``controller/DEVIATIONS.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.aws.annotations import A_TYPE, PREFIX
from controller.aws.nlbspec import A_EIP_ALLOCATIONS
from controller.cloud import InvalidServiceConfig, LoadBalancerStatus, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import LB_NAME, UID, actions, mutating, nodes
from tests.controller.aws.topology import CLUSTER, Topology

NLB = {A_TYPE: "nlb"}
CLIENT = f"kubernetes.io/rule/nlb/client={LB_NAME}"
HEALTH = f"kubernetes.io/rule/nlb/health={LB_NAME}"
MTU = "kubernetes.io/rule/nlb/mtu"


def service(annotations: dict[str, str] | None = None, **kw: Any) -> Service:
    base = Service(
        namespace="shop",
        name="web",
        uid=UID,
        ports=(ServicePort(port=80, node_port=30080, name="http"),),
        annotations={**NLB, **(annotations or {})},
    )
    return replace(base, **kw)


def rules(aws: AwsServer, group_id: str) -> set[tuple[str, int, int, str, str]]:
    """A group's CIDR rules as (protocol, from, to, cidr, description)."""
    desc = aws.client("ec2").describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    out: set[tuple[str, int, int, str, str]] = set()
    for p in desc["IpPermissions"]:
        for r in p.get("IpRanges", []):
            out.add(
                (
                    p["IpProtocol"],
                    p.get("FromPort", -1),
                    p.get("ToPort", -1),
                    r["CidrIp"],
                    r.get("Description", ""),
                )
            )
    return out


def ours(aws: AwsServer, group_id: str) -> set[tuple[str, int, int, str, str]]:
    return {r for r in rules(aws, group_id) if r[4].startswith("kubernetes.io/rule/nlb/")}


def target_groups(aws: AwsServer) -> list[dict[str, Any]]:
    return [dict(g) for g in aws.client("elbv2").describe_target_groups()["TargetGroups"]]


def registered(aws: AwsServer, tg_arn: str) -> set[tuple[str, int]]:
    """The registered targets: ``DescribeTargetHealth`` also lists deregistered ones while
    they drain (as AWS does), which are not."""
    health = aws.client("elbv2").describe_target_health(TargetGroupArn=tg_arn)
    return {
        (d["Target"]["Id"], d["Target"]["Port"])
        for d in health["TargetHealthDescriptions"]
        if d["TargetHealth"].get("Reason") != "Target.DeregistrationInProgress"
    }


def the_lb(aws: AwsServer) -> dict[str, Any]:
    return dict(aws.client("elbv2").describe_load_balancers(Names=[LB_NAME])["LoadBalancers"][0])


def test_new_nlb_follows_upstream_sequence_and_end_state(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    status = lb.ensure_load_balancer("kubernetes", service(), nodes(topo))

    assert actions(aws) == [
        "DescribeInstances",  # findInstancesForELB
        "DescribeSubnets",  # subnet discovery, as for a Classic ELB
        "DescribeRouteTables",
        "DescribeAvailabilityZones",
        "DescribeLoadBalancers",  # describeLoadBalancerv2: not found
        "CreateLoadBalancer",
        "CreateTargetGroup",  # createListenerV2 -> ensureTargetGroup
        "RegisterTargets",
        "CreateListener",
        "DescribeLoadBalancerAttributes",  # reconcileLBAttributes: nothing differs
        "DescribeSubnets",  # getSubnetCidrs of the LB's subnets
        "DescribeSecurityGroups",  # getTaggedSecurityGroups
        "AuthorizeSecurityGroupIngress",  # client rule + MTU on the node group
    ]
    nlb = the_lb(aws)
    assert nlb["Type"] == "network"
    assert status == LoadBalancerStatus(status.ingress)
    assert status.ingress[0].hostname == nlb["DNSName"]
    assert nlb["DNSName"].endswith(".elb.us-east-1.amazonaws.com")
    create = aws.trail.calls("CreateLoadBalancer")[0]
    assert create.params["Name"] == LB_NAME
    tags = {
        t["Key"]: t["Value"]
        for t in aws.client("elbv2").describe_tags(ResourceArns=[nlb["LoadBalancerArn"]])[
            "TagDescriptions"
        ][0]["Tags"]
    }
    assert tags == {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "kubernetes.io/service-name": "shop/web",
    }

    [tg] = target_groups(aws)
    assert tg["TargetGroupName"].startswith("k8s-shop-web-")
    assert (tg["Protocol"], tg["Port"], tg["TargetType"]) == ("TCP", 30080, "instance")
    assert (tg["HealthCheckProtocol"], tg["HealthCheckPort"]) == ("TCP", "traffic-port")
    assert (tg["HealthCheckIntervalSeconds"], tg["HealthyThresholdCount"]) == (30, 3)
    assert tg["UnhealthyThresholdCount"] == 3
    assert registered(aws, tg["TargetGroupArn"]) == {(i, 30080) for i in topo.instances.values()}
    [listener] = aws.client("elbv2").describe_listeners(LoadBalancerArn=nlb["LoadBalancerArn"])[
        "Listeners"
    ]
    assert (listener["Port"], listener["Protocol"]) == (80, "TCP")
    assert listener["DefaultActions"][0]["TargetGroupArn"] == tg["TargetGroupArn"]
    # 0.0.0.0/0 on TCP traffic ports covers the health checks: no health rule (upstream)
    assert ours(aws, topo.nodes_group) == {
        ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT),
        ("icmp", 3, 4, "0.0.0.0/0", MTU),
    }


def test_second_ensure_mutates_nothing(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    since = aws.trail.events()[-1].seq
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", service(), nodes(topo))
    assert mutating(aws, since) == []
    assert actions(aws, since) == [
        "DescribeInstances",
        "DescribeSubnets",
        "DescribeRouteTables",
        "DescribeAvailabilityZones",
        "DescribeLoadBalancers",
        "DescribeListeners",
        "DescribeTargetGroups",
        "DescribeTargetHealth",
        "DescribeLoadBalancerAttributes",
        "DescribeSubnets",
        "DescribeSecurityGroups",
    ]


def test_local_traffic_policy_checks_health_node_port_from_subnets(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    svc = service(
        {PREFIX + "healthcheck-interval": "20"},
        external_traffic_policy="Local",
        health_check_node_port=31999,
        load_balancer_source_ranges=("203.0.113.0/24",),
    )
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", svc, nodes(topo))
    [tg] = target_groups(aws)
    assert (tg["HealthCheckProtocol"], tg["HealthCheckPort"]) == ("HTTP", "31999")
    assert (tg["HealthCheckPath"], tg["HealthCheckIntervalSeconds"]) == ("/healthz", 20)
    assert (tg["HealthyThresholdCount"], tg["UnhealthyThresholdCount"]) == (2, 2)
    assert ours(aws, topo.nodes_group) == {
        ("tcp", 30080, 30080, "203.0.113.0/24", CLIENT),
        ("tcp", 31999, 31999, "10.20.0.0/24", HEALTH),
        ("tcp", 31999, 31999, "10.20.1.0/24", HEALTH),
        ("icmp", 3, 4, "203.0.113.0/24", MTU),
    }


def test_node_set_change_registers_and_deregisters(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo, "node-0"))
    [tg] = target_groups(aws)
    assert registered(aws, tg["TargetGroupArn"]) == {(topo.instances["node-0"], 30080)}
    since = aws.trail.events()[-1].seq
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-1"))
    assert mutating(aws, since) == ["RegisterTargets", "DeregisterTargets"]
    assert registered(aws, tg["TargetGroupArn"]) == {(topo.instances["node-1"], 30080)}
    # the node group still serves a target: its rules stay
    assert ("tcp", 30080, 30080, "0.0.0.0/0", CLIENT) in ours(aws, topo.nodes_group)


def test_port_change_replaces_listener_target_group_and_rules(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """kubernetes#70421: the old node port's rule must not stay open."""
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    [old_tg] = target_groups(aws)
    moved = service(ports=(ServicePort(port=8080, node_port=30081, name="http"),))
    lb.ensure_load_balancer("kubernetes", moved, nodes(topo))
    [new_tg] = target_groups(aws)
    assert new_tg["TargetGroupArn"] != old_tg["TargetGroupArn"]
    assert new_tg["Port"] == 30081
    listeners = aws.client("elbv2").describe_listeners(
        LoadBalancerArn=the_lb(aws)["LoadBalancerArn"]
    )
    assert [(x["Port"], x["Protocol"]) for x in listeners["Listeners"]] == [(8080, "TCP")]
    assert ours(aws, topo.nodes_group) == {
        ("tcp", 30081, 30081, "0.0.0.0/0", CLIENT),
        ("icmp", 3, 4, "0.0.0.0/0", MTU),
    }


def test_tls_attributes_internal_and_target_group_attributes(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    acm: Any = aws.client("acm")  # type: ignore[call-overload]  # not one of the typed ones
    cert = acm.request_certificate(DomainName="web.example.com")["CertificateArn"]
    svc = service(
        {
            PREFIX + "ssl-cert": cert,
            PREFIX + "ssl-ports": "443",
            PREFIX + "ssl-negotiation-policy": "ELBSecurityPolicy-TLS-1-2-2017-01",
            PREFIX + "internal": "true",
            PREFIX + "cross-zone-load-balancing-enabled": "true",
            PREFIX + "additional-resource-tags": "team=web,env",
            PREFIX + "target-group-attributes": "proxy_protocol_v2.enabled=true",
        },
        ports=(
            ServicePort(port=80, node_port=30080, name="http"),
            ServicePort(port=443, node_port=30443, name="https"),
        ),
    )
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", svc, nodes(topo))
    elbv2 = aws.client("elbv2")
    nlb = the_lb(aws)
    assert aws.trail.calls("CreateLoadBalancer")[0].params.get("Scheme") == "internal"
    # internal: the private subnet is a candidate too (one per zone, role tag first)
    listeners = {
        x["Port"]: x
        for x in elbv2.describe_listeners(LoadBalancerArn=nlb["LoadBalancerArn"])["Listeners"]
    }
    assert listeners[80]["Protocol"] == "TCP"
    assert listeners[443]["Protocol"] == "TLS"
    assert listeners[443]["Certificates"][0]["CertificateArn"] == cert
    assert listeners[443]["SslPolicy"] == "ELBSecurityPolicy-TLS-1-2-2017-01"
    attrs = {
        a["Key"]: a["Value"]
        for a in elbv2.describe_load_balancer_attributes(LoadBalancerArn=nlb["LoadBalancerArn"])[
            "Attributes"
        ]
    }
    assert attrs["load_balancing.cross_zone.enabled"] == "true"
    for tg in target_groups(aws):
        assert tg["Protocol"] == "TCP"  # TLS to the targets only with backend-protocol: ssl
        tg_attrs = {
            a["Key"]: a["Value"]
            for a in elbv2.describe_target_group_attributes(TargetGroupArn=tg["TargetGroupArn"])[
                "Attributes"
            ]
        }
        assert tg_attrs["proxy_protocol_v2.enabled"] == "true"
        assert tg_attrs["preserve_client_ip.enabled"] == "true"  # AWS's default, untouched
    tags = {
        t["Key"]: t["Value"]
        for t in elbv2.describe_tags(ResourceArns=[nlb["LoadBalancerArn"]])["TagDescriptions"][0][
            "Tags"
        ]
    }
    assert (tags["team"], tags["env"]) == ("web", "")


def test_delete_revokes_our_rules_then_deletes_and_keeps_user_rules(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    ec2 = aws.client("ec2")
    user_rules = [
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
        {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "all from VPN"}]},
    ]
    ec2.authorize_security_group_ingress(GroupId=topo.nodes_group, IpPermissions=user_rules)  # type: ignore[arg-type]
    before = rules(aws, topo.nodes_group)
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    # another node joins and one leaves: user rules untouched (kubernetes#64148, #98278)
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-1"))
    assert before <= rules(aws, topo.nodes_group)
    since = aws.trail.events()[-1].seq

    lb.ensure_load_balancer_deleted("kubernetes", service())

    assert actions(aws, since) == [
        "DescribeLoadBalancers",
        "DescribeSecurityGroups",
        "RevokeSecurityGroupIngress",  # ours first (kubernetes#57568 / #81610)
        "DescribeTargetGroups",
        "DeleteLoadBalancer",
        "DeleteTargetGroup",
    ]
    assert aws.client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    assert target_groups(aws) == []
    assert rules(aws, topo.nodes_group) == before
    assert ours(aws, topo.nodes_group) == set()
    # idempotent: a second delete finds nothing and changes nothing
    since = aws.trail.events()[-1].seq
    lb.ensure_load_balancer_deleted("kubernetes", service())
    assert mutating(aws, since) == []
    assert lb.get_load_balancer("kubernetes", service()) == (None, False)


@pytest.mark.parametrize(
    ("annotations", "field"),
    [
        ({PREFIX + "healthcheck-protocol": "SSL"}, PREFIX + "healthcheck-protocol"),
        ({PREFIX + "healthcheck-interval": "ten"}, PREFIX + "healthcheck-interval"),
        ({PREFIX + "healthcheck-port": "http"}, PREFIX + "healthcheck-port"),
        (
            {PREFIX + "cross-zone-load-balancing-enabled": "yes"},
            PREFIX + "cross-zone-load-balancing-enabled",
        ),
        ({PREFIX + "extra-security-groups": "sg-1"}, PREFIX + "extra-security-groups"),
        (
            {PREFIX + "target-group-attributes": "stickiness.enabled=true"},
            PREFIX + "target-group-attributes",
        ),
        ({A_EIP_ALLOCATIONS: "eipalloc-1,oops"}, A_EIP_ALLOCATIONS),
        ({PREFIX + "access-log-enabled": "true"}, PREFIX + "access-log-enabled"),
    ],
)
def test_bad_annotation_is_refused_before_any_call(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, annotations: dict[str, str], field: str
) -> None:
    lb = make_cloud().load_balancer()
    with pytest.raises(InvalidServiceConfig) as err:
        lb.ensure_load_balancer("kubernetes", service(annotations), nodes(topo))
    assert err.value.field == field
    assert err.value.value == annotations[field]
    assert actions(aws) == []


def test_eip_count_must_match_subnets_and_nothing_changes(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    with pytest.raises(InvalidServiceConfig, match=r"EIP AllocationIDs \(1\) and SubnetIDs \(2\)"):
        lb.ensure_load_balancer(
            "kubernetes", service({A_EIP_ALLOCATIONS: "eipalloc-0a1b2c3d"}), nodes(topo)
        )
    assert mutating(aws) == []


def test_udp_service_opens_udp_and_checks_health_over_tcp(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    svc = service(ports=(ServicePort(port=53, node_port=30053, protocol="UDP", name="dns"),))
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", svc, nodes(topo))
    [tg] = target_groups(aws)
    assert (tg["Protocol"], tg["HealthCheckProtocol"]) == ("UDP", "TCP")
    assert ours(aws, topo.nodes_group) == {
        ("udp", 30053, 30053, "0.0.0.0/0", CLIENT),
        ("tcp", 30053, 30053, "10.20.0.0/24", HEALTH),
        ("tcp", 30053, 30053, "10.20.1.0/24", HEALTH),
        ("icmp", 3, 4, "0.0.0.0/0", MTU),
    }


def test_unknown_node_instance_is_not_registered(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """The lab refuses unknown targets (as AWS does); the controller never sends them."""
    from controller.cloud import Node

    ghost = Node(name="ghost", provider_id="aws:///us-east-1a/i-0123456789abcdef0")
    make_cloud().load_balancer().ensure_load_balancer(
        "kubernetes", service(), [*nodes(topo, "node-0"), ghost]
    )
    [tg] = target_groups(aws)
    assert registered(aws, tg["TargetGroupArn"]) == {(topo.instances["node-0"], 30080)}
    with pytest.raises(ClientError):
        aws.client("elbv2").register_targets(
            TargetGroupArn=tg["TargetGroupArn"], Targets=[{"Id": "i-0123456789abcdef0"}]
        )


def test_http_checked_and_logged_nlb_is_steady_on_the_second_sync(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream modifies an HTTP-checked target group on every sync (its path compared with its
    own empty request); ours compares with the target group (DEVIATIONS.md)."""
    aws.client("s3").create_bucket(Bucket="nlb-logs")  # type: ignore[call-overload]
    svc = service(
        {
            PREFIX + "access-log-enabled": "true",
            PREFIX + "access-log-s3-bucket-name": "nlb-logs",
            PREFIX + "access-log-s3-bucket-prefix": "web",
        },
        external_traffic_policy="Local",
        health_check_node_port=31999,
    )
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    attrs = {
        a["Key"]: a["Value"]
        for a in aws.client("elbv2").describe_load_balancer_attributes(
            LoadBalancerArn=the_lb(aws)["LoadBalancerArn"]
        )["Attributes"]
    }
    assert attrs["access_logs.s3.enabled"] == "true"
    assert (attrs["access_logs.s3.bucket"], attrs["access_logs.s3.prefix"]) == ("nlb-logs", "web")
    since = aws.trail.events()[-1].seq
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    lb.update_load_balancer("kubernetes", svc, nodes(topo))
    assert mutating(aws, since) == []


def test_delete_follows_the_status_when_the_type_annotation_was_removed(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Ensure refuses NLB -> Classic (upstream's guard); deletion still finds the NLB by the
    status hostname (upstream goes by the annotation, looks for a Classic ELB and leaks it)."""
    lb = make_cloud().load_balancer()
    status = lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    switched = replace(
        service(), annotations={}, status_ingress=({"hostname": status.ingress[0].hostname},)
    )
    with pytest.raises(InvalidServiceConfig, match="after creation for Classic Load Balancer"):
        lb.ensure_load_balancer("kubernetes", switched, nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", switched)
    assert aws.client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    assert target_groups(aws) == []
    assert ours(aws, topo.nodes_group) == set()
