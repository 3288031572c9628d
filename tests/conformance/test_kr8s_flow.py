"""A cloud controller's calls, made with kr8s's sync API against the simulator.

kr8s is a client nobody here wrote: it finds kinds through discovery, reads raw JSON into its
objects and writes with merge and JSON patches (it has no update and no apply). The steps are
those of ``test_lightkube_flow``: Nodes, a LoadBalancer Service, Events, a leader Lease, by
optimistic concurrency (a patch carrying ``metadata.resourceVersion``), EndpointSlices,
server-side apply (through kr8s's raw request call) and a watch resumed from a
resourceVersion.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kr8s
import pytest
from kr8s._async_utils import as_sync_func
from kr8s.objects import Event, Node, Service, new_class

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"

Lease = new_class("Lease", "coordination.k8s.io/v1", namespaced=True, asyncio=False)
EndpointSlice = new_class("EndpointSlice", "discovery.k8s.io/v1", namespaced=True, asyncio=False)
# no class for events.k8s.io's Event: kr8s keeps one class per kind name, which would then
# shadow its core/v1 Event; that one is written through kr8s's raw call (``raw_call``)


@pytest.fixture
def api(kubeconfig: Path) -> Iterator[Any]:
    api = kr8s.api(kubeconfig=str(kubeconfig))
    yield api
    # kr8s offers no close(): its HTTP session lives on the sync API's loop thread, and is
    # otherwise left for the garbage collector (unclosed sockets)
    session = api._session
    if session is not None:
        as_sync_func(session.aclose)()


def node_spec(name: str, ip: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {
            "providerID": f"aws:///us-east-1a/i-{name}",
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
            "addresses": [{"type": "InternalIP", "address": ip}],
        },
    }


def status_code(exc: BaseException) -> int:
    response = getattr(exc, "response", None)
    assert response is not None, exc
    return int(response.status_code)


def test_nodes_initialized_tainted_and_listed(api: Any) -> None:
    for i, name in enumerate(("n1", "n2")):
        Node(node_spec(name, f"10.0.0.{i + 1}"), api=api).create()
    found = api.get("nodes", label_selector={"kubernetes.io/hostname": "n2"})
    assert [n.name for n in found] == ["n2"]
    node = Node.get("n1", api=api)
    assert node.raw["spec"]["providerID"] == "aws:///us-east-1a/i-n1"
    assert node.raw["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.1"}]

    node.patch(
        {
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "ExternalIP", "address": "54.0.0.1"},
                ],
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            }
        },
        subresource="status",
    )
    node.wait("condition=Ready", timeout=10)
    assert [a["type"] for a in node.raw["status"]["addresses"]] == ["InternalIP", "ExternalIP"]

    # kr8s's taint helpers: a read, then a merge patch of the whole list
    node.taint(UNINITIALIZED, "true", effect="NoSchedule-")
    node.refresh()
    assert not node.taints
    node.taint("example.com/maintenance", "x", effect="NoExecute")
    node.refresh()
    assert node.raw["spec"]["taints"] == [
        {"key": "example.com/maintenance", "value": "x", "effect": "NoExecute"}
    ]
    node.cordon()
    assert node.unschedulable is True
    node.label({"node.kubernetes.io/exclude-from-external-load-balancers": "true"})
    node.refresh()
    assert node.labels["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"


def test_removing_the_last_taint_leaves_no_taints_field(api: Any) -> None:
    """kr8s merge-patches ``taints: []``; Go's ``omitempty`` leaves the emptied list out."""
    Node(node_spec("n1", "10.0.0.1"), api=api).create()
    node = Node.get("n1", api=api)
    node.taint(UNINITIALIZED, "true", effect="NoSchedule-")
    node.refresh()
    assert "taints" not in node.raw["spec"]
    managed = {m["manager"]: m["fieldsV1"] for m in node.raw["metadata"]["managedFields"]}
    assert "f:taints" not in managed["kr8s"].get("f:spec", {})


