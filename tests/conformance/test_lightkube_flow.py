"""A cloud controller's calls, made with lightkube (sync and async) against the simulator.

lightkube is a client nobody here wrote, with its own models, request building and watch
loop (over httpx). Each test is one step of what a cloud controller does with a cluster:
initialize Nodes (status, providerID, addresses, conditions, taints), serve a LoadBalancer
Service (status, finalizer), record Events through both Event APIs, hold a leader Lease as
client-go's leader election does, read EndpointSlices, apply with field ownership, and resume
a watch from a resourceVersion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lightkube import ApiError, AsyncClient, Client
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.core_v1 import (
    EventSource,
    LoadBalancerIngress,
    LoadBalancerStatus,
    NodeAddress,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    ObjectReference,
    ServicePort,
    ServiceSpec,
    Taint,
)
from lightkube.models.discovery_v1 import Endpoint, EndpointConditions
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.events_v1 import Event as EventV1
from lightkube.types import PatchType

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Client]:
    client = Client(KubeConfig.from_file(kubeconfig), trust_env=False, field_manager="ccm")
    yield client
    client.close()


def new_node(name: str, ip: str) -> Node:
    """A Node as a kubelet registers it under an external cloud provider."""
    return Node(
        metadata=ObjectMeta(name=name, labels={"kubernetes.io/hostname": name}),
        spec=NodeSpec(
            providerID=f"aws:///us-east-1a/i-{name}",
            taints=[Taint(key=UNINITIALIZED, value="true", effect="NoSchedule")],
        ),
        status=NodeStatus(
            conditions=[NodeCondition(type="Ready", status="False", reason="KubeletNotReady")],
            addresses=[NodeAddress(type="InternalIP", address=ip)],
        ),
    )


def test_nodes_created_listed_and_initialized(kube: Client) -> None:
    for i, name in enumerate(("n1", "n2")):
        created = kube.create(new_node(name, f"10.0.0.{i + 1}"))
        assert created.spec is not None
        assert created.spec.providerID == f"aws:///us-east-1a/i-{name}"
    # a Node keeps the status it was created with (the kubelet registers with one)
    listed = {n.metadata.name: n for n in kube.list(Node, labels={"kubernetes.io/hostname": "n1"})}
    assert list(listed) == ["n1"]
    status = listed["n1"].status
    assert status is not None
    assert status.addresses == [NodeAddress(type="InternalIP", address="10.0.0.1")]

    # the node controller's initialization: addresses and a condition through /status ...
    patched = kube.patch(
        Node.Status,
        "n1",
        {
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "ExternalIP", "address": "54.0.0.1"},
                    {"type": "InternalDNS", "address": "ip-10-0-0-1.ec2.internal"},
                ],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            }
        },
        patch_type=PatchType.MERGE,
    )
    assert patched.status is not None
    assert [a.type for a in patched.status.addresses or []] == [
        "InternalIP",
        "ExternalIP",
        "InternalDNS",
    ]
    # ... a spec change sent to /status is ignored, as the status strategy resets spec
    assert patched.spec is not None
    assert patched.spec.taints is not None
    assert patched.spec.taints[0].key == UNINITIALIZED

    # ... then the uninitialized taint goes and a cloud taint comes, through the main resource
    node = kube.get(Node, "n1")
    assert node.spec is not None
    node.spec.taints = [Taint(key="example.com/maintenance", effect="NoExecute")]
    replaced = kube.replace(node)
    assert replaced.spec is not None
    assert [t.key for t in replaced.spec.taints or []] == ["example.com/maintenance"]
    assert replaced.metadata is not None
    assert node.metadata is not None
    assert int(replaced.metadata.resourceVersion or 0) > int(node.metadata.resourceVersion or 0)
    # a status change sent to the main resource is ignored
    replaced.status = NodeStatus(conditions=[NodeCondition(type="Ready", status="Unknown")])
    again = kube.replace(replaced)
    assert again.status is not None
    assert [(c.type, c.status) for c in again.status.conditions or []] == [("Ready", "True")]

    # a stale write is refused by resourceVersion
    with pytest.raises(ApiError) as stale:
        kube.replace(node)
    assert stale.value.status.code == 409
    assert stale.value.status.reason == "Conflict"


def test_load_balancer_service_status_and_finalizer(kube: Client) -> None:
    svc = kube.create(
        Service(
            metadata=ObjectMeta(name="web", namespace="default"),
            spec=ServiceSpec(
                type="LoadBalancer",
                selector={"app": "web"},
                ports=[ServicePort(port=80, targetPort=8080, protocol="TCP")],
            ),
        )
    )
    assert svc.spec is not None
    assert svc.spec.clusterIP
    assert svc.spec.ports is not None
    assert svc.spec.ports[0].nodePort  # a LoadBalancer Service gets node ports
    assert svc.status is not None
    assert svc.status.loadBalancer == LoadBalancerStatus()

    # the service controller: finalizer first, then the load balancer, then its status
    with_finalizer = kube.patch(
        Service,
        "web",
        {"metadata": {"finalizers": [FINALIZER]}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert with_finalizer.metadata is not None
    assert with_finalizer.metadata.finalizers == [FINALIZER]
    status = kube.patch(
        Service.Status,
        "web",
        {"status": {"loadBalancer": {"ingress": [{"hostname": "web-123.elb.amazonaws.com"}]}}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert status.status is not None
    assert status.status.loadBalancer is not None
    assert status.status.loadBalancer.ingress == [
        LoadBalancerIngress(hostname="web-123.elb.amazonaws.com")
    ]

    # deletion waits on the finalizer; the controller removes it and the Service goes
    kube.delete(Service, "web", namespace="default")
    pending = kube.get(Service, "web", namespace="default")
    assert pending.metadata is not None
    assert pending.metadata.deletionTimestamp is not None
    kube.patch(
        Service,
        "web",
        [{"op": "remove", "path": "/metadata/finalizers/0"}],
        namespace="default",
        patch_type=PatchType.JSON,
    )
    with pytest.raises(ApiError) as gone:
        kube.get(Service, "web", namespace="default")
    assert gone.value.status.code == 404


def test_events_through_both_apis(kube: Client) -> None:
    kube.create(new_node("n1", "10.0.0.1"))
    now = datetime.now(UTC).replace(microsecond=0)
    kube.create(
        Event(
            metadata=ObjectMeta(name="n1.core", namespace="default"),
            involvedObject=ObjectReference(kind="Node", name="n1", uid="n1"),
            reason="Synced",
            message="node synced",
            type="Normal",
            source=EventSource(component="cloud-node-controller"),
            firstTimestamp=now,
            lastTimestamp=now,
            count=1,
        ),
        namespace="default",
    )
    kube.create(
        EventV1(
            metadata=ObjectMeta(name="n1.events", namespace="default"),
            eventTime=now,
            reportingController="example.com/cloud-controller-manager",
            reportingInstance="ccm-1",
            action="EnsureLoadBalancer",
            reason="EnsuredLoadBalancer",
            regarding=ObjectReference(kind="Node", name="n1"),
            note="ensured",
            type="Normal",
        ),
        namespace="default",
    )
    core = {e.metadata.name: e for e in kube.list(Event, namespace="default")}
    assert core["n1.events"].message == "ensured"
    assert core["n1.events"].reportingComponent == "example.com/cloud-controller-manager"
    # a core Event without eventTime (what the legacy recorder writes) reads back through
    # events.k8s.io with ``eventTime: null``, as kube-apiserver writes a zero MicroTime, and
    # lightkube's model (eventTime required) cannot decode that list
    with pytest.raises(msgspec.ValidationError, match=r"got `null` - at `\$.items\[0\].eventTime`"):
        list(kube.list(EventV1, namespace="default"))
    kube.patch(
        Event,
        "n1.core",
        {
            "eventTime": now.isoformat().replace("+00:00", ".000000Z"),
            "action": "Sync",
            "reportingComponent": "cloud-node-controller",
            "reportingInstance": "ccm-1",
        },
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    new = {e.metadata.name: e for e in kube.list(EventV1, namespace="default")}
    assert new["n1.core"].note == "node synced"
    assert new["n1.core"].eventTime == now
    assert new["n1.core"].deprecatedSource == EventSource(component="cloud-node-controller")
    assert new["n1.core"].deprecatedCount == 1
    by_field = list(kube.list(Event, namespace="default", fields={"involvedObject.name": "n1"}))
    assert {e.metadata.name for e in by_field} == {"n1.core", "n1.events"}

    # the strict rules of events.k8s.io: a type outside Normal/Warning is refused
    with pytest.raises(ApiError) as bad:
        kube.create(
            EventV1(
                metadata=ObjectMeta(name="bad", namespace="default"),
                eventTime=now,
                reportingController="example.com/ccm",
                reportingInstance="ccm-1",
                action="A",
                reason="R",
                type="Odd",
            ),
            namespace="default",
        )
    assert bad.value.status.code == 422


def lease_spec(holder: str, now: datetime, transitions: int = 0) -> LeaseSpec:
    return LeaseSpec(
        holderIdentity=holder,
        leaseDurationSeconds=15,
        acquireTime=now,
        renewTime=now,
        leaseTransitions=transitions,
    )


def try_acquire_or_renew(kube: Client, me: str, now: datetime) -> bool:
    """One round of client-go's ``tryAcquireOrRenew`` on a Lease lock (without the cache)."""
    try:
        lease = kube.get(Lease, "ccm", namespace="kube-system")
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        kube.create(
            Lease(
                metadata=ObjectMeta(name="ccm", namespace="kube-system"), spec=lease_spec(me, now)
            ),
        )
        return True
    spec = lease.spec
    assert spec is not None
    assert spec.renewTime is not None
    expired = spec.renewTime + timedelta(seconds=spec.leaseDurationSeconds or 0) < now
    if spec.holderIdentity != me and not expired:
        return False
    if spec.holderIdentity == me:
        spec.renewTime = now
    else:
        lease.spec = lease_spec(me, now, (spec.leaseTransitions or 0) + 1)
    try:
        kube.replace(lease)
    except ApiError as exc:
        if exc.status.code == 409:
            return False
        raise
    return True


