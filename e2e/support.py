"""Shared vocabulary of the e2e catalog: object builders, waits and evidence snapshots.

Scenario modules (``e2e/test_<id>.py``) use only these helpers, the ``lab`` fixtures and
public clients (the official Kubernetes client, boto3 against the lab's endpoint, the trail),
so every module runs unchanged on any backend. Evidence is captured as plain values (frozen
sets of rules, event tuples) so assertions read as the catalog's sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubernetes import client

from lab.compose import wait_for  # also the scenarios' wait (they import it from here)

if TYPE_CHECKING:
    from lab.traffic.report import TrafficReport

ANN = "service.beta.kubernetes.io/aws-load-balancer-"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


# --- Kubernetes objects -----------------------------------------------------------------------


def settle(lab: Any, timeout: float = 30.0) -> None:
    """The barrier (``Lab.settle``, ``lab.settle``): the lab's own components have caught up
    and have nothing left to do now. On sim that is every part of the cluster but the
    controller under test; on kind only the AWS side (the health checks) and the metadata
    service: the cluster's components are real there, so a case that runs on kind waits for
    their evidence instead."""
    lab.settle(timeout=timeout)


class _Quiet:
    """The default narrator of a scenario's steps (an ``e2e.catalog.Narrator``): tests say
    nothing (``invoke lab.repro`` passes one that prints each step and its result)."""

    def __call__(self, text: str) -> None:
        pass

    def result(self, text: str) -> None:
        pass


quiet = _Quiet()


def answered_by(report: TrafficReport) -> str:
    """Where a traffic report's requests went, in one line (a replay step's result)."""
    pods = ", ".join(f"{pod} {n}" for pod, n in sorted(report.answered.items()))
    lost = report.requests - report.answered_total
    why = "; ".join(sorted({reason for _, reason in report.dropped}))
    return (
        f"{report.answered_total} of {report.requests} answered"
        + (f" ({pods})" if pods else "")
        + (f"; {lost} lost: {why}" if lost else "")
    )


def lb_service(
    name: str,
    *,
    annotations: Mapping[str, str] | None = None,
    ports: Iterable[int] = (80,),
    namespace: str = "default",
    source_ranges: Iterable[str] = (),
    external_traffic_policy: str | None = None,
) -> dict[str, Any]:
    """A ``type: LoadBalancer`` Service body."""
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "selector": {"app": name},
        "ports": [
            {"name": f"p{port}", "port": port, "targetPort": 8080, "protocol": "TCP"}
            for port in ports
        ],
    }
    if source_ranges:
        spec["loadBalancerSourceRanges"] = list(source_ranges)
    if external_traffic_policy:
        spec["externalTrafficPolicy"] = external_traffic_policy
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def create_service(core: client.CoreV1Api, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"].get("namespace", "default")
    created = core.create_namespaced_service(ns, body)
    return client.ApiClient().sanitize_for_serialization(created)  # type: ignore[no-any-return]


def get_service(core: client.CoreV1Api, name: str, namespace: str = "default") -> Any:
    try:
        return core.read_namespaced_service(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wait_hostname(
    core: client.CoreV1Api, name: str, namespace: str = "default", timeout: float = 20.0
) -> str:
    """Wait for ``status.loadBalancer.ingress[0].hostname`` and return it."""

    def hostname() -> str | None:
        svc = get_service(core, name, namespace)
        ingress = (svc.status.load_balancer.ingress or []) if svc else []
        return ingress[0].hostname if ingress and ingress[0].hostname else None

    return str(wait_for(hostname, timeout=timeout, what=f"an ELB hostname on {name}"))


def wait_gone(
    core: client.CoreV1Api, name: str, namespace: str = "default", timeout: float = 20.0
) -> None:
    wait_for(
        lambda: get_service(core, name, namespace) is None,
        timeout=timeout,
        what=f"Service {namespace}/{name} to be gone",
    )


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str
    count: int


def events_for(
    core: client.CoreV1Api, kind: str, name: str, namespace: str = "default"
) -> list[Event]:
    """core/v1 Events about one object, oldest first."""
    listed = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
    )
    items = sorted(
        listed.items,
        key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp,
    )
    return [Event(e.type, e.reason, e.message or "", e.count or 1) for e in items]


def reasons(events: Iterable[Event]) -> list[str]:
    return [e.reason for e in events]


def node_taint_keys(node: Any) -> set[str]:
    return {t.key for t in (node.spec.taints or [])}


# --- AWS evidence -----------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Rule:
    """One ingress permission, ungrouped: protocol, ports and a single source."""

    protocol: str
    from_port: int | None
    to_port: int | None
    source: str  # a group id or a CIDR


def ingress_rules(ec2: Any, group_id: str) -> frozenset[Rule]:
    """The group's ingress rules, one per (permission, source)."""
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    rules: set[Rule] = set()
    for perm in group.get("IpPermissions", []):
        proto = str(perm.get("IpProtocol"))
        lo, hi = perm.get("FromPort"), perm.get("ToPort")
        for pair in perm.get("UserIdGroupPairs", []):
            rules.add(Rule(proto, lo, hi, pair["GroupId"]))
        for rng in perm.get("IpRanges", []):
            rules.add(Rule(proto, lo, hi, rng["CidrIp"]))
    return frozenset(rules)


