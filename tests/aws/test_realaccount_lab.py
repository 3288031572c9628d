"""``lab.up --aws real`` with the cluster and our controller, against moto as the account.

One lab for the module (``lab.up --aws real`` as the task runs it: the run's world, the lab
daemon with the sim cluster on the run's instances, the recording proxy in front of the
"account" with the run's guard, our controller): a Service of type LoadBalancer gets a Classic
ELB whose creation carries the run tag; a change the controller would make to a group the run
did not create is refused by the proxy's guard and recorded in the trail; ``lab.down`` removes
the ELB and its group, reports them, and touches nothing else in the account. The account is a
second moto process reached through ``AWS_ENDPOINT_URL`` (``CCM_LAB_NO_REAL_AWS`` is set by the
root conftest: nothing here can reach Amazon).
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from rich.console import Console

from lab.aws import AwsProcess
from lab.aws.control_client import AwsControlClient
from lab.aws.realaccount import RUN_TAG
from lab.aws.trail import TrailEvent
from lab.frontdoor.down import down
from lab.frontdoor.processes import REAL_RUN_FILE
from lab.frontdoor.realaccount import up_real_aws
from lab.kubeclient import new_api_client
from lab.spec import up_request
from lab.state import LabState, read_state

REGION = "eu-west-1"
NAME = "real"


def _until(
    check: Callable[[], Any], what: str, *, log: str | None = None, timeout: float = 60.0
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            tail = Path(log).read_text()[-4000:] if log else ""
            raise AssertionError(f"timed out waiting for {what}; controller log ends:\n{tail}")
        time.sleep(0.2)  # polling an outside process, bounded by the deadline


def _tags(items: list[dict[str, Any]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


class Account:
    """The stand-in account as its owner sees it (plain clients, no guard, no proxy)."""

    def __init__(self, aws: AwsProcess) -> None:
        self.aws = aws
        self.ec2 = aws.client("ec2")
        self.elb = aws.client("elb")

    def world(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every live resource with its tags (and a group's rules), by (kind, id)."""
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for r in self.ec2.describe_instances()["Reservations"]:
            for i in r["Instances"]:
                if i["State"]["Name"] != "terminated":
                    found["instance", i["InstanceId"]] = _tags(i.get("Tags"))
        for g in self.ec2.describe_security_groups()["SecurityGroups"]:
            found["security-group", g["GroupId"]] = {
                **_tags(g.get("Tags")),
                "(rules)": repr(g.get("IpPermissions")),
            }
        for v in self.ec2.describe_vpcs()["Vpcs"]:
            found["vpc", v["VpcId"]] = _tags(v.get("Tags"))
        for d in self.elb.describe_load_balancers()["LoadBalancerDescriptions"]:
            name = d["LoadBalancerName"]
            (described,) = self.elb.describe_tags(LoadBalancerNames=[name])["TagDescriptions"]
            found["load-balancer", name] = _tags(described.get("Tags"))
        return found


@pytest.fixture(scope="module")
def account(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Account]:
    aws = AwsProcess(
        region=REGION, log_path=tmp_path_factory.mktemp("account") / "aws.log", ready_timeout=120
    )
    aws.start()
    try:
        with pytest.MonkeyPatch.context() as env:
            for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_EC2", "AWS_SESSION_TOKEN"):
                env.delenv(name, raising=False)
            env.setenv("AWS_ENDPOINT_URL", aws.url)
            env.setenv("AWS_ACCESS_KEY_ID", "testing")
            env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            env.setenv("AWS_REGION", REGION)
            env.setenv("AWS_DEFAULT_REGION", REGION)
            yield Account(aws)
    finally:
        aws.stop()


@pytest.fixture(scope="module")
def theirs(account: Account) -> dict[str, str]:
    """Somebody else's resources in the account before the lab: untagged, never touched."""
    ec2 = account.ec2
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="theirs", Description="not the labs", VpcId=vpc)
    account.elb.create_load_balancer(
        LoadBalancerName="theirs",
        Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80, "InstancePort": 80}],
        AvailabilityZones=[f"{REGION}a"],
    )
    return {"vpc": vpc, "group": group["GroupId"], "elb": "theirs"}


