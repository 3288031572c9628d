"""``--aws real``: the guarded path to a real AWS account, against moto standing in for it.

A second moto server, started here as its own process, is reached the way a real account is:
through boto3's usual chain (``AWS_ENDPOINT_URL``, credentials and region from the
environment); the lab's code under test is the real-account code, guard included. Nothing here
can reach real AWS: the suite sets ``CCM_LAB_NO_REAL_AWS`` (root ``conftest.py``), which the
first test checks is in force.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from rich.console import Console

from lab.aws import AwsProcess
from lab.aws.realaccount import (
    FORBID_ENV,
    RUN_TAG,
    GuardRefused,
    RealAwsError,
    RealAwsForbidden,
    account_client,
    real_aws_forbidden,
)
from lab.aws.runworld import teardown
from lab.frontdoor.down import down
from lab.frontdoor.realaccount import up_real_aws
from lab.frontdoor.up import up
from lab.spec import up_request
from lab.state import LabError

REGION = "eu-west-1"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AwsProcess]:
    """moto in its own process: the "account" (its state is not this process's moto)."""
    aws = AwsProcess(
        region=REGION, log_path=tmp_path_factory.mktemp("account") / "aws.log", ready_timeout=120
    )
    aws.start()
    try:
        yield aws
    finally:
        aws.stop()


@pytest.fixture
def account(stand_in: AwsProcess, monkeypatch: pytest.MonkeyPatch) -> AwsProcess:
    """The environment a user of a real account has, pointed at the stand-in."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_EC2", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", stand_in.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    return stand_in


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=400)


def _text(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def _world(ec2: Any) -> dict[tuple[str, str], dict[str, str]]:
    """Every resource of the account (live instances only) with its tags."""

    def tags(item: dict[str, Any]) -> dict[str, str]:
        return {t["Key"]: t["Value"] for t in item.get("Tags") or []}

    found: dict[tuple[str, str], dict[str, str]] = {}
    for r in ec2.describe_instances()["Reservations"]:
        for i in r["Instances"]:
            if i["State"]["Name"] != "terminated":
                found["instance", i["InstanceId"]] = tags(i)
    for kind, call, key, field in (
        ("vpc", ec2.describe_vpcs, "Vpcs", "VpcId"),
        ("subnet", ec2.describe_subnets, "Subnets", "SubnetId"),
        ("security-group", ec2.describe_security_groups, "SecurityGroups", "GroupId"),
        ("route-table", ec2.describe_route_tables, "RouteTables", "RouteTableId"),
        (
            "internet-gateway",
            ec2.describe_internet_gateways,
            "InternetGateways",
            "InternetGatewayId",
        ),
    ):
        for item in call()[key]:
            found[kind, item[field]] = tags(item)
    return found


def test_the_suite_cannot_reach_real_aws(
    account: AwsProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert real_aws_forbidden(), f"the root conftest sets {FORBID_ENV}"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    with pytest.raises(RealAwsForbidden, match=r"https://ec2\.eu-west-1\.amazonaws\.com"):
        account_client(REGION, "test-run")
    with pytest.raises(LabError, match=f"^--aws real: {FORBID_ENV} is set"):
        up_real_aws(
            up_request(name="r", aws="real", accept_aws_charges=True),
            root=tmp_path / "labs",
            console=_quiet(),
        )
    assert not (tmp_path / "labs").exists()


def test_refusals_name_the_flag_and_change_nothing(account: AwsProcess, tmp_path: Path) -> None:
    ec2 = account.client("ec2")
    before = _world(ec2)
    root = tmp_path / "labs"
    with pytest.raises(LabError) as caught:
        up_real_aws(up_request(name="r", aws="real", nodes=2), root=root, console=_quiet())
    assert str(caught.value).startswith("--aws real: creates billable resources")
    assert "add --i-accept-aws-charges" in str(caught.value)
    for kwargs, message in (
        ({"accept_aws_charges": True}, r"^--i-accept-aws-charges: belongs to --aws real"),
        ({"dry_run": True}, r"^--dry-run: belongs to --aws real"),
        ({"aws": "real", "accept_aws_charges": True, "backend": "kind"}, r"^--aws real --backend"),
        ({"aws": "nimbus"}, r"^--aws 'nimbus': choose one of moto, localstack, real"),
    ):
        with pytest.raises(LabError, match=message) as caught:
            up(up_request(name="r", **kwargs), root=root, console=_quiet())
        assert "\n" not in str(caught.value)
    with pytest.raises(LabError, match=r"^--dry-run: lists what lab\.down would remove"):
        down(name="r", dry_run=True, root=root, console=_quiet())
    assert not root.exists()
    assert _world(ec2) == before


def test_dry_run_prints_the_plan_and_changes_nothing(account: AwsProcess, tmp_path: Path) -> None:
    ec2 = account.client("ec2")
    before = _world(ec2)
    out = _quiet()
    plan = up_real_aws(
        up_request(name="r", aws="real", nodes=2, accept_aws_charges=True, dry_run=True),
        root=tmp_path,
        console=out,
    )
    assert _world(ec2) == before
    assert not (tmp_path / "r").exists()
    assert [line.split(" ", 2)[:2] for line in plan] == [
        ["create", "vpc"],
        ["create", "internet-gateway"],
        ["create", "route-table"],
        ["create", "subnet"],
        ["create", "subnet"],
        ["create", "security-group"],
        ["run", "instance"],
        ["run", "instance"],
        ["start", "the"],
        ["start", "the"],
        ["start", "our"],
    ]
    assert all(f"tagged {RUN_TAG}=" in line for line in plan[:8])
    cluster, proxy, controller = plan[8:]
    assert "2 node(s), each the run's instance" in cluster
    assert "recording proxy" in proxy
    assert f"run guard: the controller's creates tagged {RUN_TAG}=" in proxy
    assert "our controller" in controller
    assert "lab.down removes them" in controller
    text = _text(out)
    assert "nothing was created or changed (--dry-run)" in text
    assert all(line in text for line in plan)


def test_the_guard_refuses_changes_to_what_the_run_did_not_create(account: AwsProcess) -> None:
    outside = account.client("ec2")
    vpc = outside.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    group = outside.create_security_group(GroupName="g", Description="d", VpcId=vpc)["GroupId"]
    before = _world(outside)
    ec2 = account_client(REGION, "guard-run", settle_seconds=0)
    refused = {
        "DeleteVpc": lambda: ec2.delete_vpc(VpcId=vpc),
        "CreateSubnet": lambda: ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.0.0/24"),
        "AuthorizeSecurityGroupIngress": lambda: ec2.authorize_security_group_ingress(
            GroupId=group,
            IpPermissions=[{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "1.2.3.4/32"}]}],
        ),
        "CreateTags": lambda: ec2.create_tags(
            Resources=[vpc], Tags=[{"Key": RUN_TAG, "Value": "guard-run"}]
        ),
        "EnableEbsEncryptionByDefault": ec2.enable_ebs_encryption_by_default,
        "AllocateAddress": lambda: ec2.allocate_address(Domain="vpc"),
    }
    for op, call in refused.items():
        with pytest.raises(GuardRefused, match=f"^{op}") as caught:
            call()
        message = str(caught.value)
        if op == "EnableEbsEncryptionByDefault":
            assert "account-wide" in message
        elif op == "AllocateAddress":
            assert f"cannot tag what this call creates with {RUN_TAG}" in message
        else:
            assert vpc in message or group in message
            assert f"not tagged {RUN_TAG}=guard-run" in message
    assert _world(outside) == before

    # what the run creates carries its tag, and only then may the run change it
    mine = ec2.create_vpc(CidrBlock="10.6.0.0/16")["Vpc"]["VpcId"]
    assert _world(outside)["vpc", mine] == {RUN_TAG: "guard-run"}
    ec2.modify_vpc_attribute(VpcId=mine, EnableDnsHostnames={"Value": True})
    # a create call outside the lab's list: tagged when it can be, then the run may release it
    address = ec2.allocate_address(
        Domain="vpc", TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": []}]
    )["AllocationId"]
    (described,) = outside.describe_addresses(AllocationIds=[address])["Addresses"]
    assert {t["Key"]: t["Value"] for t in described["Tags"]} == {RUN_TAG: "guard-run"}
    ec2.release_address(AllocationId=address)
    # teardown takes only a guarded client of the same run
    with pytest.raises(RealAwsError, match="needs a client made by account_client"):
        teardown(outside, "guard-run")
    with pytest.raises(RealAwsError, match="guard is for run guard-run, not other"):
        teardown(ec2, "other")
    assert [o.resource_id for o in teardown(ec2, "guard-run")] == [mine]
    with pytest.raises(ClientError):
        outside.describe_vpcs(VpcIds=[mine])
    assert ("vpc", vpc) in _world(outside)
