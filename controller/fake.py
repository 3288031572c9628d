"""In-memory fakes for controller unit tests: a cloud and a Kubernetes API.

:class:`FakeCloud` implements the provider contract (``controller.cloud``): load balancers
keyed by Service, instances with states, eventually consistent lookups (``hide``), fault
injection per method, and a call log so tests assert what the controllers asked for. It
validates one annotation (``IDLE_TIMEOUT_ANNOTATION``, an integer 1..4000) so the
``InvalidServiceConfig`` path can be exercised without AWS.

:class:`FakeKube` implements :class:`controller.runtime.kube.KubeClient` with the same
observable semantics as the apiserver for what the controllers use: resourceVersions,
conflicts on stale PUTs, finalizers holding deletion, status patches, an event log for
watches (with compaction for 410 and ``drop_watches`` for cut streams), Events and Leases.
Its per-kind stores are event sources, so controllers wire to it exactly as to informers
and unit tests stay synchronous and deterministic.

Neither fake sleeps or uses threads of its own; both are safe to call from several threads.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controller.cloud import (
    CloudError,
    InstanceID,
    InstanceMetadata,
    InstanceNotFound,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    ProviderID,
    Service,
    ServiceKey,
    load_balancer_name,
)
from controller.runtime.informer import MemoryStore, object_key
from controller.runtime.kube import (
    AlreadyExists,
    Conflict,
    Expired,
    Kind,
    NotFound,
    Obj,
    Unavailable,
    WatchEvent,
)

IDLE_TIMEOUT_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-connection-idle-timeout"


# ---------------------------------------------------------------------------------------
# cloud
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FakeInstance:
    instance_id: str
    zone: str = "us-east-1a"
    region: str = "us-east-1"
    zone_id: str = "use1-az1"
    instance_type: str = "m5.large"
    state: str = "running"  # pending | running | stopping | stopped | shutting-down | terminated
    private_ip: str = "10.0.0.10"
    private_dns: str = ""
    public_ip: str = ""

    @property
    def provider_id(self) -> ProviderID:
        return ProviderID(f"aws:///{self.zone}/{self.instance_id}")

    def addresses(self) -> tuple[NodeAddress, ...]:
        dns = self.private_dns or f"ip-{self.private_ip.replace('.', '-')}.ec2.internal"
        out = [NodeAddress("InternalIP", self.private_ip)]
        if self.public_ip:
            out.append(NodeAddress("ExternalIP", self.public_ip))
        out += [NodeAddress("InternalDNS", dns), NodeAddress("Hostname", dns)]
        return tuple(out)


@dataclass
class FakeLoadBalancer:
    name: str
    service: Service
    nodes: tuple[str, ...]
    hostname: str


@dataclass
class FakeCloud:
    """A cloud with load balancers and instances, all in memory."""

    load_balancers: dict[ServiceKey, FakeLoadBalancer] = field(default_factory=dict)
    instances: dict[str, FakeInstance] = field(default_factory=dict)
    node_names: dict[str, str] = field(default_factory=dict)  # node name -> instance id
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, service key / node)
    hidden: set[str] = field(default_factory=set)  # instance ids lookups miss for now
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # instance id -> tags
    _faults: dict[str, list[Exception]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # -- test controls ----------------------------------------------------------------------
    def add_instance(self, instance: FakeInstance, *, node_name: str | None = None) -> FakeInstance:
        with self._lock:
            self.instances[instance.instance_id] = instance
            if node_name:
                self.node_names[node_name] = instance.instance_id
        return instance

    def set_state(self, instance_id: str, state: str) -> None:
        with self._lock:
            self.instances[instance_id] = replace(self.instances[instance_id], state=state)

    def remove_instance(self, instance_id: str) -> None:
        with self._lock:
            self.instances.pop(instance_id, None)

    def hide(self, instance_id: str, hidden: bool = True) -> None:
        """Make lookups of ``instance_id`` miss (eventual consistency right after launch)."""
        with self._lock:
            (self.hidden.add if hidden else self.hidden.discard)(instance_id)

    def fail(self, method: str, *errors: Exception) -> None:
        """Make the next ``len(errors)`` calls of ``method`` raise these errors in turn."""
        with self._lock:
            self._faults.setdefault(method, []).extend(errors)

    def calls_of(self, method: str) -> list[str]:
        with self._lock:
            return [target for m, target in self.calls if m == method]

    def _call(self, method: str, target: str) -> None:
        with self._lock:
            self.calls.append((method, target))
            pending = self._faults.get(method)
            if pending:
                raise pending.pop(0)

    # -- Cloud ------------------------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        return "fake"

    def load_balancer(self) -> FakeCloud:
        return self

    def instances_v2(self) -> FakeCloud:
        return self

    def instance_tags(self) -> FakeCloud:
        return self

    # -- LoadBalancer -----------------------------------------------------------------------
    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        self._call("get_load_balancer", service.key)
        with self._lock:
            lb = self.load_balancers.get(service.key)
        if lb is None:
            return None, False
        return LoadBalancerStatus((LoadBalancerIngress(hostname=lb.hostname),)), True

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return load_balancer_name(service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        self._call("ensure_load_balancer", service.key)
        raw = service.annotations.get(IDLE_TIMEOUT_ANNOTATION)
        if raw is not None and not (raw.isdigit() and 1 <= int(raw) <= 4000):
            raise InvalidServiceConfig(IDLE_TIMEOUT_ANNOTATION, raw, "want an integer 1..4000")
        name = load_balancer_name(service)
        hostname = f"{name}-123456789.us-east-1.elb.amazonaws.com"
        with self._lock:
            self.load_balancers[service.key] = FakeLoadBalancer(
                name, service, tuple(sorted(n.name for n in nodes)), hostname
            )
        return LoadBalancerStatus((LoadBalancerIngress(hostname=hostname),))

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self._call("update_load_balancer", service.key)
        with self._lock:
            lb = self.load_balancers.get(service.key)
            if lb is None:
                raise RuntimeError(f"load balancer for {service.key} not found")
            lb.nodes = tuple(sorted(n.name for n in nodes))

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        self._call("ensure_load_balancer_deleted", service.key)
        with self._lock:
            self.load_balancers.pop(service.key, None)

    # -- InstancesV2 ------------------------------------------------------------------------
    def _lookup(self, node: Node) -> FakeInstance | None:
        """The instance, ``None`` when positively absent; raises on a name-lookup miss."""
        with self._lock:
            if node.provider_id:
                iid = node.provider_id.rsplit("/", 1)[-1]
            elif node.name in self.node_names:
                iid = self.node_names[node.name]
            else:
                raise InstanceNotFound(f"no instance found for node {node.name!r}")
            if iid in self.hidden:
                return None
            return self.instances.get(iid)

    def instance_exists(self, node: Node) -> bool:
        self._call("instance_exists", node.name)
        inst = self._lookup(node)
        return inst is not None and inst.state != "terminated"

    def instance_shutdown(self, node: Node) -> bool:
        self._call("instance_shutdown", node.name)
        inst = self._lookup(node)
        return inst is not None and inst.state == "stopped"

    # -- InstanceTags -------------------------------------------------------------------------
    def instance_id(self, provider_id: str) -> InstanceID | None:
        """The providerID's last segment; ``None`` for ``fargate-…``; refuses the rest."""
        iid = provider_id.rsplit("/", 1)[-1]
        if iid.startswith("fargate-"):
            return None
        if not iid.startswith("i-"):
            raise CloudError(f"invalid providerID {provider_id!r}")
        return InstanceID(iid)

    def tag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        self._call("tag_instance", instance_id)
        with self._lock:
            if instance_id in self.hidden or instance_id not in self.instances:
                raise InstanceNotFound(f"instance {instance_id} not found")
            self.tags.setdefault(instance_id, {}).update(tags)

    def untag_instance(
        self, instance_id: InstanceID, tags: Mapping[str, str], *, batched: bool = False
    ) -> None:
        self._call("untag_instance", instance_id)
        with self._lock:
            have = self.tags.get(instance_id, {})
            for key, value in tags.items():
                if have.get(key) == value:
                    del have[key]

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        self._call("instance_metadata", node.name)
        inst = self._lookup(node)
        if inst is None:
            raise InstanceNotFound(f"instance for node {node.name!r} not found")
        return InstanceMetadata(
            provider_id=inst.provider_id,
            instance_type=inst.instance_type,
            node_addresses=inst.addresses(),
            zone=inst.zone,
            region=inst.region,
            additional_labels={"topology.k8s.aws/zone-id": inst.zone_id},
        )


