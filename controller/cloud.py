"""The cloud provider contract: what generic controllers may ask of a cloud.

Mirrors kubernetes/cloud-provider's ``cloud.go`` split. The generic controllers in
``controller/`` (service, node, node lifecycle) see only the small capability protocols
below; the AWS implementation lives in ``controller/aws/`` and an in-memory fake lives in
``controller/fake.py`` for unit tests. Nothing here knows about boto3 or about the lab.

Contract rules every implementation keeps:

* Inputs are read-only. ``Service`` and ``Node`` are frozen snapshots of the API objects;
  implementations never mutate them and never write to Kubernetes.
* ``ensure_load_balancer_deleted`` is idempotent: a missing load balancer is success.
* "Not found" is not "stopped": ``instance_exists`` answers ``False`` only when the cloud
  positively says the instance is gone (or terminated); a failed lookup raises.
* Errors carry intent: :class:`RetryAfter` asks the work queue for a specific delay,
  :class:`InvalidServiceConfig` means user input is wrong (a Warning event, no AWS mutation),
  :class:`ImplementedElsewhere` means another controller owns this Service. Only the work
  queue decides requeueing and backoff; implementations never sleep-and-retry on their own
  except where upstream does so inside one call (security-group deletion backoff).
  ``RetryAfter`` is the runtime's (``controller.runtime.retry``, re-exported here), so the
  work queue that interprets it depends on nothing of this contract; unlike the errors below
  it is not a :class:`CloudError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NewType, Protocol, runtime_checkable

# The retry vocabulary belongs to the runtime's work queue; re-exported for implementations.
from controller.runtime.retry import RetryAfter as RetryAfter  # noqa: PLC0414 (explicit re-export)

ProviderID = NewType("ProviderID", str)
InstanceID = NewType("InstanceID", str)
ServiceKey = NewType("ServiceKey", str)  # "<namespace>/<name>"

# Well-known names shared by the generic controllers and the AWS implementation.
TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
TAINT_SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
TAINT_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
LABEL_EXCLUDE_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_LEGACY_MASTER = "node-role.kubernetes.io/master"
ANNOTATION_PROVIDED_NODE_IP = "alpha.kubernetes.io/provided-node-ip"
LB_FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


class CloudError(Exception):
    """Base class of every error a cloud implementation raises on purpose."""


class ImplementedElsewhere(CloudError):
    """Another controller owns this Service's load balancer (e.g. NLB via the LB controller)."""


class InstanceNotFound(CloudError):
    """The node could not be mapped to an instance (a lookup miss, not proof of absence)."""


class InvalidInstanceID(CloudError):
    """The cloud says the instance id is malformed (EC2 ``InvalidID``): no call can succeed."""