def test_leader_election_on_a_lease(kube: Client) -> None:
    t0 = datetime.now(UTC)
    assert try_acquire_or_renew(kube, "ccm-a", t0)
    assert not try_acquire_or_renew(kube, "ccm-b", t0 + timedelta(seconds=1))
    assert try_acquire_or_renew(kube, "ccm-a", t0 + timedelta(seconds=2))
    lease = kube.get(Lease, "ccm", namespace="kube-system")
    assert lease.spec is not None
    assert lease.spec.holderIdentity == "ccm-a"
    # MicroTime round trip: six fractional digits survive
    assert lease.spec.renewTime == t0 + timedelta(seconds=2)
    assert lease.spec.acquireTime == t0

    # ccm-b read the lease, ccm-a renewed meanwhile: ccm-b's write loses on resourceVersion
    seen_by_b = kube.get(Lease, "ccm", namespace="kube-system")
    assert try_acquire_or_renew(kube, "ccm-a", t0 + timedelta(seconds=3))
    assert seen_by_b.spec is not None
    seen_by_b.spec = lease_spec("ccm-b", t0 + timedelta(seconds=30), 1)
    with pytest.raises(ApiError) as conflict:
        kube.replace(seen_by_b)
    assert conflict.value.status.code == 409
    assert "the object has been modified" in (conflict.value.status.message or "")

    # once the holder stops renewing, the lease expires and ccm-b takes it over
    assert try_acquire_or_renew(kube, "ccm-b", t0 + timedelta(seconds=30))
    taken = kube.get(Lease, "ccm", namespace="kube-system")
    assert taken.spec is not None
    assert (taken.spec.holderIdentity, taken.spec.leaseTransitions) == ("ccm-b", 1)