def test_load_balancer_service_status_and_finalizer(api: Any) -> None:
    svc = Service(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "web"},
                "ports": [{"port": 80, "targetPort": 8080}],
            },
        },
        api=api,
    )
    svc.create()
    assert svc.raw["spec"]["ports"][0]["nodePort"] > 0
    assert svc.raw["spec"]["ports"][0]["protocol"] == "TCP"
    assert svc.raw["status"] == {"loadBalancer": {}}
    svc.patch({"metadata": {"finalizers": [FINALIZER]}})
    svc.patch(
        {"status": {"loadBalancer": {"ingress": [{"hostname": "web.elb.amazonaws.com"}]}}},
        subresource="status",
    )
    fresh = Service.get("web", namespace="default", api=api)
    assert fresh.status.loadBalancer.ingress[0].hostname == "web.elb.amazonaws.com"
    assert fresh.metadata.finalizers == [FINALIZER]

    fresh.delete()
    assert fresh.exists()  # held by the finalizer
    fresh.refresh()
    assert fresh.metadata.deletionTimestamp
    fresh.patch([{"op": "remove", "path": "/metadata/finalizers"}], type="json")
    assert not fresh.exists()


def test_events_through_both_apis(api: Any) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    Event(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "n1.core", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": "Synced",
            "message": "node synced",
            "type": "Normal",
            "source": {"component": "cloud-node-controller"},
        },
        api=api,
    ).create()
    raw_call(
        api,
        "POST",
        "events.k8s.io/v1",
        "events",
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "n1.events", "namespace": "default"},
            "eventTime": now,
            "reportingController": "example.com/ccm",
            "reportingInstance": "ccm-1",
            "action": "Sync",
            "reason": "Synced",
            "regarding": {"kind": "Node", "name": "n1"},
            "note": "synced",
            "type": "Warning",
        },
        namespace="default",
    )
    core = {e.name: e.raw for e in api.get("events", namespace="default")}
    assert core["n1.events"]["message"] == "synced"
    assert core["n1.events"]["eventTime"] == now
    assert core["n1.core"]["eventTime"] is None
    new = {e.name: e.raw for e in api.get("events.v1.events.k8s.io", namespace="default")}
    assert new["n1.core"]["note"] == "node synced"
    assert new["n1.core"]["eventTime"] is None
    assert new["n1.core"]["deprecatedSource"] == {"component": "cloud-node-controller"}
    assert new["n1.events"]["regarding"] == {"kind": "Node", "name": "n1"}


def lease_body(holder: str, when: str, transitions: int) -> dict[str, Any]:
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": 15,
        "acquireTime": when,
        "renewTime": when,
        "leaseTransitions": transitions,
    }


def test_leader_lease_with_optimistic_concurrency(api: Any) -> None:
    t0 = "2026-01-01T00:00:00.000001Z"
    lease = Lease(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "ccm", "namespace": "kube-system"},
            "spec": lease_body("ccm-a", t0, 0),
        },
        api=api,
    )
    lease.create()
    assert lease.raw["spec"]["renewTime"] == t0
    rv = lease.metadata.resourceVersion

    # renew: a patch carrying the read resourceVersion is a precondition
    lease.patch(
        {"metadata": {"resourceVersion": rv}, "spec": {"renewTime": "2026-01-01T00:00:02.000000Z"}}
    )
    assert int(lease.metadata.resourceVersion) > int(rv)
    # ccm-b read the lease at rv and writes after ccm-a's renewal: refused
    with pytest.raises(kr8s.ServerError) as conflict:
        lease.patch({"metadata": {"resourceVersion": rv}, "spec": lease_body("ccm-b", t0, 1)})
    assert status_code(conflict.value) == 409
    assert conflict.value.status["reason"] == "Conflict"
    assert "the object has been modified" in conflict.value.status["message"]
    held = Lease.get("ccm", namespace="kube-system", api=api)
    assert held.raw["spec"]["holderIdentity"] == "ccm-a"
    assert held.raw["spec"]["renewTime"] == "2026-01-01T00:00:02.000000Z"

    leases = [x.name for x in api.get("leases", namespace="kube-system")]
    assert leases == ["ccm"]


