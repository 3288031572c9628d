"""Discovery documents (lab.kube.discovery) checked against the shapes clients parse.

The aggregated list is checked both structurally and by the properties client-go relies on
(exact Content-Type, scope strings, subresources); the legacy documents by what the Python
``DynamicClient`` and kubectl's fallback read. Everything is derived from the resource table, so
the tests compare against ``RESOURCES`` rather than repeating it.
"""

from __future__ import annotations

from typing import Any

import pytest

from lab.kube.discovery import (
    aggregated_content_type,
    handle_discovery,
    negotiate_aggregated,
    parse_accept,
)
from lab.kube.resources import RESOURCES, ResourceType, groups

ADDR = "127.0.0.1:6443"
FULL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
KUBECTL_DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
KUBECTL_132_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


def serve(path: str, accept: str = "application/json") -> tuple[int, str, dict[str, Any]]:
    result = handle_discovery(path, accept, ADDR)
    assert result is not None, path
    status, content_type, body = result
    assert isinstance(body, dict)
    return status, content_type, body


# ---- content negotiation --------------------------------------------------------------------


def test_parse_accept_orders_by_q_and_keeps_client_order_for_ties() -> None:
    ranges = parse_accept("text/plain;q=0.5, application/json;as=Table;v=v1, */*")
    assert [r.mime for r in ranges] == ["application/json", "*/*", "text/plain"]
    assert ranges[0].param("as") == "Table"
    assert ranges[0].param("missing") is None


def test_parse_accept_drops_q_zero_and_treats_empty_as_anything() -> None:
    assert [r.mime for r in parse_accept("application/json;q=0, text/x")] == ["text/x"]
    assert [r.mime for r in parse_accept("")] == ["*/*"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (KUBECTL_DISCOVERY_ACCEPT, "v2"),
        (KUBECTL_132_ACCEPT, "v2"),
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList", "v2beta1"),
        # parameter order does not matter
        ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", "v2"),
        ("application/json", None),
        ("application/json, */*", None),
        ("*/*", None),
        ("", None),
        # plain JSON preferred over aggregated by q
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.5,"
            "application/json",
            None,
        ),
        # protobuf aggregated cannot be served: fall through to the JSON one
        (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;"
            "as=APIGroupDiscoveryList,"
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            "v2",
        ),
        # an unknown discovery version is skipped
        ("application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList", None),
    ],
)
def test_negotiate_aggregated(accept: str, expected: str | None) -> None:
    assert negotiate_aggregated(accept) == expected


# ---- legacy documents -------------------------------------------------------------------------


def test_api_versions_carries_server_address() -> None:
    status, ctype, body = serve("/api")
    assert (status, ctype) == (200, "application/json")
    assert body == {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ADDR}],
    }


def test_api_group_list_names_every_non_core_group_with_preferred_version() -> None:
    status, _, body = serve("/apis")
    assert status == 200
    assert body["kind"] == "APIGroupList"
    assert body["apiVersion"] == "v1"
    names = [g["name"] for g in body["groups"]]
    assert names == [g for g in groups() if g]
    assert {"apps", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io"} <= set(names)
    for group in body["groups"]:
        assert "kind" not in group
        assert group["preferredVersion"] == group["versions"][0]
        assert group["versions"][0]["groupVersion"] == f"{group['name']}/v1"


def test_api_group_document() -> None:
    status, _, body = serve("/apis/coordination.k8s.io")
    assert status == 200
    assert body == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "coordination.k8s.io",
        "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
    }


def test_core_resource_list_matches_real_server_entries() -> None:
    status, _, body = serve("/api/v1")
    assert status == 200
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["services"] == {
        "name": "services",
        "singularName": "service",
        "namespaced": True,
        "kind": "Service",
        "verbs": FULL,
        "shortNames": ["svc"],
        "categories": ["all"],
    }
    assert by_name["services/status"] == {
        "name": "services/status",
        "singularName": "",
        "namespaced": True,
        "kind": "Service",
        "verbs": ["get", "patch", "update"],
    }
    assert by_name["nodes"]["namespaced"] is False
    assert by_name["nodes"]["shortNames"] == ["no"]
    assert "deletecollection" not in by_name["namespaces"]["verbs"]
    assert "shortNames" not in by_name["secrets"]
    assert "configmaps/status" not in by_name