@dataclasses.dataclass(frozen=True)
class RealLab:
    """The module's lab: its state, what ``lab.up`` said it created, the account before."""

    state: LabState
    created: list[str]
    before: dict[tuple[str, str], dict[str, Any]]
    root: Path


@pytest.fixture(scope="module")
def real(
    account: Account, theirs: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealLab]:
    root = tmp_path_factory.mktemp("labs")
    before = account.world()
    out = Console(file=io.StringIO(), width=400)
    created = up_real_aws(
        up_request(name=NAME, aws="real", nodes=2, accept_aws_charges=True), root=root, console=out
    )
    state = read_state(root / NAME)
    assert state is not None
    try:
        yield RealLab(state=state, created=created, before=before, root=root)
    finally:
        if (root / NAME).exists():
            down(name=NAME, root=root, console=Console(file=io.StringIO()))


@pytest.fixture
def lab(real: RealLab) -> LabState:
    return real.state


def _trail(state: LabState, action: str) -> list[TrailEvent]:
    return AwsControlClient(state.aws_endpoint, token=state.token).trail(action)


def _service(
    state: LabState, name: str, annotations: dict[str, str] | None = None, *, exist_ok: bool = False
) -> None:
    from kubernetes import client

    api = new_api_client(state.kubeconfig)
    try:
        if exist_ok:
            try:
                client.CoreV1Api(api).read_namespaced_service(name, "default")
                return
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
        client.CoreV1Api(api).create_namespaced_service(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "annotations": annotations or {}},
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": name},
                    "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                },
            },
        )
    finally:
        api.close()


def _run_elbv2(account: Account, run_id: str) -> dict[str, str]:
    """The run's ELBv2 load balancers and target groups: ARN to kind."""
    elbv2 = account.aws.client("elbv2")
    arns = {
        lb["LoadBalancerArn"]: "elbv2-load-balancer"
        for lb in elbv2.describe_load_balancers()["LoadBalancers"]
    }
    arns |= {
        tg["TargetGroupArn"]: "target-group"
        for tg in elbv2.describe_target_groups()["TargetGroups"]
    }
    if not arns:
        return {}
    described = elbv2.describe_tags(ResourceArns=sorted(arns))["TagDescriptions"]
    return {
        d["ResourceArn"]: arns[d["ResourceArn"]]
        for d in described
        if _tags(d.get("Tags")).get(RUN_TAG) == run_id
    }


def _run_elbs(account: Account, run_id: str) -> dict[str, dict[str, str]]:
    return {
        name: tags
        for (kind, name), tags in account.world().items()
        if kind == "load-balancer" and tags.get(RUN_TAG) == run_id
    }


