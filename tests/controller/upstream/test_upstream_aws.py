"""Upstream's AWS-provider tables (``aws_tables``) run against ours; deviations are listed in
``controller/DEVIATIONS.md`` and marked here."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.aws.annotations import (
    A_BACKEND_PROTOCOL,
    A_SOURCE_RANGES,
    A_SSL_CERT,
    A_SSL_PORTS,
    A_SUBNETS,
    A_TYPE,
    PREFIX,
    build_health_check,
    build_listeners,
    id_list,
    key_value_list,
    load_balancer_kind,
    parse_service,
    source_ranges,
)
from controller.aws.config import zone_to_region
from controller.aws.instances import InstanceCache
from controller.aws.nlbspec import parse_nlb_service
from controller.aws.providerid import InvalidProviderID, parse_provider_id
from controller.cloud import CloudError, InvalidServiceConfig, Node, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import Topology
from tests.controller.upstream.aws_tables import (
    AZ_TO_REGION,
    BUILD_LISTENER,
    ENSURE_HEALTH_CHECK,
    KEY_VALUE_PROPERTIES,
    LOAD_BALANCER_TYPE,
    MAP_TO_AWS_INSTANCE_IDS,
    SECURITY_GROUP_ANNOTATIONS,
    SOURCE_RANGES_ERROR,
    SOURCE_RANGES_OK,
    SUBNETS_ANNOTATION,
    VALIDATE_SERVICE_ANNOTATIONS,
)

#: the Classic ELB name of ``_lb_service`` (its uid without dashes, upstream's rule)
_LB_NAME = "a1f2e3d4c5b6a7988a7b6c5d4e3f2a1b"


def _lb_service(annotations: dict[str, str]) -> Service:
    return Service(
        namespace="default",
        name="myservice",
        uid="1f2e3d4c-5b6a-7988-a7b6-c5d4e3f2a1b0",
        annotations=annotations,
        ports=(ServicePort(port=80, node_port=30080),),
    )


def _lb_nodes(topo: Topology) -> list[Node]:
    return [Node(name=n, provider_id=topo.provider_id(n)) for n in topo.instances]


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


def _svc(annotations: dict[str, str], **kw: Any) -> Service:
    base = Service(
        namespace="test-namespace",
        name="test-service",
        uid="u1",
        annotations=annotations,
        ports=(ServicePort(port=80, node_port=30080),),
    )
    return replace(base, **kw)


@pytest.mark.parametrize(
    ("annotations", "hostname", "error"),
    [row[1:] for row in VALIDATE_SERVICE_ANNOTATIONS],
    ids=[row[0] for row in VALIDATE_SERVICE_ANNOTATIONS],
)
def test_validate_service_annotations(
    annotations: dict[str, str], hostname: str | None, error: str
) -> None:
    """TestValidateServiceAnnotations through our whole pre-flight validation (our Service
    has a TCP port with a node port, so only the annotations decide): a Classic ELB's through
    ``parse_service``, an NLB's through ``parse_nlb_service``."""
    ingress = () if hostname is None else ({"hostname": hostname},)
    service = _svc(annotations, status_ingress=ingress)
    parse = parse_nlb_service if load_balancer_kind(annotations) == "nlb" else parse_service
    if error:
        with pytest.raises(InvalidServiceConfig) as err:
            parse(service, ensuring=True)
        assert error in str(err.value)
        return
    parse(service, ensuring=True)


@pytest.mark.parametrize(
    ("value", "kind"),
    [row[1:] for row in LOAD_BALANCER_TYPE],
    ids=[r[0] for r in LOAD_BALANCER_TYPE],
)
def test_load_balancer_type(value: str | None, kind: str) -> None:
    """TestIsNLB / TestIsLBExternal."""
    assert load_balancer_kind({} if value is None else {A_TYPE: value}) == kind