def test_endpoint_slices_by_service_name(kube: Client) -> None:
    for name, service, ip in (("web-a", "web", "10.1.0.1"), ("db-a", "db", "10.1.0.2")):
        kube.create(
            EndpointSlice(
                metadata=ObjectMeta(
                    name=name,
                    namespace="default",
                    labels={"kubernetes.io/service-name": service},
                ),
                addressType="IPv4",
                endpoints=[
                    Endpoint(
                        addresses=[ip],
                        conditions=EndpointConditions(ready=True),
                        nodeName="n1",
                    )
                ],
            )
        )
    slices = list(
        kube.list(EndpointSlice, namespace="default", labels={"kubernetes.io/service-name": "web"})
    )
    assert [s.metadata.name for s in slices] == ["web-a"]
    assert slices[0].endpoints[0].addresses == ["10.1.0.1"]
    assert slices[0].endpoints[0].conditions.ready is True
    all_ns = list(
        kube.list(EndpointSlice, namespace="*", labels={"kubernetes.io/service-name": "db"})
    )
    assert [s.metadata.name for s in all_ns] == ["db-a"]


def test_server_side_apply_ownership_and_conflict(kube: Client) -> None:
    kube.create(new_node("n1", "10.0.0.1"))
    applied = kube.apply(
        Node(metadata=ObjectMeta(name="n1", labels={"topology.kubernetes.io/zone": "us-east-1a"})),
        field_manager="cloud-node-controller",
    )
    assert applied.metadata is not None
    managers = {(m.manager, m.operation) for m in applied.metadata.managedFields or []}
    assert ("cloud-node-controller", "Apply") in managers
    assert ("ccm", "Update") in managers

    # another manager applying a different value for the same field conflicts ...
    other = Node(metadata=ObjectMeta(name="n1", labels={"topology.kubernetes.io/zone": "zz"}))
    with pytest.raises(ApiError) as conflict:
        kube.apply(other, field_manager="someone-else")
    assert conflict.value.status.code == 409
    assert 'conflict with "cloud-node-controller"' in (conflict.value.status.message or "")
    assert conflict.value.status.details is not None
    causes = conflict.value.status.details.causes or []
    assert [(c.reason, c.field) for c in causes] == [
        ("FieldManagerConflict", ".metadata.labels.topology.kubernetes.io/zone")
    ]
    # ... and takes it over with force
    forced = kube.apply(other, field_manager="someone-else", force=True)
    assert forced.metadata is not None
    assert forced.metadata.labels is not None
    assert forced.metadata.labels["topology.kubernetes.io/zone"] == "zz"

    # status through apply on the subresource
    status = kube.apply(
        Node.Status(
            metadata=ObjectMeta(name="n1"),
            status=NodeStatus(conditions=[NodeCondition(type="Ready", status="True")]),
        ),
        field_manager="cloud-node-controller",
    )
    assert status.status is not None
    entries = {
        (m.manager, m.operation, m.subresource)
        for m in (status.metadata.managedFields if status.metadata else None) or []
    }
    assert ("cloud-node-controller", "Apply", "status") in entries