# ---------------------------------------------------------------------------------------
# kubernetes
# ---------------------------------------------------------------------------------------
class _FakeWatch:
    def __init__(self, kube: FakeKube, kind: Kind, after: int, timeout: float) -> None:
        self._kube = kube
        self._kind = kind
        self._after = after
        self._timeout = timeout
        self._closed = False
        self._generation = kube._watch_generation

    def close(self) -> None:
        self._closed = True
        with self._kube._cond:
            self._kube._cond.notify_all()

    def __iter__(self) -> Iterator[WatchEvent]:
        kube = self._kube
        waited = 0.0
        while not self._closed:
            with kube._cond:
                if kube._watch_generation != self._generation:
                    return  # the "apiserver" cut this stream
                batch = [e for e in kube._log[self._kind] if e[0] > self._after]
                if not batch:
                    if waited >= self._timeout:
                        return
                    kube._cond.wait(0.05)
                    waited += 0.05
                    continue
            for rv, etype, obj in batch:
                self._after = rv
                yield WatchEvent(etype, copy.deepcopy(obj))


class FakeKube:
    """An in-memory apiserver for the objects and verbs the controllers use."""

    def __init__(self) -> None:
        self._rv = itertools.count(1)
        self._head = 0
        self._cond = threading.Condition(threading.RLock())
        self.stores: dict[Kind, MemoryStore] = {"services": MemoryStore(), "nodes": MemoryStore()}
        self._objects: dict[Kind, dict[str, Obj]] = {"services": {}, "nodes": {}}
        self._log: dict[Kind, list[tuple[int, str, Obj]]] = {"services": [], "nodes": []}
        self._compacted: dict[Kind, int] = {"services": 0, "nodes": 0}
        self._watch_generation = 0
        self._watches_held = False
        self.events: list[Obj] = []
        self.leases: dict[str, Obj] = {}
        self.requests: list[tuple[str, str]] = []  # (verb, target) for assertions
        self._faults: dict[str, list[Exception]] = {}

    # -- test controls ----------------------------------------------------------------------
    def fail(self, method: str, *errors: Exception) -> None:
        with self._cond:
            self._faults.setdefault(method, []).extend(errors)

    def _enter(self, method: str, target: str) -> None:
        self.requests.append((method, target))
        pending = self._faults.get(method)
        if pending:
            raise pending.pop(0)

    def compact(self) -> None:
        """Forget the watch history: watches from older resourceVersions get 410."""
        with self._cond:
            for kind in self._log:
                if self._log[kind]:
                    self._compacted[kind] = self._log[kind][-1][0]
                self._log[kind] = []

    def hold_watches(self, held: bool = True) -> None:
        """While held, new watch requests fail with ``Unavailable`` (an apiserver outage)."""
        with self._cond:
            self._watches_held = held

    def drop_watches(self) -> None:
        """End every open watch stream (an apiserver restart or a proxy timeout)."""
        with self._cond:
            self._watch_generation += 1
            self._cond.notify_all()

    def events_for(self, name: str, reason: str | None = None) -> list[Obj]:
        with self._cond:
            return [
                e
                for e in self.events
                if e["involvedObject"]["name"] == name and reason in (None, e["reason"])
            ]

    def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in self.events_for(name)]

    # -- object writes (tests use these to play kubelet / user) ----------------------------
    def _write(self, kind: Kind, etype: str, obj: Obj) -> Obj:
        with self._cond:
            rv = next(self._rv)
            self._head = rv
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(rv)
            key = object_key(obj)
            if etype == "DELETED":
                self._objects[kind].pop(key, None)
            else:
                self._objects[kind][key] = obj
            self._log[kind].append((rv, etype, copy.deepcopy(obj)))
            self._cond.notify_all()
        self.stores[kind].apply(etype, copy.deepcopy(obj))
        return copy.deepcopy(obj)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        with self._cond:
            meta = obj.setdefault("metadata", {})
            if kind == "services":
                meta.setdefault("namespace", "default")
            if object_key(obj) in self._objects[kind]:
                raise AlreadyExists(f"{kind} {object_key(obj)!r} already exists")
            meta.setdefault("uid", f"uid-{meta['name']}-{next(self._rv)}")
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            return self._write(kind, "ADDED", obj)

    def get(self, kind: Kind, key: str) -> Obj:
        with self._cond:
            obj = self._objects[kind].get(key)
            if obj is None:
                raise NotFound(f'{kind} "{key}" not found')
            return copy.deepcopy(obj)

    def update(self, kind: Kind, obj: Obj) -> Obj:
        """Unconditional write of the whole object (tests' kubectl edit)."""
        with self._cond:
            self.get(kind, object_key(obj))
            return self._write(kind, "MODIFIED", obj)

    def delete(self, kind: Kind, key: str) -> None:
        """Delete, honouring finalizers (sets deletionTimestamp while any remain)."""
        with self._cond:
            obj = self.get(kind, key)
            meta = obj["metadata"]
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
                    self._write(kind, "MODIFIED", obj)
                return
            self._write(kind, "DELETED", obj)

    def _finish_delete(self, kind: Kind, obj: Obj) -> Obj:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._write(kind, "DELETED", obj)
        return self._write(kind, "MODIFIED", obj)

    # -- KubeClient -------------------------------------------------------------------------
    def list_objects(self, kind: Kind) -> tuple[list[Obj], str]:
        with self._cond:
            self._enter("list", kind)
            current = [copy.deepcopy(o) for o in self._objects[kind].values()]
            return current, str(self._head)

    def watch_objects(self, kind: Kind, resource_version: str, timeout: float) -> _FakeWatch:
        with self._cond:
            self._enter("watch", kind)
            if self._watches_held:
                raise Unavailable("connection refused (watches held)")
            after = int(resource_version or 0)
            if after < self._compacted[kind]:
                raise Expired(f"too old resource version: {after} ({self._compacted[kind]})")
            return _FakeWatch(self, kind, after, timeout)

    def add_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj:
        with self._cond:
            self._enter("add_service_finalizer", f"{namespace}/{name}")
            obj = self.get("services", f"{namespace}/{name}")
            fins = obj["metadata"].setdefault("finalizers", [])
            if finalizer not in fins:
                fins.append(finalizer)
            return self._write("services", "MODIFIED", obj)

    def remove_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj:
        with self._cond:
            self._enter("remove_service_finalizer", f"{namespace}/{name}")
            obj = self.get("services", f"{namespace}/{name}")
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers") or [] if f != finalizer
            ]
            return self._finish_delete("services", obj)

    def patch_service_load_balancer_status(
        self, namespace: str, name: str, load_balancer: Mapping[str, Any]
    ) -> Obj:
        with self._cond:
            self._enter("patch_service_status", f"{namespace}/{name}")
            obj = self.get("services", f"{namespace}/{name}")
            obj.setdefault("status", {})["loadBalancer"] = copy.deepcopy(dict(load_balancer))
            return self._write("services", "MODIFIED", obj)

    def get_node(self, name: str) -> Obj:
        with self._cond:
            self._enter("get_node", name)
            return self.get("nodes", name)

    def replace_node(self, node: Obj) -> Obj:
        with self._cond:
            name = node["metadata"]["name"]
            self._enter("replace_node", name)
            current = self.get("nodes", name)
            if node["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise Conflict(
                    f'Operation cannot be fulfilled on nodes "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again"
                )
            new = copy.deepcopy(node)
            new["status"] = current.get("status", {})  # PUT on the main resource keeps status
            return self._write("nodes", "MODIFIED", new)

    def patch_node_addresses(self, name: str, addresses: list[dict[str, str]]) -> Obj:
        with self._cond:
            self._enter("patch_node_addresses", name)
            obj = self.get("nodes", name)
            obj.setdefault("status", {})["addresses"] = copy.deepcopy(addresses)
            return self._write("nodes", "MODIFIED", obj)

    def delete_node(self, name: str) -> None:
        with self._cond:
            self._enter("delete_node", name)
            self.delete("nodes", name)

    def create_event(self, namespace: str, event: Obj) -> Obj:
        with self._cond:
            self._enter("create_event", namespace)
            stored = copy.deepcopy(event)
            stored["metadata"]["namespace"] = namespace
            self.events.append(stored)
            return copy.deepcopy(stored)

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        with self._cond:
            self._enter("patch_event", name)
            for ev in self.events:
                if ev["metadata"]["name"] == name and ev["metadata"]["namespace"] == namespace:
                    ev.update(copy.deepcopy(patch))
                    return copy.deepcopy(ev)
            raise NotFound(f'events "{name}" not found')

    def get_lease(self, namespace: str, name: str) -> Obj:
        with self._cond:
            self._enter("get_lease", name)
            lease = self.leases.get(f"{namespace}/{name}")
            if lease is None:
                raise NotFound(f'leases.coordination.k8s.io "{name}" not found')
            return copy.deepcopy(lease)

    def create_lease(self, namespace: str, lease: Obj) -> Obj:
        with self._cond:
            name = lease["metadata"]["name"]
            self._enter("create_lease", name)
            if f"{namespace}/{name}" in self.leases:
                raise AlreadyExists(f'leases.coordination.k8s.io "{name}" already exists')
            stored = copy.deepcopy(lease)
            stored["metadata"]["resourceVersion"] = str(next(self._rv))
            self.leases[f"{namespace}/{name}"] = stored
            return copy.deepcopy(stored)

    def replace_lease(self, namespace: str, name: str, lease: Obj) -> Obj:
        with self._cond:
            self._enter("replace_lease", name)
            current = self.get_lease(namespace, name)
            if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise Conflict(f'Operation cannot be fulfilled on leases "{name}"')
            stored = copy.deepcopy(lease)
            stored["metadata"]["resourceVersion"] = str(next(self._rv))
            self.leases[f"{namespace}/{name}"] = stored
            return copy.deepcopy(stored)
