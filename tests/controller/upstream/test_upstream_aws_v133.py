"""Upstream's v1.33.0 ``aws_test.go`` tables (``aws_v133_tables``) against ours: the port
protocol checks through each load-balancer kind's validation (upstream's ``checkProtocol``
and ``checkMixedProtocol`` run in ``EnsureLoadBalancer`` before any AWS call, ours in
``parse_service`` / ``parse_nlb_service``), and ``NodeIPFamilies`` as the cloud config reads
it. All cases pass; none is a deviation."""

from __future__ import annotations

import pytest

from controller.aws.annotations import A_TYPE, parse_service
from controller.aws.config import load_cloud_config
from controller.aws.nlbspec import parse_nlb_service
from controller.cloud import InvalidServiceConfig, Service, ServicePort
from tests.controller.upstream.aws_v133_tables import (
    CHECK_MIXED_PROTOCOL,
    CHECK_PROTOCOL,
    NODE_IP_FAMILIES,
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