@pytest.mark.parametrize("rt", RESOURCES, ids=lambda rt: f"{rt.group_version}/{rt.plural}")
def test_every_table_entry_is_discoverable_legacy(rt: ResourceType) -> None:
    path = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    _, _, body = serve(path)
    assert body["groupVersion"] == rt.group_version
    entry = next(r for r in body["resources"] if r["name"] == rt.plural)
    assert entry["kind"] == rt.kind
    assert entry["namespaced"] == rt.namespaced
    assert entry["verbs"] == list(rt.verbs)
    assert entry.get("shortNames", []) == list(rt.short_names)
    subs = {r["name"] for r in body["resources"] if r["name"].startswith(rt.plural + "/")}
    assert subs == {f"{rt.plural}/{s}" for s in rt.subresources}


# ---- aggregated documents ----------------------------------------------------------------------


def test_aggregated_api_has_one_unnamed_core_group() -> None:
    status, ctype, body = serve("/api", KUBECTL_DISCOVERY_ACCEPT)
    assert status == 200
    assert ctype == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert ctype == aggregated_content_type("v2")
    assert body["kind"] == "APIGroupDiscoveryList"
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert [item["metadata"]["name"] for item in body["items"]] == [""]
    (version,) = body["items"][0]["versions"]
    assert version["version"] == "v1"
    assert version["freshness"] == "Current"
    services = next(r for r in version["resources"] if r["resource"] == "services")
    assert services == {
        "resource": "services",
        "responseKind": {"group": "", "version": "v1", "kind": "Service"},
        "scope": "Namespaced",
        "singularResource": "service",
        "verbs": FULL,
        "shortNames": ["svc"],
        "categories": ["all"],
        "subresources": [
            {
                "subresource": "status",
                "responseKind": {"group": "", "version": "v1", "kind": "Service"},
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    nodes = next(r for r in version["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"


def test_aggregated_apis_lists_every_resource_of_every_named_group() -> None:
    _, _, body = serve("/apis", KUBECTL_DISCOVERY_ACCEPT)
    seen = {
        (item["metadata"]["name"], v["version"], r["resource"])
        for item in body["items"]
        for v in item["versions"]
        for r in v["resources"]
    }
    assert seen == {(rt.group, rt.version, rt.plural) for rt in RESOURCES if rt.group}
    lease = next(
        r
        for item in body["items"]
        if item["metadata"]["name"] == "coordination.k8s.io"
        for r in item["versions"][0]["resources"]
    )
    assert lease["responseKind"] == {
        "group": "coordination.k8s.io",
        "version": "v1",
        "kind": "Lease",
    }
    assert "subresources" not in lease


def test_aggregated_v2beta1_when_only_that_is_asked() -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    _, ctype, body = serve("/apis", accept)
    assert ctype.endswith("v=v2beta1;as=APIGroupDiscoveryList")
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2beta1"


def test_group_version_documents_are_never_aggregated() -> None:
    _, ctype, body = serve("/api/v1", KUBECTL_DISCOVERY_ACCEPT)
    assert ctype == "application/json"
    assert body["kind"] == "APIResourceList"


# ---- routing edges ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/apis/nope.example.com", "/apis/apps/v2", "/api/v2", "/apis/nope.example.com/v1"],
)
def test_unknown_group_or_version_is_a_404_status(path: str) -> None:
    status, ctype, body = serve(path)
    assert (status, ctype) == (404, "application/json")
    assert body["kind"] == "Status"
    assert body["reason"] == "NotFound"
    assert body["code"] == 404


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/version",
        "/healthz",
        "/openapi/v3",
        "/api/v1/nodes",
        "/api/v1/namespaces/default/services",
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        "/apisx",
    ],
)
def test_non_discovery_paths_are_left_to_the_router(path: str) -> None:
    assert handle_discovery(path, "application/json", ADDR) is None


def test_query_string_and_trailing_slash_are_tolerated() -> None:
    assert serve("/api?timeout=32s")[2]["kind"] == "APIVersions"
    assert serve("/apis/")[2]["kind"] == "APIGroupList"
    assert serve("/api/v1/")[2]["kind"] == "APIResourceList"


def test_subresource_verbs_follow_the_real_server() -> None:
    from lab.kube import discovery

    assert discovery._subresource_verbs("status") == ["get", "patch", "update"]
    assert discovery._subresource_verbs("scale") == ["get", "patch", "update"]
    assert discovery._subresource_verbs("finalize") == ["update"]
    widget = ResourceType(
        "example.com",
        "v1",
        "Widget",
        "widgets",
        "widget",
        namespaced=False,
        subresources=("status", "finalize"),
    )
    entry = discovery._aggregated_resource(widget)
    assert entry["scope"] == "Cluster"
    assert [(s["subresource"], s["verbs"]) for s in entry["subresources"]] == [
        ("status", ["get", "patch", "update"]),
        ("finalize", ["update"]),
    ]