def test_endpoint_slices_by_service_name(api: Any) -> None:
    for name, service in (("web-a", "web"), ("web-b", "web"), ("db-a", "db")):
        EndpointSlice(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": service},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.1.0.1"], "nodeName": "n1"}],
                "ports": [{"port": 8080, "protocol": "TCP"}],
            },
            api=api,
        ).create()
    web = api.get(
        "endpointslices", namespace="default", label_selector="kubernetes.io/service-name=web"
    )
    web_slices = sorted(web, key=lambda s: s.name)
    assert [s.name for s in web_slices] == ["web-a", "web-b"]
    # conditions is a struct value: written (empty) though the slice was created without it
    assert web_slices[0].raw["endpoints"][0]["conditions"] == {}
    # a nil *string port name is defaulted to "" (discovery/v1 SetDefaults_EndpointPort)
    assert web_slices[0].raw["ports"][0]["name"] == ""


def raw_call(
    api: Any,
    method: str,
    version: str,
    url: str,
    body: dict[str, Any],
    *,
    namespace: str | None = None,
    content_type: str = "application/json",
    params: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One request through kr8s's raw ``call_api``: (status, decoded body).

    ``call_api`` is async only; kr8s's own sync wrapper runs it on the sync API's event loop
    thread, as kr8s's sync methods run theirs.
    """

    async def call() -> tuple[int, dict[str, Any]]:
        try:
            async with api.call_api(
                method,
                version=version,
                url=url,
                namespace=namespace,
                content=json.dumps(body),
                headers={"Content-Type": content_type},
                params=params or {},
            ) as resp:
                return resp.status_code, dict(resp.json())
        except kr8s.ServerError as exc:
            if exc.response is None:
                raise
            return exc.response.status_code, dict(exc.response.json())

    return as_sync_func(call)()


def test_server_side_apply_through_the_raw_call(api: Any) -> None:
    """kr8s has no apply; its raw ``call_api`` sends one."""
    Node(node_spec("n1", "10.0.0.1"), api=api).create()

    def apply(manager: str, zone: str, force: bool = False) -> tuple[int, dict[str, Any]]:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": zone}},
        }
        params = {"fieldManager": manager, **({"force": "true"} if force else {})}
        return raw_call(
            api,
            "PATCH",
            "v1",
            "nodes/n1",
            body,
            content_type="application/apply-patch+yaml",
            params=params,
        )

    code, first = apply("ccm", "us-east-1a")
    assert code == 200
    managers = {m["manager"]: m for m in first["metadata"]["managedFields"]}
    assert managers["ccm"]["operation"] == "Apply"
    assert managers["ccm"]["fieldsV1"] == {
        "f:metadata": {"f:labels": {"f:topology.kubernetes.io/zone": {}}}
    }
    code, refused = apply("other", "zz")
    assert code == 409
    assert refused["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "ccm"',
            "field": ".metadata.labels.topology.kubernetes.io/zone",
        }
    ]
    code, forced = apply("other", "zz", force=True)
    assert code == 200
    assert forced["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zz"
    after = {m["manager"] for m in forced["metadata"]["managedFields"]}
    assert "ccm" not in after  # its only field was taken
    assert Node.get("n1", api=api).labels["topology.kubernetes.io/zone"] == "zz"


def test_watch_resumed_from_a_resource_version(api: Any) -> None:
    Node(node_spec("n1", "10.0.0.1"), api=api).create()
    rv = Node.get("n1", api=api).metadata.resourceVersion
    Node(node_spec("n2", "10.0.0.2"), api=api).create()
    Node.get("n1", api=api).patch({"metadata": {"labels": {"a": "b"}}})
    Node.get("n2", api=api).delete()

    async def first_three() -> list[tuple[str, str]]:
        # kr8s's sync ``watch`` cannot be closed early (leaving the loop leaves the stream
        # open); its async generator, on the sync API's loop, can
        seen: list[tuple[str, str]] = []
        events = api.async_watch("nodes", since=rv)
        try:
            async for kind, obj in events:
                seen.append((kind, obj.name))
                if len(seen) == 3:
                    break
        finally:
            await events.aclose()
        return seen

    assert as_sync_func(first_three)() == [("ADDED", "n2"), ("MODIFIED", "n1"), ("DELETED", "n2")]
