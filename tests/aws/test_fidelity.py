"""Fidelity layer: each AWS behaviour stock moto lacks, shown off (moto) and on (the lab).

Every test flips ``enabled`` (or the behaviour's own switch) so it demonstrates both the gap in
moto 5.2.5 and the restored AWS behaviour; see ``lab/aws/fidelity.py`` for the list.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from lab.aws import AwsServer
from tests.aws import builders as b
from tests.aws.conftest import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_elb.type_defs import InstanceTypeDef


def _dependent(aws: AwsServer, kind: str) -> str:
    """A group that ``kind`` depends on."""
    ec2, elb, elbv2 = aws.client("ec2"), aws.client("elb"), aws.client("elbv2")
    sg = b.group(ec2, "target")
    if kind == "ingress-rule":
        b.allow_all_from(ec2, b.group(ec2, "other"), sg)
    elif kind == "egress-rule":
        b.allow_all_from(ec2, b.group(ec2, "other"), sg, egress=True)
    elif kind == "instance":
        b.instance(ec2, sg)
    elif kind == "eni":
        ec2.create_network_interface(SubnetId=b.first_subnet(ec2), Groups=[sg])
    elif kind == "classic-elb":
        b.classic_elb(elb, ec2, "lb", [sg])
    elif kind == "elbv2":
        elbv2.create_load_balancer(
            Name="nlb", Subnets=[b.first_subnet(ec2)], Type="network", SecurityGroups=[sg]
        )
    return sg


KINDS = ["ingress-rule", "egress-rule", "instance", "eni", "classic-elb", "elbv2"]


@pytest.mark.parametrize("kind", KINDS)
def test_delete_security_group_in_use_fails_with_dependency_violation(
    aws: AwsServer, kind: str
) -> None:
    sg = _dependent(aws, kind)
    with pytest.raises(ClientError) as err:
        aws.client("ec2").delete_security_group(GroupId=sg)
    error = err.value.response
    assert error["Error"]["Code"] == "DependencyViolation"
    assert error["Error"]["Message"] == f"resource {sg} has a dependent object"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    [event] = aws.trail.calls("DeleteSecurityGroup")
    assert event.error_code == "DependencyViolation"
    assert event.answered_by.startswith("fidelity:sg_dependency:")
    assert aws.client("ec2").describe_security_groups(GroupIds=[sg])["SecurityGroups"]


@pytest.mark.parametrize("kind", KINDS)
def test_stock_moto_deletes_a_group_in_use(aws: AwsServer, kind: str) -> None:
    aws.control.set_fidelity(enabled=False)
    sg = _dependent(aws, kind)
    aws.client("ec2").delete_security_group(GroupId=sg)  # moto: no check at all
    assert aws.trail.calls("DeleteSecurityGroup")[0].status == 200


def test_group_of_a_terminated_instance_can_be_deleted(
    aws: AwsServer, fake_clock: FakeClock
) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(instance_shutting_down_s=5)
    sg = b.group(ec2, "nodes")
    iid = b.instance(ec2, sg)
    ec2.terminate_instances(InstanceIds=[iid])
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupId=sg)  # still shutting down
    fake_clock.advance(5)
    ec2.delete_security_group(GroupId=sg)
    reasons = [e.answered_by for e in aws.trail.calls("DeleteSecurityGroup")]
    assert reasons == [f"fidelity:sg_dependency:instance:{iid}", "moto"]


def test_dependency_violation_switch_alone_restores_moto(aws: AwsServer) -> None:
    aws.control.set_fidelity(sg_dependency_violation=False)
    sg = _dependent(aws, "ingress-rule")
    aws.client("ec2").delete_security_group(GroupId=sg)


def test_group_deletes_once_the_reference_is_revoked(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg, other = b.group(ec2, "elb-sg"), b.group(ec2, "nodes")
    b.allow_all_from(ec2, other, sg)
    b.allow_all_from(ec2, sg, sg)  # a self-reference never blocks deletion
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupId=sg)
    ec2.revoke_security_group_ingress(
        GroupId=other, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}]
    )
    ec2.delete_security_group(GroupId=sg)
    assert [e.status for e in aws.trail.calls("DeleteSecurityGroup")] == [400, 200]


def test_delete_by_group_name_is_checked_too(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    sg = b.group(ec2, "named")
    b.instance(ec2, sg)
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupName="named")


def test_default_group_cannot_be_deleted(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    default = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["default"]}])[
        "SecurityGroups"
    ][0]["GroupId"]
    with pytest.raises(ClientError) as err:
        ec2.delete_security_group(GroupId=default)
    assert err.value.response["Error"]["Code"] == "CannotDelete"
    aws.control.set_fidelity(enabled=False)
    ec2.delete_security_group(GroupId=default)  # stock moto lets it go


def test_deleted_load_balancer_keeps_its_groups_busy_for_a_while(
    aws: AwsServer, fake_clock: FakeClock
) -> None:
    ec2, elb = aws.client("ec2"), aws.client("elb")
    sg = b.group(ec2, "elb-sg")
    b.classic_elb(elb, ec2, "lb", [sg])
    aws.control.set_fidelity(elb_sg_release_s=30)
    elb.delete_load_balancer(LoadBalancerName="lb")
    fake_clock.advance(29)
    with pytest.raises(ClientError, match="DependencyViolation"):
        ec2.delete_security_group(GroupId=sg)
    fake_clock.advance(1)
    ec2.delete_security_group(GroupId=sg)
    outcomes = [(e.error_code, e.answered_by) for e in aws.trail.calls("DeleteSecurityGroup")]
    assert outcomes == [
        ("DependencyViolation", "fidelity:sg_dependency:deleted-lb:lb"),
        (None, "moto"),
    ]


def test_deleted_load_balancer_frees_its_groups_at_once_by_default(aws: AwsServer) -> None:
    ec2, elb = aws.client("ec2"), aws.client("elb")
    sg = b.group(ec2, "elb-sg")
    b.classic_elb(elb, ec2, "lb", [sg])
    elb.delete_load_balancer(LoadBalancerName="lb")
    ec2.delete_security_group(GroupId=sg)


# --- order of a Classic ELB's security groups (kubernetes#84926) ----------------------------


def _elb_groups(aws: AwsServer) -> list[str]:
    return aws.client("elb").describe_load_balancers(LoadBalancerNames=["lb"])[
        "LoadBalancerDescriptions"
    ][0]["SecurityGroups"]


@pytest.fixture
def three_group_elb(aws: AwsServer) -> list[str]:
    ec2 = aws.client("ec2")
    groups = [b.group(ec2, name) for name in ("k8s-elb-x", "nodes", "extra")]
    b.classic_elb(aws.client("elb"), ec2, "lb", groups)
    return groups


def test_elb_groups_come_in_creation_order_by_default(
    aws: AwsServer, three_group_elb: list[str]
) -> None:
    assert _elb_groups(aws) == three_group_elb
    reordered = [three_group_elb[2], three_group_elb[0]]
    aws.client("elb").apply_security_groups_to_load_balancer(
        LoadBalancerName="lb", SecurityGroups=reordered
    )
    assert _elb_groups(aws) == reordered


def test_elb_groups_reversed(aws: AwsServer, three_group_elb: list[str]) -> None:
    aws.control.set_fidelity(elb_sg_order="reversed")
    assert _elb_groups(aws) == three_group_elb[::-1]
    assert _elb_groups(aws) == three_group_elb[::-1]
    aws.control.set_fidelity(enabled=False)  # stock moto: stored (creation) order
    assert _elb_groups(aws) == three_group_elb


def test_elb_groups_shuffle_is_seeded(aws: AwsServer, three_group_elb: list[str]) -> None:
    def draws() -> list[list[str]]:
        aws.control.set_fidelity(elb_sg_order="shuffle", elb_sg_order_seed=11)
        return [_elb_groups(aws) for _ in range(12)]

    first = draws()
    assert first == draws()  # same seed, same sequence
    assert all(sorted(d) == sorted(three_group_elb) for d in first)
    assert len({tuple(d) for d in first}) > 1  # the order really varies between calls
    aws.control.set_fidelity(elb_sg_order_seed=12)
    assert [_elb_groups(aws) for _ in range(12)] != first


# --- instance state transitions --------------------------------------------------------------


def test_instance_transitions_are_instant_by_default(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    iid = b.instance(ec2)
    assert b.instance_state(ec2, iid) == "running"
    ec2.stop_instances(InstanceIds=[iid])
    assert b.instance_state(ec2, iid) == "stopped"
    ec2.terminate_instances(InstanceIds=[iid])
    assert b.instance_state(ec2, iid) == "terminated"


def test_instance_transitions_take_the_configured_time(
    aws: AwsServer, fake_clock: FakeClock
) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(
        instance_pending_s=10, instance_stopping_s=20, instance_shutting_down_s=30
    )
    iid = b.instance(ec2)
    assert b.instance_state(ec2, iid) == "pending"
    running = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
    )["Reservations"]
    assert running == []
    fake_clock.advance(9.9)
    assert b.instance_state(ec2, iid) == "pending"
    fake_clock.advance(0.1)
    assert b.instance_state(ec2, iid) == "running"
    ec2.stop_instances(InstanceIds=[iid])
    fake_clock.advance(19)
    assert b.instance_state(ec2, iid) == "stopping"
    fake_clock.advance(1)
    assert b.instance_state(ec2, iid) == "stopped"
    ec2.start_instances(InstanceIds=[iid])
    assert b.instance_state(ec2, iid) == "pending"
    fake_clock.advance(10)
    assert b.instance_state(ec2, iid) == "running"
    ec2.terminate_instances(InstanceIds=[iid])
    fake_clock.advance(29)
    assert b.instance_state(ec2, iid) == "shutting-down"
    fake_clock.advance(1)
    assert b.instance_state(ec2, iid) == "terminated"


def test_a_new_call_replaces_a_pending_transition(aws: AwsServer, fake_clock: FakeClock) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(instance_stopping_s=20, instance_pending_s=5)
    iid = b.instance(ec2)
    fake_clock.advance(5)
    ec2.stop_instances(InstanceIds=[iid])
    fake_clock.advance(1)
    ec2.start_instances(InstanceIds=[iid])  # before the stop completed
    fake_clock.advance(30)
    assert b.instance_state(ec2, iid) == "running"  # the stale "stopped" never lands


def test_new_instances_are_invisible_for_the_describe_lag(
    aws: AwsServer, fake_clock: FakeClock
) -> None:
    ec2 = aws.client("ec2")
    old = b.instance(ec2)
    aws.control.set_fidelity(instance_describe_lag_s=5)
    new = b.instance(ec2)

    def listed() -> list[str]:
        return [
            i["InstanceId"]
            for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"]
        ]

    assert listed() == [old]  # no empty reservation either
    with pytest.raises(ClientError) as err:
        ec2.describe_instances(InstanceIds=[new])
    assert err.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    statuses = ec2.describe_instance_status(IncludeAllInstances=True)["InstanceStatuses"]
    assert [s["InstanceId"] for s in statuses] == [old]
    ec2.create_tags(Resources=[new], Tags=[{"Key": "k", "Value": "v"}])  # other calls see it
    fake_clock.advance(5)
    assert listed() == [old, new]
    assert b.instance_state(ec2, new) == "running"
    aws.control.set_fidelity(enabled=False)
    assert listed() == [old, new]  # stock moto: visible at once
    newest = b.instance(ec2)
    assert b.instance_state(ec2, newest) == "running"


def test_stock_moto_ignores_transition_delays(aws: AwsServer) -> None:
    aws.control.set_fidelity(enabled=False, instance_pending_s=5.0)
    ec2 = aws.client("ec2")
    assert b.instance_state(ec2, b.instance(ec2)) == "running"


def test_terminated_instances_disappear_after_their_visibility(
    aws: AwsServer, fake_clock: FakeClock
) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(terminated_visible_s=3600)
    gone, kept = b.instance(ec2), b.instance(ec2)
    ec2.terminate_instances(InstanceIds=[gone])
    fake_clock.advance(3599)
    assert b.instance_state(ec2, gone) == "terminated"
    fake_clock.advance(1)
    with pytest.raises(ClientError) as err:
        b.instance_state(ec2, gone)
    assert err.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    listed = [
        i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
    ]
    assert listed == [kept]


def test_stock_moto_keeps_terminated_instances(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    aws.control.set_fidelity(enabled=False, terminated_visible_s=0.0)
    iid = b.instance(ec2)
    ec2.terminate_instances(InstanceIds=[iid])
    aws.control.health()  # a tick
    assert b.instance_state(ec2, iid) == "terminated"


# --- Classic ELB defaults --------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, False])
def test_new_elb_has_the_aws_default_health_check(aws: AwsServer, enabled: bool) -> None:
    aws.control.set_fidelity(enabled=enabled)
    ec2, elb = aws.client("ec2"), aws.client("elb")
    dns = b.classic_elb(elb, ec2, "lb", [b.group(ec2, "g")])
    assert dns.endswith(".elb.amazonaws.com")  # right in moto already
    description = elb.describe_load_balancers()["LoadBalancerDescriptions"][0]
    attrs = elb.describe_load_balancer_attributes(LoadBalancerName="lb")
    draining = attrs["LoadBalancerAttributes"]["ConnectionDraining"]
    if enabled:
        assert description["HealthCheck"] == {
            "Target": "TCP:30080",
            "Interval": 30,
            "Timeout": 5,
            "UnhealthyThreshold": 2,
            "HealthyThreshold": 10,
        }
        assert draining == {"Enabled": False, "Timeout": 300}
    else:
        assert "HealthCheck" not in description
        assert draining == {"Enabled": False}


@pytest.mark.parametrize("enabled", [True, False])
def test_modify_attributes_keeps_one_desync_entry(aws: AwsServer, enabled: bool) -> None:
    aws.control.set_fidelity(enabled=enabled)
    ec2, elb = aws.client("ec2"), aws.client("elb")
    b.classic_elb(elb, ec2, "lb", [b.group(ec2, "g")])
    for _ in range(3):
        elb.modify_load_balancer_attributes(
            LoadBalancerName="lb",
            LoadBalancerAttributes={"ConnectionSettings": {"IdleTimeout": 120}},
        )
    attrs = elb.describe_load_balancer_attributes(LoadBalancerName="lb")["LoadBalancerAttributes"]
    assert attrs["ConnectionSettings"] == {"IdleTimeout": 120}
    assert len(attrs["AdditionalAttributes"]) == (1 if enabled else 3)


@pytest.mark.parametrize("enabled", [True, False])
def test_register_instances_returns_the_registered_set(aws: AwsServer, enabled: bool) -> None:
    aws.control.set_fidelity(enabled=enabled)
    ec2, elb = aws.client("ec2"), aws.client("elb")
    b.classic_elb(elb, ec2, "lb", [b.group(ec2, "g")])
    one, two = b.instance(ec2), b.instance(ec2)
    first = elb.register_instances_with_load_balancer(
        LoadBalancerName="lb", Instances=[{"InstanceId": one}]
    )["Instances"]
    again = elb.register_instances_with_load_balancer(
        LoadBalancerName="lb", Instances=[{"InstanceId": one}, {"InstanceId": two}]
    )["Instances"]
    left = elb.deregister_instances_from_load_balancer(
        LoadBalancerName="lb", Instances=[{"InstanceId": one}]
    )["Instances"]
    listed = elb.describe_load_balancers()["LoadBalancerDescriptions"][0]["Instances"]
    if enabled:
        assert first == [{"InstanceId": one}]
        assert again == [{"InstanceId": one}, {"InstanceId": two}]
        assert left == [{"InstanceId": two}]
        assert listed == [{"InstanceId": two}]
    else:
        assert first == again == left == []  # moto: the result is always empty


@pytest.mark.parametrize("enabled", [True, False])
def test_registering_an_unknown_instance_is_refused(aws: AwsServer, enabled: bool) -> None:
    aws.control.set_fidelity(enabled=enabled)
    ec2, elb = aws.client("ec2"), aws.client("elb")
    b.classic_elb(elb, ec2, "lb", [b.group(ec2, "g")])
    real, ghost = b.instance(ec2), "i-0123456789abcdef0"
    instances: list[InstanceTypeDef] = [{"InstanceId": real}, {"InstanceId": ghost}]
    if enabled:
        with pytest.raises(ClientError) as err:
            elb.register_instances_with_load_balancer(LoadBalancerName="lb", Instances=instances)
        assert err.value.response["Error"]["Code"] == "InvalidInstance"
        assert ghost in err.value.response["Error"]["Message"]
        assert real not in err.value.response["Error"]["Message"]
    else:
        elb.register_instances_with_load_balancer(LoadBalancerName="lb", Instances=instances)


# -- ELBv2 (gap 13): what the NLB path of the controller hits --------------------------------


def _nlb(aws: AwsServer) -> tuple[str, str]:
    """A network load balancer and an instance target group in the default VPC."""
    ec2, elbv2 = aws.client("ec2"), aws.client("elbv2")
    lb = elbv2.create_load_balancer(Name="nlb", Subnets=[b.first_subnet(ec2)], Type="network")
    tg = elbv2.create_target_group(
        Name="tg", Protocol="TCP", Port=30080, VpcId=b.default_vpc(ec2), TargetType="instance"
    )
    return lb["LoadBalancers"][0]["LoadBalancerArn"], tg["TargetGroups"][0]["TargetGroupArn"]


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_tcp_listener_has_no_ssl_policy(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb, tg = _nlb(aws)
    created = elbv2.create_listener(
        LoadBalancerArn=lb,
        Port=80,
        Protocol="TCP",
        DefaultActions=[{"Type": "forward", "TargetGroupArn": tg}],
    )["Listeners"][0]
    [described] = elbv2.describe_listeners(LoadBalancerArn=lb)["Listeners"]
    if fixed:  # AWS: a policy only on TLS / HTTPS listeners
        assert "SslPolicy" not in created
        assert "SslPolicy" not in described
    else:  # stock moto: its default policy on every listener
        assert created["SslPolicy"] == described["SslPolicy"] == "ELBSecurityPolicy-2016-08"


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_new_nlb_reports_access_logs_disabled(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    lb, _ = _nlb(aws)
    attrs = aws.client("elbv2").describe_load_balancer_attributes(LoadBalancerArn=lb)
    found = {a["Key"]: a["Value"] for a in attrs["Attributes"]}
    if fixed:
        assert found["access_logs.s3.enabled"] == "false"
    else:
        assert "access_logs.s3.enabled" not in found


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_register_targets_refuses_unknown_instances(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    _, tg = _nlb(aws)
    known = b.instance(aws.client("ec2"))
    targets: Any = [{"Id": known, "Port": 30080}, {"Id": "i-0123456789abcdef0", "Port": 30080}]
    if not fixed:  # stock moto registers an instance that does not exist
        elbv2.register_targets(TargetGroupArn=tg, Targets=targets)
        assert len(elbv2.describe_target_health(TargetGroupArn=tg)["TargetHealthDescriptions"]) == 2
        return
    with pytest.raises(ClientError) as err:
        elbv2.register_targets(TargetGroupArn=tg, Targets=targets)
    assert err.value.response["Error"]["Code"] == "InvalidTarget"
    assert "'i-0123456789abcdef0'" in err.value.response["Error"]["Message"]
    assert elbv2.describe_target_health(TargetGroupArn=tg)["TargetHealthDescriptions"] == []


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_nlb_dns_name_has_the_nlb_form(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    elbv2 = aws.client("elbv2")
    lb, _ = _nlb(aws)
    [described] = elbv2.describe_load_balancers(LoadBalancerArns=[lb])["LoadBalancers"]
    created = aws.trail.calls("CreateLoadBalancer")[0]
    assert created.error_code in (None, "")
    if fixed:  # AWS: <name>-<hex>.elb.<region>.amazonaws.com
        assert re.fullmatch(
            r"nlb-[0-9a-f]{16}\.elb\.us-east-1\.amazonaws\.com", described["DNSName"]
        )
    else:  # stock moto: the Classic ELB form, which reads as a Classic ELB in a Service status
        assert described["DNSName"] == "nlb-1.us-east-1.elb.amazonaws.com"


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_tcp_target_group_reports_nlb_attributes(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    _, tg = _nlb(aws)
    attrs = aws.client("elbv2").describe_target_group_attributes(TargetGroupArn=tg)
    found = {a["Key"]: a["Value"] for a in attrs["Attributes"]}
    if fixed:  # AWS: both present on a TCP target group of instances
        assert found["proxy_protocol_v2.enabled"] == "false"
        assert found["preserve_client_ip.enabled"] == "true"
    else:
        assert "proxy_protocol_v2.enabled" not in found
        assert "preserve_client_ip.enabled" not in found


@pytest.mark.parametrize("fixed", [True, False])
def test_elbv2_nlb_created_without_groups_cannot_get_groups(aws: AwsServer, fixed: bool) -> None:
    aws.control.set_fidelity(elbv2_fixes=fixed)
    ec2, elbv2 = aws.client("ec2"), aws.client("elbv2")
    bare, _ = _nlb(aws)
    group = ec2.create_security_group(
        GroupName="nlb-sg", Description="nlb", VpcId=b.default_vpc(ec2)
    )["GroupId"]
    other = ec2.create_security_group(
        GroupName="nlb-sg-2", Description="nlb", VpcId=b.default_vpc(ec2)
    )["GroupId"]
    with_groups = elbv2.create_load_balancer(
        Name="nlb-sg", Subnets=[b.first_subnet(ec2)], Type="network", SecurityGroups=[group]
    )["LoadBalancers"][0]["LoadBalancerArn"]
    # an NLB created with groups may change them (both)
    elbv2.set_security_groups(LoadBalancerArn=with_groups, SecurityGroups=[other])
    [lb] = elbv2.describe_load_balancers(LoadBalancerArns=[with_groups])["LoadBalancers"]
    assert lb["SecurityGroups"] == [other]
    if not fixed:  # stock moto attaches groups to an NLB created without any
        elbv2.set_security_groups(LoadBalancerArn=bare, SecurityGroups=[group])
        [lb] = elbv2.describe_load_balancers(LoadBalancerArns=[bare])["LoadBalancers"]
        assert lb["SecurityGroups"] == [group]
        return
    with pytest.raises(ClientError) as err:
        elbv2.set_security_groups(LoadBalancerArn=bare, SecurityGroups=[group])
    assert err.value.response["Error"]["Code"] == "InvalidConfigurationRequest"
    assert "created without any security groups" in err.value.response["Error"]["Message"]
    [lb] = elbv2.describe_load_balancers(LoadBalancerArns=[bare])["LoadBalancers"]
    assert lb.get("SecurityGroups", []) == []


@pytest.mark.parametrize("enabled", [True, False])
def test_classic_listener_keeps_its_instance_protocol(aws: AwsServer, enabled: bool) -> None:
    """moto describes every Classic listener's InstanceProtocol as its Protocol."""
    aws.control.set_fidelity(enabled=enabled)
    ec2, elb = aws.client("ec2"), aws.client("elb")
    b.classic_elb(elb, ec2, "lb", [b.group(ec2, "g")])  # TCP:80 -> TCP:30080
    cert = aws.client("acm").request_certificate(DomainName="a.example")["CertificateArn"]
    elb.create_load_balancer_listeners(
        LoadBalancerName="lb",
        Listeners=[
            {
                "Protocol": "SSL",
                "LoadBalancerPort": 443,
                "InstanceProtocol": "tcp",
                "InstancePort": 30443,
                "SSLCertificateId": cert,
            },
            {"Protocol": "HTTP", "LoadBalancerPort": 8080, "InstancePort": 30081},
        ],
    )
    described = elb.describe_load_balancers()["LoadBalancerDescriptions"][0]
    got = {
        d["Listener"]["LoadBalancerPort"]: (
            d["Listener"]["Protocol"],
            d["Listener"]["InstanceProtocol"],
        )
        for d in described["ListenerDescriptions"]
    }
    assert got == {
        80: ("TCP", "TCP"),
        443: ("SSL", "TCP" if enabled else "SSL"),
        8080: ("HTTP", "HTTP"),  # sent without one: its Protocol (moto's choice, kept)
    }
    if enabled:  # one sent again with another InstanceProtocol is refused, changing nothing
        with pytest.raises(ClientError, match="DuplicateListener"):
            elb.create_load_balancer_listeners(
                LoadBalancerName="lb",
                Listeners=[
                    {"Protocol": "TCP", "LoadBalancerPort": 80, "InstanceProtocol": "SSL",
                     "InstancePort": 30080},
                ],
            )  # fmt: skip
        described = elb.describe_load_balancers()["LoadBalancerDescriptions"][0]
        assert {
            d["Listener"]["LoadBalancerPort"]: d["Listener"]["InstanceProtocol"]
            for d in described["ListenerDescriptions"]
        }[80] == "TCP"
    if enabled:  # a checkpoint keeps it
        aws.control.checkpoint()
        aws.control.restore()
        described = elb.describe_load_balancers()["LoadBalancerDescriptions"][0]
        assert {
            d["Listener"]["LoadBalancerPort"]: d["Listener"]["InstanceProtocol"]
            for d in described["ListenerDescriptions"]
        }[443] == "TCP"