@pytest.mark.parametrize(
    ("value", "items"),
    [row[1:] for row in SUBNETS_ANNOTATION],
    ids=[r[0] for r in SUBNETS_ANNOTATION],
)
def test_subnets_annotation(value: str | None, items: list[str] | None) -> None:
    """Test_parseStringSliceAnnotation / Test_getLoadBalancerSubnets (no EC2 lookups).
    Upstream's ``wantExist`` is whether the annotation is there (None here) and ``want`` the
    items; the items are compared on their own first, then what the Classic validation makes
    of them (an annotation present with no items is upstream's getLoadBalancerSubnets error)."""
    assert list(id_list(A_SUBNETS, value or "")) == (items or [])
    service = _svc({} if value is None else {A_SUBNETS: value})
    if items is None:
        with pytest.raises(InvalidServiceConfig, match="unable to resolve empty subnet slice"):
            parse_service(service)
        return
    assert list(parse_service(service).subnets) == items


@pytest.mark.parametrize("value", SOURCE_RANGES_ERROR)
@pytest.mark.parametrize("where", ["annotation", "spec"])
def test_source_ranges_errors(value: str, where: str) -> None:
    """TestGetLoadBalancerSourceRanges, its checkError values."""
    if where == "annotation":
        service = _svc({A_SOURCE_RANGES: value})
    else:
        service = _svc({}, load_balancer_source_ranges=tuple(value.split(",")))
    with pytest.raises(InvalidServiceConfig):
        source_ranges(service)


@pytest.mark.parametrize(("value", "count"), SOURCE_RANGES_OK)
@pytest.mark.parametrize("where", ["annotation", "spec"])
def test_source_ranges_ok(value: str, count: int, where: str) -> None:
    """TestGetLoadBalancerSourceRanges, its checkOK values and the allow-all defaults."""
    if where == "annotation":
        service = _svc({A_SOURCE_RANGES: value})
    else:
        service = _svc({}, load_balancer_source_ranges=tuple(value.split(",")))
    assert len(source_ranges(service)) == count


@pytest.mark.parametrize("annotations", [{}, {A_SOURCE_RANGES: ""}])
def test_source_ranges_default_allows_all(annotations: dict[str, str]) -> None:
    """TestGetLoadBalancerSourceRanges: no field and an empty annotation mean allow-all."""
    assert source_ranges(_svc(annotations)) == ("0.0.0.0/0",)


@pytest.mark.parametrize(
    ("annotation", "value", "groups"),
    [row[1:] for row in SECURITY_GROUP_ANNOTATIONS],
    ids=[row[0] for row in SECURITY_GROUP_ANNOTATIONS],
)
def test_security_group_annotations_on_the_elb(
    aws: AwsServer,
    topo: Topology,
    make_cloud: MakeCloud,
    annotation: str,
    value: str | None,
    groups: list[str],
) -> None:
    """TestLBExtraSecurityGroupsAnnotation / TestLBSecurityGroupsAnnotation, every field
    upstream compares of ``buildELBSecurityGroupList``: the list (extra: the groups after the
    controller's own ``k8s-elb-…`` group, as a set; security-groups: the whole list, as a
    set) and ``setupSg`` (true for extra, false for security-groups), read here as the ELB's
    groups and whether the controller created and opened its own group. Upstream's fake ids
    ``sg-000001`` / ``sg-000002`` are real groups of the lab's VPC."""
    ec2 = aws.client("ec2")
    real = {
        fake: ec2.create_security_group(
            GroupName="user-" + fake[3:], Description="u", VpcId=topo.vpc
        )["GroupId"]
        for fake in ("sg-000001", "sg-000002")
    }
    raw = value
    for fake, gid in real.items():
        raw = None if raw is None else raw.replace(fake, gid)
    svc = _lb_service({} if raw is None else {PREFIX + annotation: raw})
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", svc, _lb_nodes(topo))
    described = aws.client("elb").describe_load_balancers(LoadBalancerNames=[_LB_NAME])
    elb_groups = list(described["LoadBalancerDescriptions"][0]["SecurityGroups"])
    own = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [f"k8s-elb-{_LB_NAME}"]}]
    )["SecurityGroups"]
    setup_sg = bool(own) and bool(own[0]["IpPermissions"])
    want = {real[g] for g in groups}
    if annotation.startswith("extra"):
        assert setup_sg
        assert elb_groups[0] == own[0]["GroupId"]
        assert set(elb_groups[1:]) == want
    else:
        assert not setup_sg
        assert not own
        assert set(elb_groups) == want


