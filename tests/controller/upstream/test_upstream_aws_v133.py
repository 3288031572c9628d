"""Upstream's v1.33.0 ``aws_test.go`` tables (``aws_v133_tables``) against ours: the port
protocol checks through each load-balancer kind's validation (upstream's ``checkProtocol``
and ``checkMixedProtocol`` run in ``EnsureLoadBalancer`` before any AWS call, ours in
``parse_service`` / ``parse_nlb_service``), and ``NodeIPFamilies`` as the cloud config reads
it, the order of an ELB's security groups and the subnets chosen for an ELB. All cases pass;
none is a deviation."""

from __future__ import annotations

from typing import Any

import pytest

from controller.aws.annotations import A_TYPE, parse_service
from controller.aws.config import load_cloud_config
from controller.aws.nlbspec import parse_nlb_service
from controller.aws.securitygroups import sort_lb_groups
from controller.aws.subnets import choose_subnets, cluster_subnets
from controller.aws.tags import ClusterTags, tag_list
from controller.cloud import InvalidServiceConfig, Service, ServicePort
from tests.controller.upstream.aws_v133_tables import (
    CHECK_MIXED_PROTOCOL,
    CHECK_PROTOCOL,
    ELB_SUBNETS,
    ELB_ZONE_TYPES,
    FIND_ELB_SUBNETS,
    NODE_IP_FAMILIES,
    SORT_ELB_SECURITY_GROUPS,
    TEST_CLUSTER_ID,
)


def _validate(nlb: bool, ports: list[tuple[str, int]]) -> None:
    service = Service(
        namespace="default",
        name="svc",
        uid="UID",
        annotations={A_TYPE: "nlb"} if nlb else {},
        ports=tuple(
            ServicePort(port=port, protocol=protocol, node_port=30000 + i)
            for i, (protocol, port) in enumerate(ports)
        ),
    )
    if nlb:
        parse_nlb_service(service, ensuring=True)
    else:
        parse_service(service, ensuring=True)


@pytest.mark.parametrize(("nlb", "protocol", "refused"), [r[1:] for r in CHECK_PROTOCOL],
                         ids=[r[0] for r in CHECK_PROTOCOL])  # fmt: skip
def test_check_protocol(nlb: bool, protocol: str, refused: bool) -> None:
    """TestCheckProtocol (upstream asserts only whether there is an error)."""
    if refused:
        with pytest.raises(InvalidServiceConfig):
            _validate(nlb, [(protocol, 8080)])
    else:
        _validate(nlb, [(protocol, 8080)])


@pytest.mark.parametrize(("nlb", "ports", "error"), [r[1:] for r in CHECK_MIXED_PROTOCOL],
                         ids=[r[0] for r in CHECK_MIXED_PROTOCOL])  # fmt: skip
def test_check_mixed_protocol(nlb: bool, ports: list[tuple[str, int]], error: str) -> None:
    """TestCheckMixedProtocol (upstream's error text)."""
    if not error:
        _validate(nlb, ports)
        return
    with pytest.raises(InvalidServiceConfig) as err:
        _validate(nlb, ports)
    assert err.value.reason == error


@pytest.mark.parametrize(("text", "families"), [r[1:] for r in NODE_IP_FAMILIES],
                         ids=[r[0] for r in NODE_IP_FAMILIES])  # fmt: skip
def test_read_cloud_config_node_ip_families(text: str, families: tuple[str, ...]) -> None:
    """TestReadAWSCloudConfigNodeIPFamilies: a repeated key adds a family, in order."""
    cfg, _ = load_cloud_config(text)
    assert tuple(cfg.node_ip_families) == families


@pytest.mark.parametrize(("groups", "annotations", "tagged", "want"),
                         [r[1:] for r in SORT_ELB_SECURITY_GROUPS],
                         ids=[r[0] for r in SORT_ELB_SECURITY_GROUPS])  # fmt: skip
def test_sort_elb_security_group_list(
    groups: list[str], annotations: dict[str, str], tagged: set[str], want: list[str]
) -> None:
    """TestCloud_sortELBSecurityGroupList: the annotations as the Classic validation reads
    them; the groups tagged for the load balancer are ours to prefer among equals."""
    service = Service(
        namespace="default",
        name="svc",
        uid="UID",
        annotations=annotations,
        ports=(ServicePort(port=80, node_port=30080),),
    )
    spec = parse_service(service)
    got = sort_lb_groups(
        groups,
        security_groups=spec.security_groups,
        extra_security_groups=spec.extra_security_groups,
        preferred=tagged,
    )
    assert got == want


def _route_table(subnet_id: str | None, gateway: str) -> dict[str, Any]:
    association: dict[str, Any] = {"SubnetId": subnet_id} if subnet_id else {"Main": True}
    return {
        "Associations": [association],
        "Routes": [{"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": gateway}],
    }


@pytest.mark.parametrize(("subnets", "tables", "internal", "want"),
                         [r[1:] for r in FIND_ELB_SUBNETS],
                         ids=[r[0] for r in FIND_ELB_SUBNETS])  # fmt: skip
def test_find_elb_subnets(
    subnets: list[str], tables: dict[str, bool], internal: bool, want: list[str]
) -> None:
    """Test_findELBSubnets: upstream's subnets, route tables (its main table routes to an
    internet gateway) and zone types through the steps ``Subnets.for_load_balancer`` takes
    after its describes: the cluster filter (``findSubnets``), then the choice."""
    described: list[Any] = [
        {"SubnetId": s, "AvailabilityZone": ELB_SUBNETS[s][0],
         "Tags": tag_list(ELB_SUBNETS[s][1])}
        for s in subnets
    ]  # fmt: skip
    route_tables: list[Any] = [_route_table(None, "igw-main")]
    route_tables += [
        _route_table(s, ("igw-" if public else "vgw-") + s[-8:]) for s, public in tables.items()
    ]
    tags = ClusterTags(TEST_CLUSTER_ID)
    got = choose_subnets(
        cluster_subnets(described, tags), route_tables, ELB_ZONE_TYPES, internal=internal, tags=tags
    )
    assert sorted(got) == sorted(want)