def test_the_nodes_are_the_runs_instances_and_the_controller_goes_through_the_proxy(
    account: Account, real: RealLab
) -> None:
    lab = real.state
    run_id = lab.cluster_id.removeprefix("ccm-lab-")
    record = json.loads((Path(lab.directory) / REAL_RUN_FILE).read_text())
    assert (record["run_id"], record["region"]) == (run_id, REGION)
    assert record["endpoint"] == account.aws.url
    # everything lab.up created is new, carries the run tag, and is what it reported
    new = {key: tags for key, tags in account.world().items() if key not in real.before}
    implicit = {key for key, tags in new.items() if not tags.get(RUN_TAG)}
    assert [kind for kind, _ in implicit] == ["security-group"], "only the VPC's default group"
    assert sorted(kind for kind, _ in new if (kind, _) not in implicit) == sorted(
        ["vpc", "security-group", *["instance"] * 2]
    )
    assert all(
        line.split()[1] in {rid for _, rid in new}
        for line in real.created
        if line.split()[0] in ("vpc", "instance", "security-group")
    )
    conf = Path(lab.cloud_config).read_text()
    assert f"KubernetesClusterID = {lab.cluster_id}" in conf
    assert f"URL = {lab.aws_endpoint}" in conf, "the controller's endpoint is the lab's proxy"
    instances = {
        i["InstanceId"]: i
        for r in account.ec2.describe_instances(
            Filters=[{"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
        )["Reservations"]
        for i in r["Instances"]
    }
    assert sorted(n.instance_id for n in lab.nodes) == sorted(instances)
    for node in lab.nodes:
        inst = instances[node.instance_id]
        assert node.private_ip == inst["PrivateIpAddress"]
        assert node.zone == inst["Placement"]["AvailabilityZone"]
        assert _tags(inst["Tags"])["Name"] == node.name
    assert lab.aws == "real"
    assert lab.aws_upstream == account.aws.url
    assert lab.aws_endpoint != account.aws.url, "the controller talks to the proxy"
    # the controller initialized the nodes from the account, through the proxy
    described = _trail(lab, "DescribeInstances")
    assert described
    assert all(e.answered_by.startswith("upstream:") for e in described)


def test_the_proxy_refuses_the_old_dummy_keys_while_the_controller_works(lab: LabState) -> None:
    """The proxy signs with the account's credentials, so only the lab's own key pair gets
    through it: a client with moto's ``testing`` keys is refused (as EC2 refuses an unknown
    key, recorded as answered by the proxy) while the controller's calls reach the account."""
    assert lab.aws_credentials is not None
    assert lab.token not in lab.aws_credentials
    assert lab.aws_credentials[0] != "testing"
    old = boto3.session.Session().client(
        "ec2",
        endpoint_url=lab.aws_endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    with pytest.raises(ClientError) as refused:
        old.describe_vpcs()
    assert refused.value.response["Error"]["Code"] == "AuthFailure"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 401
    [event] = _trail(lab, "DescribeVpcs")[-1:]
    assert (event.error_code, event.answered_by) == ("AuthFailure", "proxy:caller-auth")
    events = AwsControlClient(lab.aws_endpoint, token=lab.token).trail()
    controller = [e for e in events if "ccm-lab-controller" in e.user_agent]
    assert controller, "the controller made calls through the proxy"
    assert all(e.answered_by.startswith("upstream:") for e in controller)


def test_a_change_to_a_group_the_run_did_not_create_is_refused_and_recorded(
    account: Account, lab: LabState, theirs: dict[str, str]
) -> None:
    ec2 = account.ec2
    worker = lab.nodes[1]
    (inst,) = ec2.describe_instances(InstanceIds=[worker.instance_id])["Reservations"][0][
        "Instances"
    ]
    own_groups = [g["GroupId"] for g in inst["SecurityGroups"]]
    # the account's owner puts the worker in a group of their own (not the run's), before the
    # controller's first load balancer (it caches the instances it finds then, as upstream)
    mine = ec2.create_security_group(
        GroupName="owners", Description="the owners", VpcId=inst["VpcId"]
    )["GroupId"]
    ec2.modify_instance_attribute(InstanceId=worker.instance_id, Groups=[mine])
    before = ec2.describe_security_groups(GroupIds=[mine])["SecurityGroups"][0]
    try:
        _service(lab, "api")
        refused = _until(
            lambda: [
                e
                for e in _trail(lab, "AuthorizeSecurityGroupIngress")
                if e.params.get("GroupId") == mine
            ],
            "the controller's change to the owner's group",
            log=lab.controller.log if lab.controller else None,
        )
        event = refused[0]
        assert event.status == 403
        assert event.error_code == "UnauthorizedOperation"
        assert event.answered_by == "proxy:run-guard"
        assert "ccm-lab run guard" in (event.error_message or "")
        assert mine in (event.error_message or "")
        after = ec2.describe_security_groups(GroupIds=[mine])["SecurityGroups"][0]
        assert after == before, "the refused change never reached the account"
        # the opposite expectation fails on this evidence: the change did not go through
        assert not any(e.ok for e in refused)
    finally:
        ec2.modify_instance_attribute(InstanceId=worker.instance_id, Groups=own_groups)
        ec2.delete_security_group(GroupId=mine)


def test_a_service_gets_a_classic_elb_created_with_the_run_tag(
    account: Account, lab: LabState
) -> None:
    run_id = lab.cluster_id.removeprefix("ccm-lab-")
    _service(lab, "web")
    before = set(_run_elbs(account, run_id))
    elbs = _until(
        lambda: set(_run_elbs(account, run_id)) - before, "the controller's ELB in the account"
    )
    (name,) = elbs
    tags = _run_elbs(account, run_id)[name]
    assert tags[RUN_TAG] == run_id, "tagged by the proxy's guard: our controller sets no such tag"
    assert tags[f"kubernetes.io/cluster/{lab.cluster_id}"] == "owned"
    assert tags["kubernetes.io/service-name"] == "default/web"
    (create,) = [
        e for e in _trail(lab, "CreateLoadBalancer") if e.params.get("LoadBalancerName") == name
    ]
    assert create.ok
    assert create.answered_by == f"upstream:{account.aws.url.removeprefix('http://')}"
    # the group the controller made for it carries the run tag from its creation on
    (group,) = account.ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [f"k8s-elb-{name}"]}]
    )["SecurityGroups"]
    assert _tags(group.get("Tags"))[RUN_TAG] == run_id
    (group_call,) = [
        e for e in _trail(lab, "CreateSecurityGroup") if e.params["GroupName"] == f"k8s-elb-{name}"
    ]
    assert group_call.ok


