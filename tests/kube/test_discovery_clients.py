"""Discovery and OpenAPI over HTTP, read by real clients: the official Python client's typed
discovery calls (strict models), its ``DynamicClient`` (legacy discovery only), and raw
requests carrying kubectl's exact ``Accept`` headers to check the wire ``Content-Type``.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from lab.kube.resources import RESOURCES
from lab.kube.server import KubeServer

KUBECTL_DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)


def fetch(sim: KubeServer, path: str, accept: str) -> tuple[int, str, bytes]:
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    if sim.token:
        req.add_header("Authorization", f"Bearer {sim.token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()


def test_typed_client_reads_every_discovery_document(sim: KubeServer, api_client: Any) -> None:
    versions = client.CoreApi(api_client).get_api_versions()
    assert versions.versions == ["v1"]
    assert versions.server_address_by_client_cidrs[0].server_address == f"127.0.0.1:{sim.port}"

    group_list = client.ApisApi(api_client).get_api_versions()
    names = {g.name for g in group_list.groups}
    assert {"apps", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io"} <= names

    core = client.CoreV1Api(api_client).get_api_resources()
    services = next(r for r in core.resources if r.name == "services")
    assert (services.kind, services.namespaced, services.short_names) == ("Service", True, ["svc"])

    leases = client.CoordinationV1Api(api_client).get_api_resources()
    assert [r.name for r in leases.resources] == ["leases"]
    group = client.CoordinationApi(api_client).get_api_group()
    assert group.preferred_version.group_version == "coordination.k8s.io/v1"


def test_dynamic_client_discovers_and_lists_every_kind(sim: KubeServer, api_client: Any) -> None:
    dyn = DynamicClient(api_client)
    for rt in RESOURCES:
        resource = dyn.resources.get(api_version=rt.group_version, kind=rt.kind)
        assert resource.name == rt.plural
        assert resource.namespaced == rt.namespaced
        if "list" not in rt.verbs:
            continue  # the create-only review kinds
        listing = resource.get()
        assert listing.kind == rt.list_kind
    svc = dyn.resources.get(api_version="v1", short_names=["svc"])
    assert svc.kind == "Service"
    kubernetes_svc = svc.get(name="kubernetes", namespace="default")
    assert kubernetes_svc.spec.clusterIP == "10.96.0.1"
    status = dyn.resources.get(api_version="v1", kind="Service").subresources["status"]
    assert status.name == "services/status"


@pytest.mark.parametrize("path", ["/api", "/apis"])
def test_aggregated_discovery_content_type_on_the_wire(sim: KubeServer, path: str) -> None:
    status, ctype, body = fetch(sim, path, KUBECTL_DISCOVERY_ACCEPT)
    assert status == 200
    # client-go parses the body as aggregated only when these parameters are present
    media, *params = [part.strip() for part in ctype.split(";")]
    assert media == "application/json"
    assert set(params) == {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"}
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList"
    status, ctype, body = fetch(sim, path, "application/json")
    assert ctype == "application/json"
    assert json.loads(body)["kind"] in {"APIVersions", "APIGroupList"}


def test_openapi_index_and_documents_over_http(sim: KubeServer) -> None:
    _, ctype, body = fetch(sim, "/openapi/v3?timeout=32s", "application/json, */*")
    assert ctype == "application/json"
    index = json.loads(body)
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    status, ctype, doc = fetch(sim, url, "application/json")
    assert (status, ctype) == (200, "application/json")
    assert json.loads(doc)["openapi"].startswith("3.")
    pb_accept = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    _, ctype, _ = fetch(sim, "/openapi/v2?timeout=32s", pb_accept)
    assert ctype == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
