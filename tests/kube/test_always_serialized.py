"""Objects come back shaped as kube-apiserver serializes them: Go struct values always written.

A Node created without status is returned by a real v1.33 server with ``spec: {}`` and a status
holding ``daemonEndpoints.kubeletEndpoint.Port: 0`` and every ``nodeInfo`` string empty,
because those fields are struct values (``omitempty`` does not apply) whose scalar fields are
not ``omitempty`` (the OpenAPI schema's ``required``). Checked with the official client, raw
JSON, watch events and kr8s (a client whose ``Node.wait`` reads ``status`` unconditionally).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client, watch

from lab.kube.resources import RESOURCES
from lab.kube.schema import definitions
from lab.kube.server import KubeServer
from lab.versions.release import DEFAULT_K8S_VERSION

from .conftest import raw


def node_info_fields() -> list[str]:
    """NodeSystemInfo's non-omitempty fields, from the upstream schema (Go field order)."""
    info = definitions(DEFAULT_K8S_VERSION)["io.k8s.api.core.v1.NodeSystemInfo"]
    return list(info["required"])


def test_status_less_node_reads_back_with_spec_and_zero_status(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    core.create_node({"metadata": {"name": "bare"}})
    node = core.read_node("bare")
    assert node.spec is not None
    assert node.status is not None
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 0
    assert node.status.node_info.kubelet_version == ""
    assert node.status.conditions is None  # omitempty slices stay absent

    _, body = raw(sim, "GET", "/api/v1/nodes/bare")
    assert body["spec"] == {}
    assert body["status"] == {
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": dict.fromkeys(node_info_fields(), ""),
    }
    assert list(body)[-2:] == ["spec", "status"]
    assert len(node_info_fields()) == 10


def test_written_fields_are_kept_and_missing_ones_zero_filled(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    half = {
        "metadata": {"name": "half"},
        "spec": {"providerID": "aws:///us-east-1a/i-0123"},
        "status": {"nodeInfo": {"kubeletVersion": "v1.33.1"}},
    }
    # raw: the client's own models refuse a partial nodeInfo before sending it
    status, _ = raw(
        sim,
        "POST",
        "/api/v1/nodes",
        json.dumps(half).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 201
    _, body = raw(sim, "GET", "/api/v1/nodes/half")
    assert body["spec"] == {"providerID": "aws:///us-east-1a/i-0123"}
    info = body["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.33.1"
    assert {k for k, v in info.items() if v == ""} == set(node_info_fields()) - {"kubeletVersion"}
    core.patch_node_status(
        "half", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    node = core.read_node("half")
    assert node.status.node_info.kubelet_version == "v1.33.1"
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 0
    assert [c.type for c in node.status.conditions] == ["Ready"]


def test_watch_events_carry_the_serialized_shape(sim: KubeServer, core: client.CoreV1Api) -> None:
    rv = core.list_node().metadata.resource_version
    core.create_node({"metadata": {"name": "watched"}})
    w = watch.Watch()
    seen: list[Any] = []
    for event in w.stream(core.list_node, resource_version=rv, timeout_seconds=5):
        if event["object"].metadata.name == "watched":
            seen.append(event["object"])
            w.stop()
    assert seen
    assert seen[0].status.node_info.architecture == ""


@pytest.mark.parametrize(
    ("path", "body", "check"),
    [
        (
            "/api/v1/namespaces/default/services",
            {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
            lambda o: o["status"] == {"loadBalancer": {}},
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            {"metadata": {"name": "l"}},
            lambda o: o["spec"] == {},
        ),
        (
            "/api/v1/namespaces/default/events",
            {"metadata": {"name": "e"}, "involvedObject": {"kind": "Node", "name": "n"}},
            lambda o: o["source"] == {},
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            {
                "metadata": {"name": "es"},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}],
            },
            lambda o: o["endpoints"][0]["conditions"] == {},
        ),
    ],
)
def test_other_kinds_struct_values(
    sim: KubeServer, path: str, body: dict[str, Any], check: Any
) -> None:
    status, created = raw(
        sim, "POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    assert status == 201, created
    _, got = raw(sim, "GET", f"{path}/{body['metadata']['name']}")
    assert check(got), got


def test_value_struct_table_names_fields_the_schema_has() -> None:
    from lab.kube.schema import VALUE_STRUCTS, _resolve, definition_name

    defs = definitions(DEFAULT_K8S_VERSION)
    for (group, kind), paths in VALUE_STRUCTS.items():
        rt = next(r for r in RESOURCES if (r.group, r.kind) == (group, kind))
        for path in paths:
            schema = defs[definition_name(rt)]
            for part in path.split("."):
                schema = _resolve(schema["properties"][part.removesuffix("[]")], defs)
                if part.endswith("[]"):
                    schema = _resolve(schema["items"], defs)
            assert schema.get("properties") is not None, (kind, path)


def test_kr8s_reads_and_waits_on_a_status_less_node(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    kr8s = pytest.importorskip("kr8s")
    from kr8s.objects import Node

    core.create_node({"metadata": {"name": "k"}})
    api = kr8s.api(kubeconfig=str(sim.kubeconfig_path))
    node = Node.get("k", api=api)
    assert node.raw["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 0

    def ready() -> None:
        core.patch_node_status(
            "k", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        )

    timer = threading.Timer(0.3, ready)
    timer.start()
    try:
        node.wait("condition=Ready", timeout=10)
    finally:
        timer.cancel()
    assert node.raw["status"]["conditions"][0]["type"] == "Ready"


def test_dry_run_and_noop_update_see_the_same_shape(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    created = core.create_node({"metadata": {"name": "dry"}}, dry_run="All")
    assert created.status.daemon_endpoints.kubelet_endpoint.port == 0
    core.create_node({"metadata": {"name": "same"}})
    _, stored = raw(sim, "GET", "/api/v1/nodes/same")
    # a PUT without the zero-valued fields decodes to the same object: no new revision
    body = {"metadata": stored["metadata"]}
    ctype = {"Content-Type": "application/json"}
    status, updated = raw(sim, "PUT", "/api/v1/nodes/same", json.dumps(body).encode(), ctype)
    assert status == 200
    assert updated["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert updated["status"] == stored["status"]


def test_empty_omitempty_lists_and_maps_are_left_out(sim: KubeServer) -> None:
    """Go decodes ``[]`` / ``{}`` into an empty slice or map, which ``omitempty`` leaves out of
    the answer and the field manager does not count; required (non-omitempty) lists stay."""
    ctype = {"Content-Type": "application/json"}
    node = {
        "metadata": {"name": "e", "labels": {}, "finalizers": [], "annotations": {}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"addresses": [], "capacity": {}},
    }
    status, body = raw(sim, "POST", "/api/v1/nodes", json.dumps(node).encode(), ctype)
    assert status == 201
    assert {"labels", "finalizers", "annotations"}.isdisjoint(body["metadata"])
    assert "addresses" not in body["status"]
    assert "capacity" not in body["status"]
    merge = {"Content-Type": "application/merge-patch+json"}
    patch = json.dumps({"spec": {"taints": []}}).encode()
    status, body = raw(sim, "PATCH", "/api/v1/nodes/e", patch, merge)
    assert status == 200
    assert body["spec"] == {}
    # the writer's only field is gone, and with it its managedFields entry
    assert "managedFields" not in body["metadata"]
    # EndpointSlice.endpoints has no omitempty: an empty list is written as []
    eps = {"metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": [], "ports": []}
    path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    status, body = raw(sim, "POST", path, json.dumps(eps).encode(), ctype)
    assert status == 201
    assert body["endpoints"] == []
    assert "ports" not in body
    # struct values are not collections: the zero-filled daemonEndpoints stays
    status, body = raw(sim, "GET", "/api/v1/nodes/e")
    assert body["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