class InvalidServiceConfig(CloudError):
    """The Service's annotations or spec are invalid; nothing was changed in the cloud.

    ``field`` names the annotation or spec field and ``value`` the offending value, so the
    service controller can put both in its Warning event.
    """

    def __init__(self, field: str, value: str, reason: str) -> None:
        super().__init__(f"invalid {field}={value!r}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str | None = None


@dataclass(frozen=True)
class NodeAddress:
    type: str  # InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname
    address: str


@dataclass(frozen=True)
class Node:
    """A read-only snapshot of a ``core/v1`` Node with the fields controllers use."""

    name: str
    uid: str = ""
    provider_id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    addresses: tuple[NodeAddress, ...] = ()
    ready: bool | None = None  # None: no Ready condition (or Unknown)
    creation_timestamp: str = ""
    deleting: bool = False

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Node:
        """Build from the JSON form of a Node (``ApiClient.sanitize_for_serialization``)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        ready: bool | None = None
        for cond in status.get("conditions") or ():
            if cond.get("type") == "Ready":
                ready = {"True": True, "False": False}.get(cond.get("status", ""))
        return cls(
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            provider_id=spec.get("providerID") or "",
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            taints=tuple(
                Taint(key=t["key"], effect=t.get("effect", ""), value=t.get("value"))
                for t in spec.get("taints") or ()
            ),
            addresses=tuple(
                NodeAddress(type=a["type"], address=a["address"])
                for a in status.get("addresses") or ()
            ),
            ready=ready,
            creation_timestamp=meta.get("creationTimestamp") or "",
            deleting=bool(meta.get("deletionTimestamp")),
        )

    def has_taint(self, key: str) -> bool:
        return any(t.key == key for t in self.taints)


@dataclass(frozen=True)
class ServicePort:
    port: int
    protocol: str = "TCP"
    node_port: int = 0
    name: str = ""
    target_port: int | str | None = None
    app_protocol: str | None = None


@dataclass(frozen=True)
class Service:
    """A read-only snapshot of a ``core/v1`` Service with the fields load balancers use."""

    namespace: str
    name: str
    uid: str
    type: str = "LoadBalancer"
    annotations: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[ServicePort, ...] = ()
    load_balancer_source_ranges: tuple[str, ...] = ()
    load_balancer_class: str | None = None
    external_traffic_policy: str = "Cluster"
    health_check_node_port: int = 0
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    status_ingress: tuple[Mapping[str, str], ...] = ()
    session_affinity: str = "None"
    load_balancer_ip: str = ""

    @property
    def key(self) -> ServiceKey:
        return ServiceKey(f"{self.namespace}/{self.name}")

    @classmethod
    def from_api(cls, obj: Mapping[str, Any]) -> Service:
        """Build from the JSON form of a Service."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        lb_status = (obj.get("status") or {}).get("loadBalancer") or {}
        return cls(
            namespace=meta.get("namespace", "default"),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            type=spec.get("type") or "ClusterIP",
            annotations=dict(meta.get("annotations") or {}),
            ports=tuple(
                ServicePort(
                    port=int(p["port"]),
                    protocol=p.get("protocol") or "TCP",
                    node_port=int(p.get("nodePort") or 0),
                    name=p.get("name") or "",
                    target_port=p.get("targetPort"),
                    app_protocol=p.get("appProtocol"),
                )
                for p in spec.get("ports") or ()
            ),
            load_balancer_source_ranges=tuple(spec.get("loadBalancerSourceRanges") or ()),
            load_balancer_class=spec.get("loadBalancerClass"),
            external_traffic_policy=spec.get("externalTrafficPolicy") or "Cluster",
            health_check_node_port=int(spec.get("healthCheckNodePort") or 0),
            finalizers=tuple(meta.get("finalizers") or ()),
            deleting=bool(meta.get("deletionTimestamp")),
            status_ingress=tuple(lb_status.get("ingress") or ()),
            session_affinity=spec.get("sessionAffinity") or "None",
            load_balancer_ip=spec.get("loadBalancerIP") or "",
        )


@dataclass(frozen=True)
class LoadBalancerIngress:
    hostname: str = ""
    ip: str = ""


@dataclass(frozen=True)
class LoadBalancerStatus:
    ingress: tuple[LoadBalancerIngress, ...] = ()

    def to_api(self) -> dict[str, Any]:
        out: list[dict[str, str]] = []
        for ing in self.ingress:
            item: dict[str, str] = {}
            if ing.hostname:
                item["hostname"] = ing.hostname
            if ing.ip:
                item["ip"] = ing.ip
                item["ipMode"] = "VIP"
            out.append(item)
        return {"ingress": out} if out else {}


@dataclass(frozen=True)
class InstanceMetadata:
    provider_id: ProviderID
    instance_type: str
    node_addresses: tuple[NodeAddress, ...]
    zone: str
    region: str
    additional_labels: Mapping[str, str] = field(default_factory=dict)


class LoadBalancer(Protocol):
    """Service load balancers (upstream ``cloudprovider.LoadBalancer``)."""

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        """Return (status, exists). Never mutates anything."""
        ...

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        """The cloud name for the Service's load balancer (``a`` + uid without dashes)[:32]."""
        ...

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Create or reconcile the load balancer so it serves ``service`` on ``nodes``.

        Raises :class:`InvalidServiceConfig` before any mutation when input is invalid.
        """
        ...

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """The node set changed: update backends (and node security-group rules) only."""
        ...

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        """Delete the load balancer and what it owns. Idempotent; absent is success."""
        ...


@runtime_checkable
class SyncWaves(Protocol):
    """Optional for a :class:`LoadBalancer`: told when a burst of syncs (a *wave*) starts and
    ends, so it may share reads across them (``controller.aws.wave``). ``size``: the syncs
    the wave is known to hold; a wave may grow while it runs."""

    def begin_wave(self, size: int) -> None: ...

    def grow_wave(self, was: int, now: int) -> None: ...

    def end_wave(self, size: int) -> None: ...


class InstancesV2(Protocol):
    """Node to instance mapping (upstream ``cloudprovider.InstancesV2``)."""

    def instance_exists(self, node: Node) -> bool:
        """False only when the instance is positively gone or terminated; raises on errors."""
        ...

    def instance_shutdown(self, node: Node) -> bool:
        """True only when the instance is ``stopped``."""
        ...

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        """Provider id, type, addresses, zone, region and extra labels for ``node``."""
        ...


class InstanceTags(Protocol):
    """Tags on the instance behind a Node (upstream cloud-provider-aws ``TagResource`` and
    ``UntagResource``, used by its tagging controller; not part of ``cloudprovider``)."""

    def instance_id(self, provider_id: str) -> InstanceID | None:
        """The instance a providerID names; ``None`` for a node without a taggable instance
        (Fargate). Raises :class:`CloudError` when the providerID cannot be read."""
        ...

    def tag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        """Add ``tags``. Raises :class:`InstanceNotFound` when the cloud does not know the
        instance and :class:`InvalidInstanceID` when the id is malformed."""
        ...

    def untag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        """Remove ``tags`` where the instance still carries them with these values; an
        instance that does not exist is success. Raises :class:`InvalidInstanceID`."""
        ...


class Cloud(Protocol):
    """A cloud provider: the capabilities it offers (``None`` when unsupported)."""

    @property
    def provider_name(self) -> str: ...

    def load_balancer(self) -> LoadBalancer | None: ...

    def instances_v2(self) -> InstancesV2 | None: ...

    def instance_tags(self) -> InstanceTags | None: ...


def load_balancer_name(service: Service) -> str:
    """Upstream ``DefaultLoadBalancerName``: ``"a" + uid`` without dashes, cut to 32 chars."""
    return ("a" + service.uid.replace("-", ""))[:32]
