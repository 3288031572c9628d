"""Upstream's AWS-provider tables (``aws_tables``) run against ours; deviations are listed in
``controller/DEVIATIONS.md`` and marked here."""

from __future__ import annotations

import pytest

from controller.aws.annotations import (
    A_BACKEND_PROTOCOL,
    A_SSL_CERT,
    A_SSL_PORTS,
    PREFIX,
    build_health_check,
    build_listeners,
    key_value_list,
    parse_service,
)
from controller.aws.config import zone_to_region
from controller.aws.instances import InvalidProviderID, parse_provider_id
from controller.cloud import InvalidServiceConfig, Service, ServicePort
from tests.controller.upstream.aws_tables import (
    AZ_TO_REGION,
    BUILD_LISTENER,
    ENSURE_HEALTH_CHECK,
    KEY_VALUE_PROPERTIES,
    MAP_TO_AWS_INSTANCE_IDS,
    SECURITY_GROUP_ANNOTATIONS,
)

EMPTY_KEY_DEVIATION = "K=V K1=V2,Key1========, =====, ======Val, =Val, , 234,"


@pytest.mark.parametrize(("raw", "tags"), KEY_VALUE_PROPERTIES)
def test_key_value_properties_from_annotation(raw: str | None, tags: dict[str, str]) -> None:
    """TestGetKeyValuePropertiesFromAnnotation."""
    if raw == EMPTY_KEY_DEVIATION:
        # DEVIATIONS.md: items with an empty key ("=====", "=Val") are an error here (a Warning
        # event, nothing changed in AWS), where upstream drops them silently
        with pytest.raises(InvalidServiceConfig, match="has an empty key"):
            key_value_list("additional-resource-tags", raw)
        kept = ",".join(i for i in raw.split(",") if not i.strip().startswith("="))
        assert dict(key_value_list("additional-resource-tags", kept)) == tags
        return
    assert dict(key_value_list("additional-resource-tags", raw or "")) == tags


@pytest.mark.parametrize(("zone", "region"), AZ_TO_REGION)
def test_az_to_region(zone: str, region: str) -> None:
    """TestAzToRegion."""
    assert zone_to_region(zone) == region


@pytest.mark.parametrize(("provider_id", "instance_id"), MAP_TO_AWS_INSTANCE_IDS)
def test_map_to_aws_instance_ids(provider_id: str, instance_id: str | None) -> None:
    """TestMapToAWSInstanceIDs (MapToAWSInstanceID; the list forms map each node alike)."""
    if instance_id is None:
        with pytest.raises(InvalidProviderID):
            parse_provider_id(provider_id)
    else:
        assert parse_provider_id(provider_id) == instance_id


@pytest.mark.parametrize(
    ("case", "lb_port", "port_name", "node_port", "backend", "cert", "ssl_ports", "fails",
     "protocol", "instance_protocol", "cert_id"),
    BUILD_LISTENER,
    ids=[row[0] for row in BUILD_LISTENER],
)  # fmt: skip
def test_build_listener(
    case: str,
    lb_port: int,
    port_name: str,
    node_port: int,
    backend: str,
    cert: str,
    ssl_ports: str,
    fails: bool,
    protocol: str,
    instance_protocol: str,
    cert_id: str,
) -> None:
    """TestBuildListener (one Service port with protocol "tcp", as upstream's table builds
    it). Ours writes protocols upper case, as DescribeLoadBalancers reports them and AWS
    accepts them (DEVIATIONS.md); upstream sends them lower case."""
    annotations = {
        key: value
        for key, value in (
            (A_BACKEND_PROTOCOL, backend),
            (A_SSL_CERT, cert),
            (A_SSL_PORTS, ssl_ports),
        )
        if value
    }
    service = Service(
        namespace="default",
        name="svc",
        uid="u1",
        annotations=annotations,
        ports=(ServicePort(port=lb_port, protocol="tcp", node_port=node_port, name=port_name),),
    )
    if fails:
        with pytest.raises(InvalidServiceConfig):
            build_listeners(service)
        return
    (listener,) = build_listeners(service)
    assert listener.load_balancer_port == lb_port
    assert listener.instance_port == node_port
    assert listener.protocol == protocol.upper()
    assert listener.instance_protocol == instance_protocol.upper()
    assert listener.ssl_certificate_id == cert_id


@pytest.mark.parametrize(
    ("annotations", "want"),
    [row[1:] for row in ENSURE_HEALTH_CHECK],
    ids=[row[0] for row in ENSURE_HEALTH_CHECK],
)
def test_ensure_load_balancer_health_check(
    annotations: dict[str, str], want: tuple[int, int, int, int, str]
) -> None:
    """TestEnsureLoadBalancerHealthCheck: the health check built for a TCP listener on node
    port 8080 with these annotations (upstream then calls ConfigureHealthCheck with it)."""
    service = Service(
        namespace="default",
        name="svc",
        uid="u1",
        annotations=annotations,
        ports=(ServicePort(port=80, node_port=8080),),
    )
    check = build_health_check(service, build_listeners(service))
    got = (
        check.healthy_threshold,
        check.unhealthy_threshold,
        check.timeout,
        check.interval,
        check.target,
    )
    assert got == want


@pytest.mark.parametrize(
    ("annotation", "value", "groups"),
    [row[1:] for row in SECURITY_GROUP_ANNOTATIONS],
    ids=[row[0] for row in SECURITY_GROUP_ANNOTATIONS],
)
def test_security_group_annotations(annotation: str, value: str | None, groups: list[str]) -> None:
    """TestLBExtraSecurityGroupsAnnotation / TestLBSecurityGroupsAnnotation: the groups the
    annotation names (whether the controller also sets up its own group is the service
    controller's, checked end to end in the lb-walkthrough scenario)."""
    service = Service(
        namespace="default",
        name="myservice",
        uid="aid",
        annotations={} if value is None else {PREFIX + annotation: value},
        ports=(ServicePort(port=80, node_port=30080),),
    )
    spec = parse_service(service)
    named = spec.extra_security_groups if annotation.startswith("extra") else spec.security_groups
    assert set(named) == set(groups)
    other = spec.security_groups if annotation.startswith("extra") else spec.extra_security_groups
    assert other == ()