def all_traffic_from(group_id: str) -> Rule:
    return Rule("-1", None, None, group_id)


def group_exists(ec2: Any, group_id: str) -> bool:
    found = ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [group_id]}])
    return bool(found["SecurityGroups"])


def group_id_by_name(ec2: Any, name: str) -> str | None:
    found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])
    groups = found["SecurityGroups"]
    return str(groups[0]["GroupId"]) if groups else None


def describe_elb(elb: Any, name: str) -> dict[str, Any] | None:
    try:
        found = elb.describe_load_balancers(LoadBalancerNames=[name])
    except elb.exceptions.AccessPointNotFoundException:
        return None
    descs = found["LoadBalancerDescriptions"]
    return dict(descs[0]) if descs else None


def elb_name(service: Mapping[str, Any]) -> str:
    """Upstream's name: ``a`` + uid without dashes, cut to 32 characters."""
    return ("a" + str(service["metadata"]["uid"]).replace("-", ""))[:32]


def registered_instances(elb: Any, name: str) -> set[str]:
    desc = describe_elb(elb, name)
    return {i["InstanceId"] for i in (desc or {}).get("Instances", [])}


# --- user-made groups, controller calls (lb-walkthrough, k8s-84256) --------------------------

#: Verbs of AWS actions that change something (EC2 security groups, Classic ELB).
MUTATING_VERBS = (
    "Create",
    "Delete",
    "Authorize",
    "Revoke",
    "Register",
    "Deregister",
    "Modify",
    "Configure",
    "Apply",
    "Attach",
    "Detach",
    "Set",
    "Add",
    "Remove",
)
CONTROLLER_USER_AGENT = "ccm-lab-controller"


def cluster_tag(cluster_id: str) -> str:
    return f"kubernetes.io/cluster/{cluster_id}"


def create_user_group(
    ec2: Any,
    *,
    vpc_id: str,
    name: str,
    tags: Mapping[str, str] | None = None,
    rules: Iterable[Rule] = (),
) -> str:
    """A security group made by a user (not the controller), with ``tags`` and ``rules``."""
    kwargs: dict[str, Any] = {"GroupName": name, "Description": f"{name} (user)", "VpcId": vpc_id}
    if tags:
        kwargs["TagSpecifications"] = [
            {
                "ResourceType": "security-group",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ]
    group_id = str(ec2.create_security_group(**kwargs)["GroupId"])
    perms: list[dict[str, Any]] = []
    for rule in rules:
        perm: dict[str, Any] = {"IpProtocol": rule.protocol}
        if rule.from_port is not None:
            perm["FromPort"] = rule.from_port
        if rule.to_port is not None:
            perm["ToPort"] = rule.to_port
        if rule.source.startswith("sg-"):
            perm["UserIdGroupPairs"] = [{"GroupId": rule.source}]
        else:
            perm["IpRanges"] = [{"CidrIp": rule.source}]
        perms.append(perm)
    if perms:
        ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=perms)
    return group_id


def controller_calls(trail: Any, *, since_seq: int = 0) -> list[Any]:
    """Trail events the controller made (its User-Agent names ``ccm-lab-controller``)."""
    return [
        e for e in trail.calls(since_seq=since_seq) if CONTROLLER_USER_AGENT in (e.user_agent or "")
    ]


def is_mutating(action: str) -> bool:
    return action.startswith(MUTATING_VERBS)


def finalizers(core: client.CoreV1Api, name: str, namespace: str = "default") -> list[str]:
    """The Service's finalizers (empty when it is gone)."""
    svc = get_service(core, name, namespace)
    return list(svc.metadata.finalizers or []) if svc is not None else []


# --- NLB node rules (k8s-57568, k8s-70421, k8s-98278) ----------------------------------------

