"""Table printing through the simulator's HTTP layer: negotiation, includeObject, watches.

Raw requests with kubectl's exact ``Accept`` header (the Python client never asks for tables);
objects are created with the official client. Watches start from a list ``resourceVersion`` so
the events are replayed deterministically and the stream ends at ``timeoutSeconds``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from kubernetes import client

from lab.kube.server import KubeServer

TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
CMS = "/api/v1/namespaces/default/configmaps"


def request(sim: KubeServer, path: str, accept: str) -> tuple[int, str, Any]:
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    if sim.token:
        req.add_header("Authorization", f"Bearer {sim.token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), json.loads(exc.read())


def watch_events(sim: KubeServer, path: str, accept: str) -> list[dict[str, Any]]:
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    if sim.token:
        req.add_header("Authorization", f"Bearer {sim.token}")
    with urllib.request.urlopen(req, timeout=15) as resp:
        return [json.loads(line) for line in resp if line.strip()]


def make(core: client.CoreV1Api, name: str, **data: str) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": data})


def test_list_as_table(sim: KubeServer, core: client.CoreV1Api) -> None:
    make(core, "t1", a="1", b="2")
    plain = core.list_namespaced_config_map("default")
    status, ctype, table = request(sim, CMS + "?limit=500", TABLE_ACCEPT)
    assert (status, ctype) == (200, "application/json")
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert int(table["metadata"]["resourceVersion"]) >= int(plain.metadata.resource_version)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    row = next(r for r in table["rows"] if r["cells"][0] == "t1")
    assert row["cells"][1] == 2
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == "default"
    assert "data" not in row["object"]


def test_plain_json_when_table_is_not_asked(sim: KubeServer, core: client.CoreV1Api) -> None:
    make(core, "t1", a="1")
    _, _, body = request(sim, CMS, "application/json")
    assert body["kind"] == "ConfigMapList"
    _, _, body = request(sim, CMS, "application/json, application/json;as=Table;v=v1;g=meta.k8s.io")
    assert body["kind"] == "ConfigMapList"


def test_single_object_and_include_object(sim: KubeServer, core: client.CoreV1Api) -> None:
    make(core, "t1", a="1")
    _, _, one = request(sim, CMS + "/t1", TABLE_ACCEPT)
    assert one["kind"] == "Table"
    assert [r["cells"][0] for r in one["rows"]] == ["t1"]
    _, _, full = request(sim, CMS + "?includeObject=Object", TABLE_ACCEPT)
    t1 = next(r for r in full["rows"] if r["cells"][0] == "t1")
    assert (t1["object"]["kind"], t1["object"]["data"]) == ("ConfigMap", {"a": "1"})
    _, _, bare = request(sim, CMS + "?includeObject=None", TABLE_ACCEPT)
    assert all("object" not in r for r in bare["rows"])
    status, _, err = request(sim, CMS + "?includeObject=Everything", TABLE_ACCEPT)
    assert status == 400
    assert (err["kind"], err["reason"]) == ("Status", "BadRequest")
    assert "Everything" in err["message"]


def test_v1beta1_table_when_only_that_is_asked(sim: KubeServer) -> None:
    accept = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
    _, _, table = request(sim, "/api/v1/namespaces", accept)
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert {r["cells"][0] for r in table["rows"]} >= {"default", "kube-system"}


def test_watch_events_carry_tables_with_headers_only_first(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    make(core, "w1", a="1")
    make(core, "w2", a="1", b="2")
    core.delete_namespaced_config_map("w1", "default")
    events = watch_events(
        sim, f"{CMS}?resourceVersion={rv}&watch=true&timeoutSeconds=1", TABLE_ACCEPT
    )
    assert [(e["type"], e["object"]["rows"][0]["cells"][0]) for e in events] == [
        ("ADDED", "w1"),
        ("ADDED", "w2"),
        ("DELETED", "w1"),
    ]
    assert all(e["object"]["kind"] == "Table" for e in events)
    assert [c["name"] for c in events[0]["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert all(e["object"]["columnDefinitions"] == [] for e in events[1:])
    assert events[1]["object"]["rows"][0]["cells"][1] == 2
    assert events[1]["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