def test_an_nlb_and_its_target_group_are_created_with_the_run_tag(
    account: Account, lab: LabState
) -> None:
    run_id = lab.cluster_id.removeprefix("ccm-lab-")
    _service(lab, "nlb", {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"})
    made = _until(
        lambda: (found := _run_elbv2(account, run_id)) and len(set(found.values())) == 2 and found,
        "the controller's NLB and target group in the account",
    )
    assert sorted(made.values()) == ["elbv2-load-balancer", "target-group"]
    for action in ("CreateLoadBalancer", "CreateTargetGroup"):
        calls = [e for e in _trail(lab, action) if e.service == "elbv2"]
        assert calls
        assert all(e.ok for e in calls)


def _resources(world: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """The resources of a world and their tags, without the groups' rules: what ``lab.down``
    deletes (it never revokes a rule), and what the controller, retrying its syncs while a
    dry run looks, does not make or delete."""
    return {key: {k: v for k, v in tags.items() if k != "(rules)"} for key, tags in world.items()}


def test_down_removes_the_controllers_elbs_and_groups_and_nothing_else(
    account: Account, real: RealLab, theirs: dict[str, str]
) -> None:
    lab = real.state
    run_id = lab.cluster_id.removeprefix("ccm-lab-")
    # the earlier tests of this module made these; under pytest -n another worker (another
    # lab and account) may have run them, so this one makes whatever its lab lacks
    _service(lab, "api", exist_ok=True)
    _service(lab, "web", exist_ok=True)
    _service(
        lab, "nlb", {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}, exist_ok=True
    )
    elbs = _until(
        lambda: (elbs := _run_elbs(account, run_id)) and len(elbs) == 2 and elbs,
        "both Services' ELBs",
    )
    groups = {
        g["GroupId"]: g["GroupName"]
        for g in account.ec2.describe_security_groups(
            Filters=[{"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
        )["SecurityGroups"]
        if g["GroupName"].startswith("k8s-elb-")
    }
    assert len(groups) == 2
    # the NLB Service may have been made just now: its load balancer and target group come
    # with the controller's next sync
    v2 = _until(
        lambda: (found := _run_elbv2(account, run_id)) and len(found) == 2 and found,
        "the NLB and its target group",
    )
    assert sorted(v2.values()) == ["elbv2-load-balancer", "target-group"]
    root = Path(lab.directory).parent
    before = _resources(account.world())
    dry = Console(file=io.StringIO(), width=400)
    down(name=NAME, root=root, dry_run=True, console=dry)
    planned = dry.file.getvalue()  # type: ignore[attr-defined]
    assert "would stop: controller (pid" in planned
    assert "lab daemon (pid" in planned
    assert all(f"load-balancer {name}" in planned for name in elbs)
    assert _resources(account.world()) == before, "down --dry-run removes nothing"
    out = Console(file=io.StringIO(), width=400)
    down(name=NAME, root=root, console=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    for name in elbs:
        assert f"load-balancer {name}" in text
    for gid, name in groups.items():
        assert f"security-group {gid} ({name})" in text
    for arn, kind in v2.items():
        assert f"{kind} {arn}" in text
    assert all(line in text for line in real.created)
    world = account.world()
    assert not [key for key, tags in world.items() if tags.get(RUN_TAG) == run_id]
    assert not _run_elbv2(account, run_id)
    assert world == real.before, "exactly the run's resources went; the others are as they were"
    assert not (real.root / NAME).exists()
    assert ("vpc", theirs["vpc"]) in world
    assert ("security-group", theirs["group"]) in world
    assert ("load-balancer", theirs["elb"]) in world