#: The description prefix of every node rule the controller adds for an NLB.
NLB_RULE = "kubernetes.io/rule/nlb/"
#: A client outside the VPC (TEST-NET-3): what ``loadBalancerSourceRanges`` 0.0.0.0/0 admits.
OUTSIDE_CLIENT = "203.0.113.10"


@dataclass(frozen=True, order=True)
class DescribedRule:
    """An IPv4 ingress rule with its description."""

    protocol: str
    from_port: int | None
    to_port: int | None
    cidr: str
    description: str


def described_rules(ec2: Any, group_id: str) -> frozenset[DescribedRule]:
    """The group's IPv4 CIDR rules with their descriptions."""
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    return frozenset(
        DescribedRule(
            str(perm.get("IpProtocol")),
            perm.get("FromPort"),
            perm.get("ToPort"),
            rng["CidrIp"],
            rng.get("Description", ""),
        )
        for perm in group.get("IpPermissions", [])
        for rng in perm.get("IpRanges", [])
    )


def nlb_rules(ec2: Any, group_id: str) -> frozenset[DescribedRule]:
    """The group's rules the controller added for NLBs (by description)."""
    return frozenset(
        r for r in described_rules(ec2, group_id) if r.description.startswith(NLB_RULE)
    )


def nlb_service(name: str, *, port: int = 80, node_port: int | None = None) -> dict[str, Any]:
    """A ``type: LoadBalancer`` Service with ``aws-load-balancer-type: nlb``."""
    body = lb_service(name, annotations={ANN + "type": "nlb"}, ports=(port,))
    if node_port is not None:
        body["spec"]["ports"][0]["nodePort"] = node_port
    return body


def node_port_of(core: client.CoreV1Api, name: str, namespace: str = "default") -> int:
    svc = get_service(core, name, namespace)
    return int(svc.spec.ports[0].node_port)


def describe_nlb(elbv2: Any, name: str) -> dict[str, Any] | None:
    try:
        found = elbv2.describe_load_balancers(Names=[name])
    except elbv2.exceptions.LoadBalancerNotFoundException:
        return None
    lbs = found["LoadBalancers"]
    return dict(lbs[0]) if lbs else None


def instance_groups(ec2: Any, instance_id: str) -> list[str]:
    """The security groups of the instance (all its interfaces: EC2's "member of")."""
    [res] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    [inst] = res["Instances"]
    return [g["GroupId"] for g in inst.get("SecurityGroups", [])]


#: the Events that end a service controller's sync of one Service, upstream's and ours alike
#: (``EnsuredLoadBalancer`` after an ensure; after a node sync's update ``UpdatedLoadBalancer``,
#: or ``UnAvailableLoadBalancer`` when no node is left); a failure ends one too
ENSURE_OUTCOMES = ("EnsuredLoadBalancer", "SyncLoadBalancerFailed")
NODE_SYNC_OUTCOMES = ("UpdatedLoadBalancer", "UnAvailableLoadBalancer", "UpdateLoadBalancerFailed")


def sync_count(
    core: client.CoreV1Api, service: str, outcomes: Iterable[str], namespace: str = "default"
) -> int:
    """How many Events of ``outcomes`` the Service has had (the recorder's counts summed)."""
    wanted = set(outcomes)
    return sum(
        e.count for e in events_for(core, "Service", service, namespace) if e.reason in wanted
    )


def wait_synced(
    core: client.CoreV1Api,
    service: str,
    outcomes: Iterable[str],
    before: int,
    namespace: str = "default",
) -> None:
    """Wait for the evidence that the controller finished the sync it started: one more Event
    of ``outcomes`` on the Service than ``before`` (:func:`sync_count`)."""
    wait_for(
        lambda: sync_count(core, service, outcomes, namespace) > before,
        timeout=30,
        what=f"the controller's {' / '.join(outcomes)} event on Service {namespace}/{service}",
    )


def node_leaves_and_joins(lab: Any, name: str, service: str = "web") -> int:
    """Node ``name`` leaves the cluster, the NLB's targets follow, and it registers again; a
    node sync for each, each waited for by its outcome's Event on ``service``
    (:data:`NODE_SYNC_OUTCOMES`). Returns the trail's last sequence number before the node
    left."""
    trail = lab.aws.trail
    core = client.CoreV1Api(lab.api_client())
    mark = trail.last_seq
    for change in (lab.sim.remove_node, lab.sim.reregister):
        synced = sync_count(core, service, NODE_SYNC_OUTCOMES)
        change(name)
        wait_synced(core, service, NODE_SYNC_OUTCOMES, synced)
    return int(mark)
