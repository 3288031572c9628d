"""Upstream's NLB tables (``nlb_tables``) run against ours: target-group names, the NLB health
check and the target-group-attributes validation. All cases pass; none is a deviation."""

from __future__ import annotations

import pytest

from controller.aws.annotations import A_TARGET_GROUP_ATTRIBUTES, A_TYPE
from controller.aws.nlbspec import (
    NLBHealthCheck,
    PortMapping,
    build_health_check,
    target_group_attributes,
    target_group_name,
)
from controller.cloud import InvalidServiceConfig, Service, ServicePort
from tests.controller.upstream.nlb_tables import (
    BUILD_TARGET_GROUP_NAME,
    NLB_HEALTH_CHECK,
    TARGET_GROUP_ATTRIBUTES,
)


@pytest.mark.parametrize("row", [r[1:] for r in BUILD_TARGET_GROUP_NAME],
                         ids=[r[0] for r in BUILD_TARGET_GROUP_NAME])  # fmt: skip
def test_build_target_group_name(
    row: tuple[str, str, str, int, int, str, str, str, int, str],
) -> None:
    """TestBuildTargetGroupName."""
    cluster, namespace, name, port, node_port, proto, target_type, hc_proto, hc_interval, want = row
    mapping = PortMapping(
        frontend_port=port,
        frontend_protocol=proto,
        traffic_port=node_port,
        traffic_protocol=proto,
        health_check=NLBHealthCheck(protocol=hc_proto, interval=hc_interval),
    )
    assert target_group_name(cluster, namespace, name, mapping, target_type) == want


@pytest.mark.parametrize("row", [r[1:] for r in NLB_HEALTH_CHECK],
                         ids=[r[0] for r in NLB_HEALTH_CHECK])  # fmt: skip
def test_build_nlb_health_check_configuration(row: tuple) -> None:  # type: ignore[type-arg]
    """TestCloud_buildNLBHealthCheckConfiguration (the Shared probe mode's port and path come
    from the cloud config, whose defaults are upstream's 10256 and /healthz)."""
    annotations, local, hc_node_port, shared, want = row
    service = Service(
        namespace="default",
        name="test-svc",
        uid="UID",
        annotations={A_TYPE: "nlb", **annotations},
        ports=(ServicePort(port=8080, node_port=32205, name="http", target_port=8880),),
        external_traffic_policy="Local" if local else "Cluster",
        health_check_node_port=hc_node_port,
    )
    if want is None:
        with pytest.raises(InvalidServiceConfig):
            build_health_check(service, shared_probe=shared)
        return
    hc = build_health_check(service, shared_probe=shared)
    got = (
        hc.protocol,
        hc.port,
        hc.path,
        hc.interval,
        hc.timeout,
        hc.healthy_threshold,
        hc.unhealthy_threshold,
    )
    assert got == want


@pytest.mark.parametrize(("raw", "protocols", "error"), [r[1:] for r in TARGET_GROUP_ATTRIBUTES],
                         ids=[r[0] for r in TARGET_GROUP_ATTRIBUTES])  # fmt: skip
def test_validate_target_group_attributes(
    raw: str | None, protocols: tuple[str, ...], error: str
) -> None:
    """TestValidateServiceAnnotationTargetGroupAttributes."""
    annotations = {A_TYPE: "nlb"}
    if raw is not None:
        annotations[A_TARGET_GROUP_ATTRIBUTES] = raw
    service = Service(
        namespace="default",
        name="svc",
        uid="UID",
        annotations=annotations,
        ports=tuple(
            ServicePort(port=80 + i, protocol=p, node_port=30080 + i)
            for i, p in enumerate(protocols)
        ),
    )
    if not error:
        target_group_attributes(service)
        return
    with pytest.raises(InvalidServiceConfig) as err:
        target_group_attributes(service)
    assert err.value.field == A_TARGET_GROUP_ATTRIBUTES
    assert error in err.value.reason
