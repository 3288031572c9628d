"""Annotation/spec parsing: upstream mappings, validation naming the field, never a crash."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import controller.aws.annotations as A
from controller.aws.annotations import Listener, parse_service
from controller.aws.nlbspec import A_EIP_ALLOCATIONS, parse_nlb_service, target_group_name
from controller.cloud import ImplementedElsewhere, InvalidServiceConfig, Service, ServicePort


def svc(annotations: dict[str, str] | None = None, **kw: Any) -> Service:
    base = Service(
        namespace="default",
        name="web",
        uid="1f2e3d4c-5b6a-7988-a7b6-c5d4e3f2a1b0",
        ports=(ServicePort(port=80, node_port=30080, name="http"),),
        annotations=annotations or {},
    )
    return replace(base, **kw)


def test_defaults_match_upstream() -> None:
    spec = parse_service(svc())
    assert spec.listeners == (Listener("TCP", 80, "TCP", 30080),)
    assert spec.health_check.target == "TCP:30080"
    assert (spec.health_check.healthy_threshold, spec.health_check.unhealthy_threshold) == (2, 6)
    assert (spec.health_check.timeout, spec.health_check.interval) == (5, 10)
    assert spec.source_ranges == ("0.0.0.0/0",)
    assert spec.idle_timeout == 60
    assert spec.cross_zone is False
    assert spec.internal is False


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ("", ("SSL", "TCP")),
        ("http", ("HTTPS", "HTTP")),
        ("https", ("HTTPS", "HTTPS")),
        ("ssl", ("SSL", "SSL")),
        ("tcp", ("SSL", "TCP")),
    ],
)
def test_listener_mapping_with_cert(backend: str, expected: tuple[str, str]) -> None:
    ann = {A.A_SSL_CERT: "arn:aws:acm:cert"}
    if backend:
        ann[A.A_BACKEND_PROTOCOL] = backend
    (listener,) = parse_service(svc(ann)).listeners
    assert (listener.protocol, listener.instance_protocol) == expected
    assert listener.ssl_certificate_id == "arn:aws:acm:cert"


def test_ssl_ports_by_number_and_name() -> None:
    ports = (
        ServicePort(port=80, node_port=30080, name="http"),
        ServicePort(port=443, node_port=30443, name="HTTPS"),
        ServicePort(port=8443, node_port=30843, name="alt"),
    )
    spec = parse_service(svc({A.A_SSL_CERT: "arn:c", A.A_SSL_PORTS: "https, 8443"}, ports=ports))
    assert [(x.load_balancer_port, x.protocol) for x in spec.listeners] == [
        (80, "TCP"),
        (443, "SSL"),
        (8443, "SSL"),
    ]


def test_backend_http_without_cert() -> None:
    (listener,) = parse_service(svc({A.A_BACKEND_PROTOCOL: "http"})).listeners
    assert (listener.protocol, listener.instance_protocol) == ("HTTP", "HTTP")


def test_health_check_local_traffic_policy_and_overrides() -> None:
    local = svc(external_traffic_policy="Local", health_check_node_port=32000)
    assert parse_service(local).health_check.target == "HTTP:32000/healthz"
    tp = svc(
        {A.A_HC_PORT: "traffic-port"}, external_traffic_policy="Local", health_check_node_port=32000
    )
    assert parse_service(tp).health_check.target == "HTTP:30080/healthz"
    over = svc(
        {
            A.A_HC_PROTOCOL: "http",
            A.A_HC_PATH: "/ready",
            A.A_HC_PORT: "8080",
            A.A_HC_INTERVAL: "30",
            A.A_HC_TIMEOUT: "3",
            A.A_HC_HEALTHY: "3",
            A.A_HC_UNHEALTHY: "4",
        }
    )
    hc = parse_service(over).health_check
    assert (hc.target, hc.interval, hc.timeout, hc.healthy_threshold, hc.unhealthy_threshold) == (
        "HTTP:8080/ready",
        30,
        3,
        3,
        4,
    )
    ssl = svc({A.A_BACKEND_PROTOCOL: "ssl"})
    assert parse_service(ssl).health_check.target == "SSL:30080"
    assert parse_service(svc(), shared_probe=(10256, "/healthz")).health_check.target == (
        "HTTP:10256/healthz"
    )


def test_source_ranges_spec_wins_over_annotation() -> None:
    s = svc({A.A_SOURCE_RANGES: "10.0.0.0/8"}, load_balancer_source_ranges=("1.2.3.4/32",))
    assert parse_service(s).source_ranges == ("1.2.3.4/32",)
    assert parse_service(
        svc({A.A_SOURCE_RANGES: " 10.0.0.0/8 , 192.168.1.7/24"})
    ).source_ranges == ("10.0.0.0/8", "192.168.1.0/24")


def test_lists_and_key_values() -> None:
    spec = parse_service(
        svc(
            {
                A.A_SECURITY_GROUPS: " sg-1, ,sg-2,sg-1",
                A.A_EXTRA_SECURITY_GROUPS: "sg-9",
                A.A_ADDITIONAL_TAGS: "Team=web, env=, flag ,x=a=b",
                A.A_TARGET_NODE_LABELS: "role=web",
                A.A_INTERNAL: "0.0.0.0/0",
                A.A_PROXY_PROTOCOL: "*",
                A.A_DRAINING_ENABLED: "true",
                A.A_DRAINING_TIMEOUT: "30",
                A.A_IDLE_TIMEOUT: "120",
                A.A_CROSS_ZONE: "True",
                A.A_SUBNETS: "subnet-1,public-a",
            }
        )
    )
    assert spec.security_groups == ("sg-1", "sg-2")
    assert spec.extra_security_groups == ("sg-9",)
    assert spec.annotated_security_groups == {"sg-1", "sg-2", "sg-9"}
    assert spec.additional_tags == (("Team", "web"), ("env", ""), ("flag", ""), ("x", "a"))
    assert spec.target_node_labels == (("role", "web"),)
    assert spec.internal
    assert spec.proxy_protocol
    assert spec.connection_draining_enabled
    assert (spec.connection_draining_timeout, spec.idle_timeout, spec.cross_zone) == (30, 120, True)
    assert spec.subnets == ("subnet-1", "public-a")
    assert not parse_service(svc({A.A_INTERNAL: "false"})).internal


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (A.A_BACKEND_PROTOCOL, "udp"),
        (A.A_PROXY_PROTOCOL, "true"),
        (A.A_CROSS_ZONE, "yes please"),
        (A.A_IDLE_TIMEOUT, "0"),
        (A.A_IDLE_TIMEOUT, "sixty"),
        (A.A_DRAINING_TIMEOUT, "3601"),
        (A.A_HC_INTERVAL, "4"),
        (A.A_HC_PROTOCOL, "UDP"),
        (A.A_HC_PORT, "http"),
        (A.A_SECURITY_GROUPS, "default"),
        (A.A_EXTRA_SECURITY_GROUPS, "sg-1,nodes"),
        (A.A_ADDITIONAL_TAGS, "=v"),
        (A.A_ADDITIONAL_TAGS, "aws:owner=me"),
        (A.A_ACCESS_LOG_EMIT_INTERVAL, "10"),
        (A.A_ACCESS_LOG_ENABLED, "true"),
        (A.A_SOURCE_RANGES, "10.0.0.0/33"),
        (A.A_SOURCE_RANGES, "10.0.0.1"),
        (A.A_TYPE, "alb"),
    ],
)
def test_malformed_annotation_names_field_and_value(key: str, value: str) -> None:
    with pytest.raises(InvalidServiceConfig) as err:
        parse_service(svc({key: value}))
    assert err.value.field == key
    assert err.value.value == value


def test_spec_errors() -> None:
    with pytest.raises(InvalidServiceConfig) as err:
        parse_service(svc(ports=()))
    assert err.value.field == "spec.ports"
    with pytest.raises(InvalidServiceConfig) as err:
        parse_service(svc(ports=(ServicePort(port=53, protocol="UDP", node_port=30053),)))
    assert err.value.field == "spec.ports.protocol"
    with pytest.raises(InvalidServiceConfig) as err:
        parse_service(svc(load_balancer_source_ranges=("nope",)))
    assert err.value.field == "spec.loadBalancerSourceRanges"


@pytest.mark.parametrize("value", ["nlb", "nlb-ip", "external"])
def test_other_types_are_implemented_elsewhere(value: str) -> None:
    with pytest.raises(ImplementedElsewhere):
        parse_service(svc({A.A_TYPE: value}))


def test_type_cannot_change_from_existing_classic_elb() -> None:
    s = svc({A.A_TYPE: "nlb"}, status_ingress=({"hostname": "a-1.us-east-1.elb.amazonaws.com"},))
    with pytest.raises(InvalidServiceConfig) as err:
        parse_service(s)
    assert err.value.field == A.A_TYPE


ALL_KEYS = [v for k, v in vars(A).items() if k.startswith("A_")]
_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "*",
            "true",
            "false",
            "0",
            "-1",
            "5",
            "60",
            "99999",
            "sg-1,sg-2",
            "k=v,k2",
            "=",
            ",",
            "traffic-port",
            "HTTP",
            "10.0.0.0/8",
            "nlb",
            " ",
        ]
    ),
)
_ports = st.lists(
    st.builds(
        ServicePort,
        port=st.integers(min_value=-5, max_value=70000),
        protocol=st.sampled_from(["TCP", "UDP", "tcp", "SCTP"]),
        node_port=st.integers(min_value=0, max_value=32767),
        name=st.text(max_size=8),
    ),
    max_size=4,
).map(tuple)


@settings(max_examples=100, deadline=None)
@given(
    ann=st.dictionaries(st.sampled_from(ALL_KEYS), _values, max_size=8),
    ports=_ports,
    ranges=st.lists(st.text(max_size=20), max_size=3).map(tuple),
    etp=st.sampled_from(["Cluster", "Local"]),
    hcnp=st.integers(min_value=0, max_value=40000),
    affinity=st.sampled_from(["None", "ClientIP", ""]),
    lb_ip=st.sampled_from(["", "203.0.113.7"]),
    host=st.sampled_from(
        [None, "", "a-1.us-east-1.elb.amazonaws.com", "a-1.elb.us-east-1.amazonaws.com", "x.y"]
    ),
)
def test_parse_never_raises_anything_else(
    ann: dict[str, str],
    ports: tuple[ServicePort, ...],
    ranges: tuple[str, ...],
    etp: str,
    hcnp: int,
    affinity: str,
    lb_ip: str,
    host: str | None,
) -> None:
    s = svc(
        ann,
        ports=ports,
        load_balancer_source_ranges=ranges,
        external_traffic_policy=etp,
        health_check_node_port=hcnp,
        session_affinity=affinity,
        load_balancer_ip=lb_ip,
        status_ingress=() if host is None else ({"hostname": host},),
    )
    error: Exception | None = None
    try:
        spec = parse_service(s, ensuring=True)
    except (InvalidServiceConfig, ImplementedElsewhere) as exc:
        error = exc
    if isinstance(error, InvalidServiceConfig):
        assert error.field in ALL_KEYS or error.field.startswith("spec.")
    elif isinstance(error, ImplementedElsewhere):
        assert A.A_TYPE in ann
    else:
        assert spec.listeners
        assert all(1 <= x.load_balancer_port <= 65535 for x in spec.listeners)
        assert spec.health_check.timeout < spec.health_check.interval
        # what upstream's EnsureLoadBalancer refuses never gets this far
        assert affinity in ("None", "")
        assert not lb_ip
        assert host is None or not host.endswith(".elb.us-east-1.amazonaws.com")


NLB_KEYS = [*ALL_KEYS, A_EIP_ALLOCATIONS]


@settings(max_examples=100, deadline=None)
@given(
    ann=st.dictionaries(st.sampled_from(NLB_KEYS), _values, max_size=8),
    ports=_ports,
    ranges=st.lists(st.text(max_size=20), max_size=3).map(tuple),
    etp=st.sampled_from(["Cluster", "Local"]),
    hcnp=st.integers(min_value=0, max_value=40000),
    shared=st.sampled_from([None, (10256, "/healthz")]),
)
def test_parse_nlb_never_raises_anything_else(
    ann: dict[str, str],
    ports: tuple[ServicePort, ...],
    ranges: tuple[str, ...],
    etp: str,
    hcnp: int,
    shared: tuple[int, str] | None,
) -> None:
    """Whatever the annotations, the NLB validation answers with a spec AWS can take or an
    :class:`InvalidServiceConfig` naming an annotation or spec field (so invalid input never
    reaches AWS)."""
    s = svc(
        {**ann, A.A_TYPE: "nlb"},
        ports=ports,
        load_balancer_source_ranges=ranges,
        external_traffic_policy=etp,
        health_check_node_port=hcnp,
    )
    error: InvalidServiceConfig | None = None
    try:
        spec = parse_nlb_service(s, shared_probe=shared, ensuring=True)
    except InvalidServiceConfig as exc:
        error = exc
    if error is not None:
        assert error.field in NLB_KEYS or error.field.startswith("spec.")
        return
    assert spec.mappings
    for m in spec.mappings:
        assert 1 <= m.frontend_port <= 65535
        assert m.frontend_protocol in ("TCP", "UDP", "TLS")
        assert m.traffic_protocol in ("TCP", "UDP", "TLS")
        hc = m.health_check
        assert hc.protocol in ("TCP", "HTTP", "HTTPS")
        assert hc.port == "traffic-port" or 1 <= int(hc.port) <= 65535
        assert 5 <= hc.interval <= 300
        assert 2 <= hc.healthy_threshold <= 10
        assert 2 <= hc.unhealthy_threshold <= 10
        assert (hc.path == "") == (hc.protocol == "TCP")
        name = target_group_name("lab", s.namespace, s.name, m)
        assert re.fullmatch(r"k8s-[A-Za-z0-9]{0,8}-[A-Za-z0-9]{0,8}-[0-9a-f]{10}", name)
        assert len(name) <= 32
    assert A.A_EXTRA_SECURITY_GROUPS not in ann
    assert all(v in ("true", "false") for _, v in spec.target_group_attributes)
    assert len({m.frontend_protocol in ("TCP", "TLS") for m in spec.mappings}) == 1
