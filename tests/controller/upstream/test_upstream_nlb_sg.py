"""Upstream's managed NLB security-group tables (``nlb_sg_tables``) run against ours, the
group cases against the lab's AWS endpoint. All ported cases pass; the one difference is when
a bad mode is refused (ours: loading the cloud config; upstream: ensuring an NLB), listed in
``controller/DEVIATIONS.md``."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.aws.annotations import A_TYPE
from controller.aws.config import CloudConfigError, load_cloud_config
from controller.aws.nlbspec import managed_security_group_name
from controller.cloud import LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.test_loadbalancer import nodes
from tests.controller.aws.topology import CLUSTER, Topology
from tests.controller.upstream.nlb_sg_tables import (
    ENSURE_LOAD_BALANCER_NLB,
    ENSURE_NLB_SECURITY_GROUP,
    ERROR_TEXT_DEVIATIONS,
    MANAGED,
    NLB_SECURITY_GROUP_MODE,
    SECURITY_GROUP_NAME_FOR_NLB,
)

_MANAGED_CONFIG = "NLBSecurityGroupMode = Managed\n"


@pytest.mark.parametrize(("value", "managed", "refused"), [r[1:] for r in NLB_SECURITY_GROUP_MODE],
                         ids=[r[0] for r in NLB_SECURITY_GROUP_MODE])  # fmt: skip
def test_is_nlb_security_group_mode_managed(value: str, managed: bool, refused: bool) -> None:
    """TestCloudConfig_IsNLBSecurityGroupModeManaged."""
    text = f'[Global]\nNLBSecurityGroupMode = "{value}"\n'
    if refused:
        with pytest.raises(CloudConfigError) as err:
            load_cloud_config(text)
        assert (err.value.key, err.value.value) == ("NLBSecurityGroupMode", value)
        # upstream's expectedError, compared as upstream compares it (err.Error() ==)
        assert (
            err.value.reason == f'invalid NLB security group mode: "{value}". Expected: "Managed"'
        )
        return
    cfg, warnings = load_cloud_config(text)
    assert warnings == []
    assert cfg.nlb_security_group_managed is managed


def _service(annotations: dict[str, str]) -> Service:
    return Service(
        namespace="test-namespace",
        name="test-service",
        uid="0b8a9b52-4b3c-4d7e-9f6a-1c2d3e4f5a6b",
        ports=(ServicePort(port=80, node_port=30080),),
        annotations={A_TYPE: "nlb", **annotations},
    )


def _assert_group_calls(aws: AwsServer, since: int, name: str, calls: str) -> None:
    """Upstream's mock expectations (``AssertExpectations``; an unexpected call fails its
    mock): ``describe`` is a DescribeSecurityGroups with two filters, the first
    ``group-name`` with the managed group's name; ``create`` a CreateSecurityGroup of that
    name; a case whose mock expects neither makes no such call at all."""
    events = [e for e in aws.trail.events() if e.seq > since]
    described = [e.raw_params for e in events if e.action == "DescribeSecurityGroups"]
    created = [e.raw_params for e in events if e.action == "CreateSecurityGroup"]
    if "describe" in calls:
        assert described
        for raw in described:
            assert "Filter.2.Name" in raw, raw
            assert "Filter.3.Name" not in raw, raw
            assert raw["Filter.1.Name"] == "group-name", raw
            assert [v for k, v in raw.items() if k.startswith("Filter.1.Value.")] == [name], raw
    else:
        assert described == []
    if "create" in calls:
        assert [raw["GroupName"] for raw in created] == [name]
    else:
        assert created == []


@pytest.mark.parametrize("row", ENSURE_NLB_SECURITY_GROUP,
                         ids=[r[0] for r in ENSURE_NLB_SECURITY_GROUP])  # fmt: skip
def test_ensure_nlb_security_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, row: tuple[Any, ...]
) -> None:
    """TestEnsureNLBSecurityGroup: the groups ``ensureNLBSecurityGroup`` picks for the NLB
    (upstream's ``assert.Equal``), its error (``assert.Contains``; an error returns no groups,
    upstream's ``assert.Nil``) and its mocks' expected EC2 calls."""
    case, annotations, managed, existing, pre_exists, fault, want, error, calls = row
    svc = _service(annotations)
    name = managed_security_group_name("kubernetes", svc)
    ec2 = aws.client("ec2")
    managed_id = ""
    if pre_exists:
        managed_id = ec2.create_security_group(
            GroupName=name,
            Description="managed",
            VpcId=topo.vpc,
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}],
                }
            ],
        )["GroupId"]
    if fault:
        aws.control.add_fault(
            action="CreateSecurityGroup", code="UnauthorizedOperation", status=403
        )
    nlb = make_cloud(extra=_MANAGED_CONFIG if managed else "").load_balancer().nlb
    lb: Any = None
    if existing is not None:
        lb = {"SecurityGroups": [managed_id if g == MANAGED else g for g in existing]}
    spec = nlb._spec(svc)
    mark = aws.trail.last_seq
    if error:
        with pytest.raises(ClientError) as err:
            nlb._security_groups("kubernetes", svc, spec, lb)
        if case in ERROR_TEXT_DEVIATIONS:
            # DEVIATIONS.md: ours reports AWS's error unwrapped; upstream's text is absent
            assert error not in str(err.value)
            assert ERROR_TEXT_DEVIATIONS[case] in str(err.value)
        else:
            assert error in str(err.value)
        _assert_group_calls(aws, mark, name, calls)
        assert (
            ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])[
                "SecurityGroups"
            ]
            == []
        )
        return
    groups, is_managed = nlb._security_groups("kubernetes", svc, spec, lb)
    _assert_group_calls(aws, mark, name, calls)
    found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])[
        "SecurityGroups"
    ]
    if MANAGED in want:
        [group] = found
        assert groups == [group["GroupId"] if g == MANAGED else g for g in want]
        assert is_managed
        if managed_id:
            assert group["GroupId"] == managed_id  # found by name, not created again
    else:
        assert groups == want
        assert not is_managed
        assert found == []  # no group made


@pytest.mark.parametrize(("managed", "count"), [r[1:] for r in ENSURE_LOAD_BALANCER_NLB],
                         ids=[r[0] for r in ENSURE_LOAD_BALANCER_NLB])  # fmt: skip
def test_ensure_load_balancer_nlb(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, managed: bool, count: int
) -> None:
    """TestEnsureLoadBalancer, NLB rows: the status and the number of groups on the NLB."""
    lb = make_cloud(extra=_MANAGED_CONFIG if managed else "").load_balancer()
    svc = _service({})
    status = lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    [nlb] = aws.client("elbv2").describe_load_balancers()["LoadBalancers"]
    # upstream's assert.Equal of the whole status: one ingress, its hostname the DNS name
    assert status == LoadBalancerStatus(ingress=(LoadBalancerIngress(hostname=nlb["DNSName"]),))
    assert len(nlb.get("SecurityGroups", [])) == count


@pytest.mark.parametrize(("cluster", "namespace", "name", "uid", "want"),
                         [r[1:] for r in SECURITY_GROUP_NAME_FOR_NLB],
                         ids=[r[0] for r in SECURITY_GROUP_NAME_FOR_NLB])  # fmt: skip
def test_security_group_name_for_nlb(
    cluster: str, namespace: str, name: str, uid: str, want: str
) -> None:
    """GetSecurityGroupNameForNLB (the name in TestEnsureNLBSecurityGroup's fixture)."""
    svc = Service(namespace=namespace, name=name, uid=uid, ports=(), annotations={})
    assert managed_security_group_name(cluster, svc) == want
