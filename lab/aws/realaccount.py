"""The lab in a real AWS account (``--aws real``): every change guarded by the run's tag.

A lab run in a real account gets a run id; every resource the lab creates carries
``ccm-lab/run-id=<id>`` (:data:`RUN_TAG`) from its creation on (the tag is put into the create
call's ``TagSpecifications``, so nothing exists untagged, not even for a moment), and the lab
changes or deletes nothing that does not carry it. The guard (:class:`RunGuard`) is not a
convention of the callers: :func:`account_clients` installs it on the boto3 clients themselves
(EC2, Classic ELB, ELBv2; a botocore ``before-parameter-build`` hook), and the recording proxy
the run's controller reaches the account through asks the same object
(:mod:`lab.aws.runproxy`), so every call of the lab and of the controller passes it:

* ``Describe*``/``Get*``/``List*`` of EC2, ELB and ELBv2 pass (reading changes nothing), and
  STS ``GetCallerIdentity``; every call of any other service is refused, reads too (a read
  can hand out credentials or secrets: STS ``GetSessionToken``, Secrets Manager);
* a call that creates (``Create*``, ``Run*``, ``Allocate*``...) gets the run tag added to its
  ``TagSpecifications``; one that cannot tag at creation is refused unless it only adds a part
  to resources of the run (``CreateRoute`` in its route table); and the parents it names
  (``VpcId``, ``SubnetId``, ``GroupId``...) must carry the tag: the lab adds nothing to
  somebody else's VPC;
* an ELB/ELBv2 create (``CreateLoadBalancer``, ``CreateTargetGroup``, ``CreateListener``,
  ``CreateRule``) gets the run tag added to its ``Tags``; the load balancer or VPC it names
  must carry it;
* any other call (modify, attach, authorize, register, delete, tag) is allowed only when every
  resource it names carries this run's tag (asked with each API's ``DescribeTags``; a listener
  or rule ARN counts as its load balancer's); one that names none (an account-wide setting)
  is refused; ``CreateTags``/``DeleteTags`` may not touch the run tag itself (re-tagged or
  untagged, ``lab.down`` would no longer find the resource).

In the proxy (:class:`lab.aws.runproxy.ProxyRunGuard`) a call is also refused when it cannot
be read as the guard reads it: no ``Action`` (a REST or JSON API), a signing scope other than
the service and region the request names, a region other than the run's, or a parameter given
twice (query and body).

A refusal is :class:`GuardRefused`, raised before the request is sent, naming the call, the
resource and the tag. The ids a call only *uses* (``ImageId``: an Amazon image) are not
checked.

:func:`plan_up` says what a run would create; creating it, finding what it created (by tag)
and removing exactly that is :mod:`lab.aws.runworld`'s. Credentials,
region and endpoint come from boto3's usual chain (environment, shared config, instance role):
the lab adds no endpoint of its own. Where ``CCM_LAB_NO_REAL_AWS`` is set (the test suite sets
it), a client whose endpoint resolves to Amazon's own hosts is refused
(:class:`RealAwsForbidden`), so no test can reach a real account: tests point
``AWS_ENDPOINT_URL`` at a moto server standing in for the account, and the code under test is
the same.

Neighbours: :mod:`lab.aws.topology` (the spec of the world a run creates),
:mod:`lab.aws.runworld` (creates it through a guarded client, lists and removes it),
:mod:`lab.aws.runproxy` (the same guard in the controller's proxy), :mod:`lab.frontdoor.realaccount`
(``lab.up --aws real``, ``lab.down``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import secrets
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from lab.aws.topology import NodeSpec, TopologySpec

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import FilterTypeDef
    from mypy_boto3_elb import ElasticLoadBalancingClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client

#: the tag every resource of a run carries: ``ccm-lab/run-id=<run id>``
RUN_TAG = "ccm-lab/run-id"
#: set (to anything but empty or 0) in a process that must never reach real AWS (the tests)
FORBID_ENV = "CCM_LAB_NO_REAL_AWS"
#: the instance type a run's nodes get (the cheapest current type with enough memory to boot)
INSTANCE_TYPE = "t3.micro"
#: Amazon's own images (owner ``amazon``), newest first by creation date
IMAGE_NAME = "amzn2-ami-hvm-*-x86_64-gp2"

_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{3,40}\Z")
_RESOURCE_ID = re.compile(r"^[a-z]+(-[a-z]+)?-[0-9a-f]{8,17}\Z")
_READ_ONLY = ("Describe", "Get", "List")
_CREATING = ("Create", "Run", "Allocate", "Copy", "Import", "Request", "Purchase")
#: create calls and the resource type their ``TagSpecifications`` take
_CREATES = {
    "CreateVpc": "vpc",
    "CreateSubnet": "subnet",
    "CreateSecurityGroup": "security-group",
    "CreateInternetGateway": "internet-gateway",
    "CreateRouteTable": "route-table",
    "RunInstances": "instance",
}
#: parameters that name a resource the call only uses, never changes
_USED_ONLY = frozenset({"ImageId", "KmsKeyId", "ClientToken", "DestinationCidrBlock"})


class RealAwsError(RuntimeError):
    """A real-account operation was refused or failed; the message says why and what to do."""


class GuardRefused(RealAwsError):
    """The guard refused a call: it would change something this run did not create."""


class RealAwsForbidden(RealAwsError):
    """This process may not reach real AWS (``CCM_LAB_NO_REAL_AWS`` is set)."""


def new_run_id() -> str:
    """A fresh run id: UTC time of the run and random hex, e.g. ``20261128t0142-3f9a1c``."""
    return f"{time.strftime('%Y%m%dt%H%M', time.gmtime())}-{secrets.token_hex(3)}"


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise RealAwsError(
            f"run id {run_id!r}: expected 4 to 41 lowercase letters, digits and dashes"
        )
    return run_id


def cluster_id_for(run_id: str) -> str:
    """The cluster id of a run's topology and controller (``kubernetes.io/cluster/<id>``)."""
    return f"ccm-lab-{run_id}"