def test_watch_resumed_from_a_resource_version(kube: Client) -> None:
    kube.create(new_node("n1", "10.0.0.1"))
    start = kube.list(Node)
    items = list(start)
    assert [n.metadata.name for n in items] == ["n1"]
    rv = start.resourceVersion
    assert rv
    # changes made before the watch starts ...
    kube.create(new_node("n2", "10.0.0.2"))
    kube.patch(Node, "n1", {"metadata": {"labels": {"a": "b"}}})
    kube.delete(Node, "n2")
    # ... are all delivered, in order, to a watch from the list's resourceVersion
    seen: list[tuple[str, str]] = []
    stream = kube.watch(Node, resource_version=rv, server_timeout=30)
    try:
        for kind, node in stream:
            seen.append((kind, node.metadata.name))
            if len(seen) == 3:
                break
    finally:
        stream.close()  # ends the streaming response now, not when collected
    assert seen == [("ADDED", "n2"), ("MODIFIED", "n1"), ("DELETED", "n2")]


def test_async_client_flow(kubeconfig: Path) -> None:
    async def flow() -> list[Any]:
        kube = AsyncClient(KubeConfig.from_file(kubeconfig), trust_env=False)
        try:
            await kube.create(new_node("a1", "10.0.0.9"))
            nodes = [n.metadata.name async for n in kube.list(Node)]
            patched = await kube.patch(
                Node.Status,
                "a1",
                {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                patch_type=PatchType.MERGE,
            )
            events: list[tuple[str, str]] = []
            stream = kube.watch(Node, resource_version="0", server_timeout=30)
            try:
                async for kind, node in stream:
                    events.append((kind, node.metadata.name))
                    break
            finally:
                await stream.aclose()  # closes the streaming response before the client
            return [nodes, patched.status.conditions[0].status, events]
        finally:
            await kube.close()

    nodes, ready, events = asyncio.run(flow())
    assert nodes == ["a1"]
    assert ready == "True"
    assert events == [("ADDED", "a1")]