@pytest.mark.parametrize(
    "timeout",
    [
        pytest.param("1", id="validates resulting expected health check before making an API call"),
        pytest.param("3.3", id="handles invalid override values"),
    ],
)
def test_ensure_load_balancer_health_check_refused(timeout: str) -> None:
    """TestEnsureLoadBalancerHealthCheck's error subtests (upstream checks only that there is
    an error, and that no ConfigureHealthCheck is made: ours refuses while building it)."""
    service = Service(
        namespace="default",
        name="svc",
        uid="u1",
        annotations={PREFIX + "healthcheck-timeout": timeout},
        ports=(ServicePort(port=80, node_port=8080),),
    )
    with pytest.raises(InvalidServiceConfig):
        build_health_check(service, build_listeners(service))


@pytest.mark.parametrize(("provider_id", "instance_id"), MAP_TO_AWS_INSTANCE_IDS)
def test_map_to_aws_instance_ids_tolerant(
    provider_id: str, instance_id: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TestMapToAWSInstanceIDs, its ``mapToAWSInstanceIDsTolerant`` half: one node, and the
    ids asked for are its one instance id, or none when its providerID does not parse. Ours
    does this inside ``InstanceCache.for_nodes`` (upstream's ``findInstancesForELB`` calls the
    tolerant form); its strict list form ``mapToAWSInstanceIDs`` has no counterpart here."""
    asked: list[str] = []

    def get(_self: InstanceCache, ids: list[str]) -> list[Any]:
        asked.extend(ids)
        return []

    monkeypatch.setattr(InstanceCache, "get", get)
    cache = InstanceCache.__new__(InstanceCache)  # for_nodes reads nothing but ``get``
    cache.for_nodes([Node(name="node", provider_id=provider_id)])
    assert asked == ([] if instance_id is None else [instance_id])


def test_ensure_load_balancer_health_check_update_fails(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """TestEnsureLoadBalancerHealthCheck "returns error when updating the health check
    fails": ConfigureHealthCheck is asked with the default check and its error is the
    ensure's (upstream: ``require.Error`` and the mock's expected call)."""
    aws.control.add_fault(action="ConfigureHealthCheck", code="InternalFailure", status=500)
    lb = make_cloud().load_balancer()
    with pytest.raises(CloudError):
        lb.ensure_load_balancer("kubernetes", _lb_service({}), _lb_nodes(topo))
    calls = aws.trail.calls("ConfigureHealthCheck")
    assert calls
    assert {c.raw_params.get("HealthCheck.Target") for c in calls} == {"TCP:30080"}


def test_ensure_load_balancer_health_check_unchanged_makes_no_call(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """TestEnsureLoadBalancerHealthCheck "does not make an API call if the current health
    check is the same": the default check, then the timeout override, each ensured twice;
    the second ensure of each asks no ConfigureHealthCheck."""
    lb = make_cloud().load_balancer()
    for given in ({}, {PREFIX + "healthcheck-timeout": "3"}):
        first = len(aws.trail.calls("ConfigureHealthCheck"))
        lb.ensure_load_balancer("kubernetes", _lb_service(given), _lb_nodes(topo))
        before = len(aws.trail.calls("ConfigureHealthCheck"))
        assert before == first + 1  # the check changed: one call
        lb.ensure_load_balancer("kubernetes", _lb_service(given), _lb_nodes(topo))
        assert len(aws.trail.calls("ConfigureHealthCheck")) == before
