"""What a real-account run owns: create it, find it by its tag, remove it (``lab.down``).

Role: :func:`create_world` builds a run's world (:func:`lab.aws.topology` seeded through the
run's guarded client, on an Amazon image), :func:`inventory` finds every resource carrying the
run's tag (the controller's load balancers, target groups and groups included) and
:func:`teardown` removes exactly that, dependents first, in named steps (:class:`_Removal`),
then checks that nothing tagged is left.

Neighbours: :mod:`lab.aws.realaccount` (the run's tag, its guard and guarded clients, the
plan; every call here goes through that guard), :mod:`lab.aws.seeding` (the seeder
:func:`create_world` drives), :mod:`lab.frontdoor.realaccount` (``lab.up --aws real`` and
``lab.down`` call :func:`create_world` and :func:`teardown`).

Design: split from :mod:`lab.aws.realaccount` so the guard (what may be changed) and the
removal (what is changed, in which order, with which waits) read apart; removal only ever
goes through a guarded client, so even a bug here cannot touch anything untagged.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lab.aws.realaccount import IMAGE_NAME, RUN_TAG, RealAwsError, guard_of
from lab.aws.seeding import seed_topology

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef

    from lab.aws.topology import TopologySpec

#: live instance states (a terminated instance is gone for our purposes)
_LIVE = ["pending", "running", "stopping", "stopped", "shutting-down"]


@dataclasses.dataclass(frozen=True)
class Owned:
    """A resource of a run: its kind (EC2's resource type), id and Name tag."""

    kind: str
    resource_id: str
    name: str = ""

    def line(self) -> str:
        return f"{self.kind} {self.resource_id}" + (f" ({self.name})" if self.name else "")


def _name(tags: Iterable[Any] | None) -> str:
    return next((str(t["Value"]) for t in tags or [] if t.get("Key") == "Name"), "")


def _tagged_lbs(reader: Any, key: str, names: Sequence[str], run_id: str) -> dict[str, str]:
    """Of ``names`` (ELB names or ELBv2 ARNs), those tagged with this run: name to Name tag."""
    found: dict[str, str] = {}
    for start in range(0, len(names), 20):  # DescribeTags takes at most 20
        reply = reader.describe_tags(**{key: list(names[start : start + 20])})
        for description in reply.get("TagDescriptions", []):
            tags = description.get("Tags", [])
            if any(t.get("Key") == RUN_TAG and t.get("Value") == run_id for t in tags):
                found[str(description.get("LoadBalancerName") or description["ResourceArn"])] = (
                    _name(tags)
                )
    return found


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    return [
        item for page in client.get_paginator(operation).paginate(**kwargs) for item in page[key]
    ]


def inventory(ec2: EC2Client, run_id: str) -> list[Owned]:
    """Every resource carrying this run's tag, in the order :func:`teardown` removes them:
    load balancers (Classic and ELBv2) and target groups (what a controller created through
    the lab's proxy), instances, security groups, then the network."""
    readers = guard_of(ec2).readers
    elb, elbv2 = readers["elb"], readers["elbv2"]
    classic = [
        d["LoadBalancerName"]
        for d in _pages(elb, "describe_load_balancers", "LoadBalancerDescriptions")
    ]
    found = [
        Owned("load-balancer", name, label)
        for name, label in _tagged_lbs(elb, "LoadBalancerNames", classic, run_id).items()
    ]
    v2 = {
        d["LoadBalancerArn"]: d for d in _pages(elbv2, "describe_load_balancers", "LoadBalancers")
    }
    found += [
        Owned("elbv2-load-balancer", arn, v2[arn].get("LoadBalancerName", ""))
        for arn in _tagged_lbs(elbv2, "ResourceArns", sorted(v2), run_id)
    ]
    groups = {
        g["TargetGroupArn"]: g for g in _pages(elbv2, "describe_target_groups", "TargetGroups")
    }
    found += [
        Owned("target-group", arn, groups[arn].get("TargetGroupName", ""))
        for arn in _tagged_lbs(elbv2, "ResourceArns", sorted(groups), run_id)
    ]
    mine: list[FilterTypeDef] = [{"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
    found += [
        Owned("instance", i["InstanceId"], _name(i.get("Tags")))
        for r in ec2.describe_instances(
            Filters=[*mine, {"Name": "instance-state-name", "Values": _LIVE}]
        )["Reservations"]
        for i in r.get("Instances", [])
    ]
    found += [
        Owned("security-group", g["GroupId"], g.get("GroupName", ""))
        for g in ec2.describe_security_groups(Filters=mine)["SecurityGroups"]
    ]
    found += [
        Owned("route-table", t["RouteTableId"], _name(t.get("Tags")))
        for t in ec2.describe_route_tables(Filters=mine)["RouteTables"]
    ]
    found += [
        Owned("internet-gateway", g["InternetGatewayId"], _name(g.get("Tags")))
        for g in ec2.describe_internet_gateways(Filters=mine)["InternetGateways"]
    ]
    found += [
        Owned("subnet", s["SubnetId"], _name(s.get("Tags")))
        for s in ec2.describe_subnets(Filters=mine)["Subnets"]
    ]
    found += [
        Owned("vpc", v["VpcId"], _name(v.get("Tags")))
        for v in ec2.describe_vpcs(Filters=mine)["Vpcs"]
    ]
    return found


def _retrying(
    what: str,
    call: Callable[[], object],
    codes: tuple[str, ...],
    *,
    deadline: float,
    sleep: Callable[[float], None],
) -> None:
    """``call``, again while AWS answers one of ``codes`` (a dependent still going away: an
    ELB's network interfaces outlive it by minutes), until ``deadline``."""
    delay = 0.05
    while True:
        try:
            call()
            return
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in codes or time.monotonic() > deadline:
                raise RealAwsError(f"{what}: {code or exc}; run lab.down again later") from None
        sleep(delay)  # a dependent going away, bounded by the deadline
        delay = min(delay * 2, 5.0)


def teardown(
    ec2: EC2Client,
    run_id: str,
    *,
    dry_run: bool = False,
    wait_timeout: float = 600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Owned]:
    """Remove every resource tagged with this run's id (dependents first), check that nothing
    tagged is left, and return what went; ``dry_run``: only return what would go. Every call
    passes the guard of ``ec2`` (made by :func:`lab.aws.realaccount.account_client`), so
    nothing untagged can be touched even by a bug here."""
    guard = guard_of(ec2)
    if guard.run_id != run_id:
        raise RealAwsError(f"the client's guard is for run {guard.run_id}, not {run_id}")
    owned = inventory(ec2, run_id)
    if dry_run or not owned:
        return owned
    removal = _Removal(
        ec2,
        guard.readers["elb"],
        guard.readers["elbv2"],
        deadline=time.monotonic() + wait_timeout,
        wait_timeout=wait_timeout,
        sleep=sleep,
    )
    removal.remove(owned)
    left = inventory(ec2, run_id)
    if left:
        raise RealAwsError(
            f"run {run_id}: still tagged after removal: {', '.join(o.line() for o in left)}; "
            "run lab.down again later"
        )
    return owned


@dataclasses.dataclass
class _Removal:
    """One teardown's steps, dependents first, all bounded by one ``deadline``."""

    ec2: EC2Client
    elb: Any
    elbv2: Any
    deadline: float
    wait_timeout: float
    sleep: Callable[[float], None]

    def remove(self, owned: Sequence[Owned]) -> None:
        by_kind: dict[str, list[str]] = {}
        for item in owned:
            by_kind.setdefault(item.kind, []).append(item.resource_id)
        self.load_balancers(by_kind.get("load-balancer", []))
        self.elbv2_load_balancers(by_kind.get("elbv2-load-balancer", []))
        self.target_groups(by_kind.get("target-group", []))
        self.instances(by_kind.get("instance", []))
        self.security_groups(by_kind.get("security-group", []))
        self.route_tables(by_kind.get("route-table", []))
        self.internet_gateways(by_kind.get("internet-gateway", []))
        self.subnets(by_kind.get("subnet", []))
        for vpc in by_kind.get("vpc", []):
            self.ec2.delete_vpc(VpcId=vpc)

    def retrying(self, what: str, call: Callable[[], object], *codes: str) -> None:
        _retrying(what, call, codes, deadline=self.deadline, sleep=self.sleep)

    def load_balancers(self, names: Sequence[str]) -> None:
        for name in names:
            self.elb.delete_load_balancer(LoadBalancerName=name)

    def elbv2_load_balancers(self, arns: Sequence[str]) -> None:
        for arn in arns:  # its listeners and rules go with it
            self.elbv2.delete_load_balancer(LoadBalancerArn=arn)

    def target_groups(self, arns: Sequence[str]) -> None:
        for arn in arns:  # in use until its LB is gone
            self.retrying(
                f"deleting target group {arn}",
                functools.partial(self.elbv2.delete_target_group, TargetGroupArn=arn),
                "ResourceInUse",
            )

    def instances(self, instances: Sequence[str]) -> None:
        """Terminate ``instances`` and wait until every one is ``terminated``."""
        if not instances:
            return
        ec2 = self.ec2
        ec2.terminate_instances(InstanceIds=list(instances))
        delay = 0.05
        while any(
            i.get("State", {}).get("Name") != "terminated"
            for r in ec2.describe_instances(InstanceIds=list(instances))["Reservations"]
            for i in r.get("Instances", [])
        ):
            if time.monotonic() > self.deadline:
                raise RealAwsError(
                    f"instances {list(instances)} are not terminated after "
                    f"{self.wait_timeout:.0f}s; run lab.down again later"
                )
            self.sleep(delay)  # poll interval, bounded by the deadline
            delay = min(delay * 2, 5.0)

    def security_groups(self, group_ids: Sequence[str]) -> None:
        """Revoke the rules naming groups (they block deletion), then delete the groups."""
        ec2 = self.ec2
        groups = (
            ec2.describe_security_groups(GroupIds=list(group_ids))["SecurityGroups"]
            if group_ids
            else []
        )
        for group in groups:  # rules naming a group block its deletion
            refs = [p for p in group.get("IpPermissions", []) if p.get("UserIdGroupPairs")]
            if refs:
                ec2.revoke_security_group_ingress(GroupId=group["GroupId"], IpPermissions=refs)
        for group in groups:
            gid = group["GroupId"]
            self.retrying(
                f"deleting security group {gid}",
                functools.partial(ec2.delete_security_group, GroupId=gid),
                "DependencyViolation",
            )

    def route_tables(self, table_ids: Sequence[str]) -> None:
        ec2 = self.ec2
        for table in table_ids:
            described = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"]
            for assoc in described[0].get("Associations", []) if described else []:
                if not assoc.get("Main") and "RouteTableAssociationId" in assoc:
                    ec2.disassociate_route_table(AssociationId=assoc["RouteTableAssociationId"])
            ec2.delete_route_table(RouteTableId=table)

    def internet_gateways(self, gateway_ids: Sequence[str]) -> None:
        ec2 = self.ec2
        for igw in gateway_ids:
            gateways = ec2.describe_internet_gateways(InternetGatewayIds=[igw])
            for attachment in gateways["InternetGateways"][0].get("Attachments", []):
                ec2.detach_internet_gateway(InternetGatewayId=igw, VpcId=attachment["VpcId"])
            ec2.delete_internet_gateway(InternetGatewayId=igw)

    def subnets(self, subnet_ids: Sequence[str]) -> None:
        for sid in subnet_ids:
            self.retrying(
                f"deleting subnet {sid}",
                functools.partial(self.ec2.delete_subnet, SubnetId=sid),
                "DependencyViolation",
            )


def amazon_image(ec2: EC2Client) -> str:
    """The newest Amazon-owned image named :data:`IMAGE_NAME` (never a stranger's image)."""
    images = ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": [IMAGE_NAME]}]
    ).get("Images", [])
    if not images:
        raise RealAwsError(f"no Amazon-owned image named {IMAGE_NAME} in this region")
    newest = max(images, key=lambda i: (i.get("CreationDate", ""), i.get("ImageId", "")))
    return str(newest["ImageId"])


def create_world(ec2: EC2Client, spec: TopologySpec) -> list[Owned]:
    """Create ``spec`` through the guarded client (every resource tagged at creation) on an
    Amazon image; returns what the run now owns."""
    run_id = guard_of(ec2).run_id
    spec = dataclasses.replace(spec, image_id=spec.image_id or amazon_image(ec2))
    seed_topology(ec2, spec, wait_timeout=600.0)
    return inventory(ec2, run_id)
