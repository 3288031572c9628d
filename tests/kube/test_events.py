"""Events: one store behind core/v1 and events.k8s.io/v1, upstream's mapping, validation and
timestamp normalisation, through the official client and kubectl."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from lab.kube.events import normal_time, to_core, to_v1
from lab.kube.server import KubeServer
from tests.kube.conftest import raw
from tests.kube.test_kubectl import KUBECTL, Kubectl

CORE_PATH = "/api/v1/namespaces/default/events"
JSON = {"Content-Type": "application/json"}
V1_PATH = "/apis/events.k8s.io/v1/namespaces/default/events"


@pytest.fixture
def ev1(sim: KubeServer, api_client: Any) -> client.EventsV1Api:
    return client.EventsV1Api(api_client)


def core_event(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Node", "name": "n1", "apiVersion": "v1", "uid": "u-1"},
        "reason": "Rebooted",
        "message": "node rebooted",
        "type": "Warning",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2026-01-02T03:04:05+02:00",
        "lastTimestamp": "2026-01-02T01:04:09.123Z",
        "count": 3,
        **extra,
    }


def v1_event(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-02T03:04:05.5+01:00",
        "reportingController": "example.com/ccm",
        "reportingInstance": "ccm-0",
        "action": "Sync",
        "reason": "Synced",
        "regarding": {"kind": "Service", "namespace": "default", "name": "web", "apiVersion": "v1"},
        "note": "load balancer ensured",
        "type": "Normal",
        **extra,
    }


def test_a_core_event_reads_back_through_events_k8s_io(sim: KubeServer) -> None:
    status, created = raw(sim, "POST", CORE_PATH, json.dumps(core_event("c1")).encode(), JSON)
    assert status == 201
    # metav1.Time: UTC, seconds; the zero MicroTime and the non-omitempty strings as Go writes
    assert created["firstTimestamp"] == "2026-01-02T01:04:05Z"
    assert created["lastTimestamp"] == "2026-01-02T01:04:09Z"
    assert created["eventTime"] is None
    assert created["reportingComponent"] == ""
    assert created["reportingInstance"] == ""
    status, seen = raw(sim, "GET", f"{V1_PATH}/c1")
    assert status == 200
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["regarding"] == created["involvedObject"]
    assert seen["note"] == "node rebooted"
    assert seen["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert seen["deprecatedFirstTimestamp"] == "2026-01-02T01:04:05Z"
    assert seen["deprecatedLastTimestamp"] == "2026-01-02T01:04:09Z"
    assert seen["deprecatedCount"] == 3
    assert seen["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert seen["metadata"]["uid"] == created["metadata"]["uid"]
    assert "message" not in seen
    assert "involvedObject" not in seen


def test_an_events_k8s_io_event_lists_through_core(
    ev1: client.EventsV1Api, sim: KubeServer
) -> None:
    made = ev1.create_namespaced_event("default", v1_event("n1"))
    assert made.note == "load balancer ensured"
    status, body = raw(sim, "GET", CORE_PATH)
    [item] = [i for i in body["items"] if i["metadata"]["name"] == "n1"]
    assert item["message"] == "load balancer ensured"
    assert item["involvedObject"]["name"] == "web"
    assert item["reportingComponent"] == "example.com/ccm"
    assert item["reportingInstance"] == "ccm-0"
    assert item["eventTime"] == "2026-01-02T02:04:05.500000Z"  # MicroTime: six digits, UTC
    assert item["source"] == {}
    assert "count" not in item  # omitempty and zero
    # a delete through one API removes it from the other
    ev1.delete_namespaced_event("n1", "default")
    status, _ = raw(sim, "GET", f"{CORE_PATH}/n1")
    assert status == 404


def test_field_selectors_use_each_apis_own_names(ev1: client.EventsV1Api, sim: KubeServer) -> None:
    """events.k8s.io/v1 converts its own labels to the core ones (upstream's
    ``AddFieldLabelConversionsForEvent``): ``regarding.*`` and ``reportingController`` select,
    the core names are not supported there, and core/v1 keeps its names."""
    ev1.create_namespaced_event("default", v1_event("about-web"))
    other = v1_event("about-db", regarding={"kind": "Service", "name": "db"})
    ev1.create_namespaced_event("default", {**other, "reportingController": "example.com/x"})
    raw(sim, "POST", CORE_PATH, json.dumps(core_event("about-n1")).encode(), JSON)

    def names(selector: str) -> list[str]:
        found = ev1.list_namespaced_event("default", field_selector=selector).items
        return sorted(e.metadata.name for e in found if e.event_time is not None)

    assert names("regarding.name=web") == ["about-web"]
    assert names("regarding.kind=Service,regarding.name!=web") == ["about-db"]
    assert names("reportingController=example.com/x") == ["about-db"]
    assert names("type=Normal,reason=Synced") == ["about-db", "about-web"]
    for core_name in ("involvedObject.name", "reportingComponent", "message"):
        status, body = raw(sim, "GET", f"{V1_PATH}?fieldSelector={core_name}%3Dweb")
        assert (status, body["message"]) == (400, f"field label not supported: {core_name}")
    # core/v1 is unchanged: its own names select, the events.k8s.io ones are not supported
    status, body = raw(sim, "GET", f"{CORE_PATH}?fieldSelector=involvedObject.name%3Dn1")
    assert [i["metadata"]["name"] for i in body["items"]] == ["about-n1"]
    status, body = raw(sim, "GET", f"{CORE_PATH}?fieldSelector=regarding.name%3Dweb")
    assert (status, body["message"]) == (400, "field label not supported: regarding.name")


def test_a_watch_through_one_api_sees_writes_through_the_other(
    sim: KubeServer, api_client: Any
) -> None:
    """Written through events.k8s.io, watched through core/v1. (The other direction works on
    the wire too, but the official client cannot decode an events.k8s.io Event whose
    ``eventTime`` is null, which is what a real server sends for a core Event without one.)"""
    core = client.CoreV1Api(api_client)
    ev1 = client.EventsV1Api(api_client)
    start = core.list_namespaced_event("default").metadata.resource_version
    seen: list[tuple[str, str, str]] = []
    done = threading.Event()

    def follow() -> None:
        w = watch.Watch()
        for item in w.stream(
            core.list_namespaced_event, "default", resource_version=start, timeout_seconds=20
        ):
            obj = item["object"]
            seen.append((item["type"], obj.metadata.name, obj.message or ""))
            if len(seen) == 2:
                w.stop()
        done.set()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    ev1.create_namespaced_event("default", v1_event("w1"))
    ev1.patch_namespaced_event(
        "w1", "default", {"series": {"count": 2, "lastObservedTime": "2026-01-02T03:05:00Z"}}
    )
    assert done.wait(30)
    assert seen == [
        ("ADDED", "w1", "load balancer ensured"),
        ("MODIFIED", "w1", "load balancer ensured"),
    ]


def test_validation_as_upstream(sim: KubeServer) -> None:
    # a namespaced object's namespace must be the Event's
    bad = core_event("x1", involvedObject={"kind": "Pod", "namespace": "other", "name": "p"})
    status, body = raw(sim, "POST", CORE_PATH, json.dumps(bad).encode(), JSON)
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "other": does not match event.namespace',
            "field": "involvedObject.namespace",
        }
    ]
    # events.k8s.io/v1: the strict rules
    strict = v1_event("x2", type="Info", deprecatedCount=2, reportingController="")
    del strict["action"]
    status, body = raw(sim, "POST", V1_PATH, json.dumps(strict).encode(), JSON)
    assert status == 422
    fields = [(c["field"], c["message"]) for c in body["details"]["causes"]]
    assert ("reportingController", "Required value") in fields
    assert ("action", "Required value") in fields
    assert ("type", 'Invalid value: "": has invalid value: Info') in fields
    assert ("deprecatedCount", 'Invalid value: "": needs to be unset') in fields
    no_time = v1_event("x3")
    del no_time["eventTime"]
    status, body = raw(sim, "POST", V1_PATH, json.dumps(no_time).encode(), JSON)
    assert status == 422
    assert ("eventTime", "Required value") in [
        (c["field"], c["message"]) for c in body["details"]["causes"]
    ]
    for name in ("x1", "x2", "x3"):
        assert raw(sim, "GET", f"{CORE_PATH}/{name}")[0] == 404  # nothing stored


def test_events_k8s_io_fields_are_immutable(ev1: client.EventsV1Api) -> None:
    ev1.create_namespaced_event("default", v1_event("imm"))
    with pytest.raises(ApiException) as info:
        ev1.patch_namespaced_event("imm", "default", {"note": "changed"})
    assert info.value.status == 422
    assert "note" not in json.loads(info.value.body)["message"]  # upstream names "message"
    assert (
        'message: Invalid value: "changed": field is immutable'
        in json.loads(info.value.body)["message"]
    )


def test_mapping_round_trips() -> None:
    core = core_event("m")
    assert to_core(to_v1({**core, "metadata": {"name": "m"}}))["message"] == "node rebooted"
    assert normal_time("t", "2026-01-02T03:04:05.1234567Z", micro=True)[0] == (
        "2026-01-02T03:04:05.123456Z"
    )
    assert normal_time("t", "2026-01-02T03:04:05-00:30", micro=False)[0] == "2026-01-02T03:34:05Z"
    assert normal_time("t", "yesterday", micro=False)[1] is not None


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl not installed")
def test_kubectl_describe_and_events_see_both_apis(
    sim: KubeServer, api_client: Any, tmp_path: Path
) -> None:
    k = Kubectl(sim.kubeconfig_path, tmp_path)
    k("create", "configmap", "target", "--from-literal=a=1")
    uid = k.json("cm", "target")["metadata"]["uid"]
    regarding = {
        "kind": "ConfigMap",
        "namespace": "default",
        "name": "target",
        "uid": uid,
        "apiVersion": "v1",
    }
    client.EventsV1Api(api_client).create_namespaced_event(
        "default", v1_event("via-new", regarding=regarding, reason="NewApi", note="from v1")
    )
    described = k("describe", "configmap", "target").stdout
    assert "NewApi" in described
    assert "from v1" in described
    raw(sim, "POST", CORE_PATH, json.dumps(core_event("via-core", reason="OldApi")).encode(), JSON)
    listed = k("events").stdout
    assert "OldApi" in listed
    assert "NewApi" in listed