def real_aws_forbidden() -> bool:
    return os.environ.get(FORBID_ENV, "") not in ("", "0")


def is_amazon_endpoint(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def account_client(region: str, run_id: str, *, settle_seconds: float = 5.0) -> EC2Client:
    """An EC2 client from boto3's usual chain (credentials, ``AWS_ENDPOINT_URL``...) with the
    run's guard installed (see the module docstring)."""
    return account_clients(region, run_id, settle_seconds=settle_seconds).ec2


@dataclasses.dataclass(frozen=True)
class AccountClients:
    """The guarded clients of one run (EC2, Classic ELB, ELBv2), sharing one :class:`RunGuard`."""

    ec2: EC2Client
    elb: ElasticLoadBalancingClient
    elbv2: ElasticLoadBalancingv2Client
    guard: RunGuard


def plain_client(service: str, region: str) -> Any:
    """A client of boto3's usual chain, unguarded (the guard's own reads use these), refused
    (:class:`RealAwsForbidden`) where ``CCM_LAB_NO_REAL_AWS`` is set and it would reach Amazon."""
    make: Any = boto3.client  # the service is a runtime name: no per-service overload
    client = make(
        service, region_name=region, config=Config(retries={"max_attempts": 5, "mode": "standard"})
    )
    url = client.meta.endpoint_url
    if real_aws_forbidden() and is_amazon_endpoint(url):
        raise RealAwsForbidden(
            f"{FORBID_ENV} is set: this process may not reach real AWS ({url}); point "
            "AWS_ENDPOINT_URL at a stand-in, or unset it outside the tests"
        )
    return client


def account_clients(region: str, run_id: str, *, settle_seconds: float = 5.0) -> AccountClients:
    """EC2, ELB and ELBv2 clients from boto3's usual chain, each with the run's guard installed
    (one guard; its tag look-ups are reads through these same clients, which pass it)."""
    check_run_id(run_id)
    ec2, elb, elbv2 = (plain_client(s, region) for s in ("ec2", "elb", "elbv2"))
    guard = RunGuard(
        run_id, {"ec2": ec2, "elb": elb, "elbv2": elbv2}, settle_seconds=settle_seconds
    )
    for client in (ec2, elb, elbv2):
        guard.install(client)
        _GUARDS[client] = guard
    return AccountClients(ec2=ec2, elb=elb, elbv2=elbv2, guard=guard)


#: the guard of every client :func:`account_client` made
_GUARDS: weakref.WeakKeyDictionary[Any, RunGuard] = weakref.WeakKeyDictionary()


def guard_of(ec2: Any) -> RunGuard:
    """The guard installed on ``ec2``; a client without one is refused (:class:`RealAwsError`):
    the functions that change a real account take only guarded clients."""
    guard = _GUARDS.get(ec2)
    if guard is None:
        raise RealAwsError("a real-account change needs a client made by account_client (guarded)")
    return guard


#: the services the guard knows how to tag and look tags up in (boto3 names)
GUARDED_SERVICES = ("ec2", "elb", "elbv2")
#: ELB/ELBv2 parameters naming the resource a call changes (the load balancer, target group...)
_LB_NAMES = frozenset(
    {
        "LoadBalancerName",
        "LoadBalancerNames",
        "LoadBalancerArn",
        "TargetGroupArn",
        "ListenerArn",
        "RuleArn",
        "ResourceArns",
    }
)
#: the Classic ELB create call, whose ``LoadBalancerName`` names the new load balancer
_ELB_CREATE = ("elb", "CreateLoadBalancer")
#: ELB/ELBv2 create calls whose resource takes ``Tags`` at creation
_LB_CREATES = {
    "elb": frozenset({"CreateLoadBalancer"}),
    "elbv2": frozenset({"CreateLoadBalancer", "CreateTargetGroup", "CreateListener", "CreateRule"}),
}


@dataclasses.dataclass
class RunGuard:
    """The rule that refuses any change to what the run did not create (module docstring).

    One object serves both places a run's calls go through: the boto3 clients of
    :func:`account_clients` (a ``before-parameter-build`` hook, :meth:`install`) and the
    recording proxy in front of the account (:class:`lab.aws.runproxy.ProxyRunGuard`, which
    turns a wire request into the same parameters). :meth:`check` takes a call's parameters
    as boto3 spells them, adds the run tag to what it creates and raises :class:`GuardRefused`
    for anything else it may not do. Tags are read through ``readers`` (service to client;
    only ``Describe*`` calls are made with them).
    """

    run_id: str
    readers: Mapping[str, Any]
    #: tags are eventually consistent: an id found untagged is asked again for this long
    #: (a resource created a moment ago) before the call is refused
    settle_seconds: float = 5.0
    #: calls the guard let through that change something (operation, ids), for inspection
    allowed: list[tuple[str, tuple[str, ...]]] = dataclasses.field(default_factory=list)

    def install(self, client: Any) -> None:
        """Check every call of ``client`` (an EC2, ELB or ELBv2 client) before it is sent."""
        service = _boto_service(client)
        event = client.meta.service_model.service_id.hyphenize()

        def hook(params: dict[str, Any], model: Any, **_: Any) -> None:
            self.check(service, str(model.name), params)

        client.meta.events.register(f"before-parameter-build.{event}", hook)

    def check(self, service: str, op: str, params: dict[str, Any]) -> None:
        """Let the call ``op`` of ``service`` with boto3-shaped ``params`` through (adding the
        run tag where it creates), or raise :class:`GuardRefused` naming the call and why."""
        if (service, op) == ("sts", "GetCallerIdentity"):
            return  # who the caller is: what SDKs and the lab ask first
        if service not in GUARDED_SERVICES:
            raise GuardRefused(
                f"{op}: a {service} call; the lab's guard knows how to tag and check "
                f"{', '.join(GUARDED_SERVICES)} only (and lets STS GetCallerIdentity through), "
                "so it is not made: reads of other services can hand out credentials and secrets"
            )
        if op.startswith(_READ_ONLY):
            return
        if service == "ec2":
            self._check_ec2(op, params)
        else:
            self._check_lb(service, op, params)

    def _check_ec2(self, op: str, params: dict[str, Any]) -> None:
        tagging = op in ("CreateTags", "DeleteTags")
        if tagging:
            ids = [str(r) for r in params.get("Resources") or []]
        else:
            ids = self._named_ids(params)
        if not tagging and op.startswith(_CREATING):
            if op in _CREATES or params.get("TagSpecifications"):
                self._tag_at_creation(op, params)
            elif not ids:
                raise GuardRefused(
                    f"{op}: the lab cannot tag what this call creates with {RUN_TAG}, so it "
                    "does not make the call"
                )
            # else: a part of resources of the run (CreateRoute in its route table)
        elif not ids:
            raise self._account_wide(op)
        self._refuse_untagged("ec2", op, ids)
        if tagging and any(tag.get("Key") == RUN_TAG for tag in params.get("Tags") or []):
            raise GuardRefused(
                f"{op}: the run tag {RUN_TAG} is the lab's to set, at creation (changed or "
                "removed, lab.down would no longer find the resource)"
            )

    def _check_lb(self, service: str, op: str, params: dict[str, Any]) -> None:
        ids: list[str] = []
        named = _LB_NAMES - {"LoadBalancerName"} if (service, op) == _ELB_CREATE else _LB_NAMES
        for key in sorted(named & params.keys()):
            value = params[key]
            ids += [str(v) for v in (value if isinstance(value, list) else [value]) if v]
        creates_own = op in _LB_CREATES[service]
        if creates_own:
            self._tag_list(op, params.setdefault("Tags", []))
        if op in ("AddTags", "RemoveTags"):
            for tag in params.get("Tags") or []:
                if tag.get("Key") == RUN_TAG:
                    raise GuardRefused(
                        f"{op}: the run tag {RUN_TAG} is the lab's to set, at creation"
                    )
        if not ids:
            if creates_own:  # a new load balancer or target group: nothing of anybody's named
                vpc = params.get("VpcId")
                if vpc:
                    self._refuse_untagged("ec2", op, [str(vpc)])
                self.allowed.append((op, ()))
                return
            raise self._account_wide(op)
        self._refuse_untagged(service, op, ids)

    def _account_wide(self, op: str) -> GuardRefused:
        return GuardRefused(
            f"{op}: names no resource of this run (an account-wide change?); the lab only "
            f"changes resources tagged {RUN_TAG}={self.run_id}"
        )

    def _refuse_untagged(self, service: str, op: str, ids: Sequence[str]) -> None:
        untagged = self._untagged(service, ids)
        if untagged:
            raise GuardRefused(
                f"{op} {', '.join(untagged)}: not tagged {RUN_TAG}={self.run_id}; the lab "
                "changes and deletes only what this run created"
            )
        self.allowed.append((op, tuple(ids)))

    def _tag_list(self, op: str, tags: list[dict[str, Any]]) -> None:
        for tag in tags:
            if tag.get("Key") == RUN_TAG and tag.get("Value") != self.run_id:
                raise GuardRefused(
                    f"{op}: tags {RUN_TAG}={tag.get('Value')}, this run is {self.run_id}"
                )
        if not any(t.get("Key") == RUN_TAG for t in tags):
            tags.append({"Key": RUN_TAG, "Value": self.run_id})

    def _tag_at_creation(self, op: str, params: dict[str, Any]) -> None:
        """The run tag into every ``TagSpecifications`` entry (one for the call's own resource
        type added where the lab knows it)."""
        specs = params.setdefault("TagSpecifications", [])
        wanted = _CREATES.get(op)
        if wanted is not None and not any(s.get("ResourceType") == wanted for s in specs):
            specs.append({"ResourceType": wanted, "Tags": []})
        for spec in specs:
            self._tag_list(op, spec.setdefault("Tags", []))

    @staticmethod
    def _named_ids(params: Mapping[str, Any]) -> list[str]:
        ids: list[str] = []
        for key, value in params.items():
            if key in _USED_ONLY or not key.endswith(("Id", "Ids")):
                continue
            values = value if isinstance(value, list) else [value]
            ids += [v for v in values if isinstance(v, str) and _RESOURCE_ID.match(v)]
        return ids

    def _untagged(self, service: str, ids: Sequence[str]) -> list[str]:
        """The ids among ``ids`` without this run's tag (a part counts as its owner's: an
        association id as its route table's, a listener or rule ARN as its load balancer's)."""
        resolved = {i: self._owner_of(service, i) for i in ids}
        deadline, delay = time.monotonic() + self.settle_seconds, 0.1
        missing = self._untagged_now(service, sorted(set(resolved.values())))
        while missing and time.monotonic() < deadline:
            time.sleep(delay)  # eventual consistency, bounded by the deadline
            delay = min(delay * 2, 1.0)
            missing = self._untagged_now(service, sorted(missing))
        return [i for i in ids if resolved[i] in missing]

    def _untagged_now(self, service: str, owners: Sequence[str]) -> set[str]:
        reader = self.readers[service]
        tagged: set[str] = set()
        if service == "ec2":
            for start in range(0, len(owners), 100):
                filters: list[FilterTypeDef] = [
                    {"Name": "resource-id", "Values": list(owners[start : start + 100])},
                    {"Name": "key", "Values": [RUN_TAG]},
                ]
                reply = reader.describe_tags(Filters=filters)
                tagged |= {
                    t["ResourceId"] for t in reply.get("Tags", []) if t.get("Value") == self.run_id
                }
            return set(owners) - tagged
        key = "LoadBalancerNames" if service == "elb" else "ResourceArns"
        for owner in owners:  # one at a time: a name AWS does not know fails the whole call
            try:
                reply = reader.describe_tags(**{key: [owner]})
            except ClientError:
                continue  # not found: nothing of the run's
            for description in reply.get("TagDescriptions", []):
                if any(
                    t.get("Key") == RUN_TAG and t.get("Value") == self.run_id
                    for t in description.get("Tags", [])
                ):
                    tagged.add(owner)
        return set(owners) - tagged

    def _owner_of(self, service: str, resource_id: str) -> str:
        if service == "elbv2":
            return lb_arn_of(resource_id)
        if service != "ec2" or not resource_id.startswith("rtbassoc-"):
            return resource_id
        tables = self.readers["ec2"].describe_route_tables(
            Filters=[{"Name": "association.route-table-association-id", "Values": [resource_id]}]
        )["RouteTables"]
        return str(tables[0]["RouteTableId"]) if tables else resource_id


def lb_arn_of(arn: str) -> str:
    """The load balancer ARN a listener or rule ARN belongs to (other ARNs unchanged):
    ``...:listener/net/name/lb-id/listener-id`` is part of ``...:loadbalancer/net/name/lb-id``."""
    for part, keep in ((":listener-rule/", 3), (":listener/", 3)):
        if part in arn:
            head, tail = arn.split(part, 1)
            return f"{head}:loadbalancer/{'/'.join(tail.split('/')[:keep])}"
    return arn


def _boto_service(client: Any) -> str:
    """boto3's name of a client's service (``ec2``, ``elb``, ``elbv2``)."""
    return str(client.meta.service_model.service_name)


# --- the plan ------------------------------------------------------------------------------


def plan_up(spec: TopologySpec, run_id: str) -> list[str]:
    """What a run creates for ``spec``, one line each (nothing is asked of AWS)."""
    tag = f"tagged {RUN_TAG}={run_id}"
    lines = [f"create vpc {spec.vpc_cidr} ({spec.cluster_id}), {tag}"]
    if spec.public:
        lines.append(f"create internet-gateway attached to that vpc, {tag}")
    lines.append(f"create route-table{' with 0.0.0.0/0 to it' if spec.public else ''}, {tag}")
    lines += [
        f"create subnet {cidr} in {zone}, {tag}" for zone, cidr in spec.subnet_cidrs().items()
    ]
    lines.append(f"create security-group {spec.group_name} with its self rule, {tag}")
    lines += [
        f"run instance {node.name} ({node.instance_type}, {node.private_ip} in {node.zone}, "
        f"Amazon image {IMAGE_NAME}), {tag}"
        for node in spec.nodes
    ]
    return lines


def account_credentials() -> Credentials:
    """The credentials of boto3's usual chain (the recording proxy signs the controller's calls
    with them again); a :class:`RealAwsError` when there are none."""
    credentials = boto3.session.Session().get_credentials()
    if credentials is None:
        raise RealAwsError("boto3 finds no AWS credentials in this environment")
    return credentials


def default_region() -> str | None:
    """The region of boto3's usual chain (``AWS_REGION``, ``AWS_DEFAULT_REGION``, profile)."""
    region = boto3.session.Session().region_name
    return str(region) if region else None


def run_spec(run_id: str, region: str, *, nodes: int, vpc_cidr: str | None = None) -> TopologySpec:
    """The world a run creates: the lab's topology under the run's cluster id, two zones,
    ``nodes`` nodes of :data:`INSTANCE_TYPE` (the first the control plane)."""
    zones = (f"{region}a", f"{region}b")
    spec = TopologySpec(cluster_id=cluster_id_for(run_id), region=region, zones=zones)
    if vpc_cidr:
        spec = dataclasses.replace(spec, vpc_cidr=vpc_cidr)
    subnets = [ipaddress.ip_network(c) for c in spec.subnet_cidrs().values()]
    node_specs = tuple(
        NodeSpec(
            name=f"{spec.cluster_id}-node-{index}",
            private_ip=str(subnets[index % 2].network_address + 10 + index // 2),
            zone=zones[index % 2],
            instance_type=INSTANCE_TYPE,
        )
        for index in range(nodes)
    )
    return dataclasses.replace(spec, nodes=node_specs)
