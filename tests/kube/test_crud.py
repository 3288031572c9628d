"""CRUD, metadata rules and list semantics through the official Python client.

Each test states the real API server behaviour it pins (apiserver-spec.md section in brackets).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer
from tests.kube.conftest import make_cm, make_node


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def test_create_get_update_delete_configmap(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", make_cm("cm1", app="a"))
    assert created.metadata.uid
    assert created.metadata.creation_timestamp
    assert created.metadata.generation is None  # core kinds are not generation-managed [3.6]
    got = core.read_namespaced_config_map("cm1", "default")
    assert got.metadata.resource_version == created.metadata.resource_version
    got.data["k"] = "changed"
    updated = core.replace_namespaced_config_map("cm1", "default", got)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    assert updated.data == {"k": "changed"}
    assert updated.metadata.uid == created.metadata.uid
    status = core.delete_namespaced_config_map("cm1", "default")
    assert status["status"] == "Success"
    assert status["details"] == {"name": "cm1", "kind": "configmaps", "uid": created.metadata.uid}
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("cm1", "default")
    assert info.value.status == 404
    assert status_of(info.value)["message"] == 'configmaps "cm1" not found'
    assert status_of(info.value)["details"] == {"name": "cm1", "kind": "configmaps"}


def test_already_exists_and_conflict_messages(core: client.CoreV1Api) -> None:
    first = core.create_namespaced_config_map("default", make_cm("dup"))
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("default", make_cm("dup"))
    assert info.value.status == 409
    assert status_of(info.value)["reason"] == "AlreadyExists"
    assert status_of(info.value)["message"] == 'configmaps "dup" already exists'
    core.patch_namespaced_config_map("dup", "default", {"data": {"k": "2"}})
    first.data = {"k": "stale"}
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_config_map("dup", "default", first)
    body = status_of(info.value)
    assert (info.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "dup": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    # an empty resourceVersion is an unconditional update
    first.metadata.resource_version = None
    assert core.replace_namespaced_config_map("dup", "default", first).data == {"k": "stale"}


def test_noop_update_keeps_resource_version(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", make_cm("same"))
    again = core.replace_namespaced_config_map("same", "default", cm)
    assert again.metadata.resource_version == cm.metadata.resource_version
    patched = core.patch_namespaced_config_map("same", "default", {"data": {"k": "v"}})
    assert patched.metadata.resource_version == cm.metadata.resource_version


def test_missing_namespace_and_name_validation(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("nope", make_cm("x"))
    assert info.value.status == 404
    assert status_of(info.value)["message"] == 'namespaces "nope" not found'
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("default", make_cm("Bad_Name"))
    body = status_of(info.value)
    assert info.value.status == 422
    assert body["message"].startswith(
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service(
            "default", {"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 1}]}}
        )
    assert "a DNS-1035 label must consist" in status_of(info.value)["message"]


def test_api_version_mismatch_and_namespace_mismatch(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map(
            "default", {"apiVersion": "v2", "kind": "ConfigMap", "metadata": {"name": "x"}}
        )
    assert info.value.status == 400
    assert (
        "the API version in the data (v2) does not match the expected API version (v1)"
        in info.value.body
    )
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "x", "namespace": "kube-system"}}
        )
    assert info.value.status == 400
    assert "does not match the namespace sent on the request" in info.value.body


def test_generate_name_and_dry_run(core: client.CoreV1Api) -> None:
    made = core.create_namespaced_config_map("default", {"metadata": {"generateName": "gen-"}})
    assert made.metadata.name.startswith("gen-")
    assert len(made.metadata.name) == 9
    dry = core.create_namespaced_config_map("default", make_cm("dry"), dry_run="All")
    assert dry.metadata.uid
    assert not dry.metadata.resource_version
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("dry", "default")
    assert info.value.status == 404
    before = core.list_namespaced_config_map("default").metadata.resource_version
    core.patch_namespaced_config_map(
        made.metadata.name, "default", {"data": {"z": "1"}}, dry_run="All"
    )
    assert core.list_namespaced_config_map("default").metadata.resource_version == before
    assert core.read_namespaced_config_map(made.metadata.name, "default").data is None


def test_seeded_objects(core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert names == {"default", "kube-system", "kube-public", "kube-node-lease"}
    ns = core.read_namespace("default")
    assert ns.metadata.labels == {"kubernetes.io/metadata.name": "default"}
    assert ns.spec.finalizers == ["kubernetes"]
    assert ns.status.phase == "Active"
    svc = core.read_namespaced_service("kubernetes", "default")
    assert svc.spec.cluster_ip == "10.96.0.1"
    assert core.read_namespaced_service("kube-dns", "kube-system").spec.cluster_ip == "10.96.0.10"
    assert core.read_namespaced_service_account("default", "kube-public").metadata.name == "default"
    core.create_namespace({"metadata": {"name": "fresh"}})
    assert core.read_namespaced_service_account("default", "fresh")
    assert "ca.crt" in core.read_namespaced_config_map("kube-root-ca.crt", "fresh").data


def test_label_selectors_full_syntax(core: client.CoreV1Api) -> None:
    for name, labels in {
        "a": {"env": "prod", "tier": "web", "n": "5"},
        "b": {"env": "dev", "tier": "web"},
        "c": {"env": "prod"},
        "d": {},
    }.items():
        core.create_namespaced_config_map("default", make_cm(name, **labels))

    def names(selector: str) -> list[str]:
        items = core.list_namespaced_config_map("default", label_selector=selector).items
        return [i.metadata.name for i in items if i.metadata.name != "kube-root-ca.crt"]

    assert names("env=prod") == ["a", "c"]
    assert names("env==prod,tier=web") == ["a"]
    assert names("env!=prod") == ["b", "d"]  # absent key matches !=
    assert names("env in (dev, prod),tier") == ["a", "b"]
    assert names("env notin (prod)") == ["b", "d"]
    assert names("!tier") == ["c", "d"]
    assert names("n>4") == ["a"]
    assert names("n<5") == []
    with pytest.raises(ApiException) as info:
        names("env in prod")
    assert info.value.status == 400
    assert "unable to parse requirement" in info.value.body


def test_field_selectors_per_kind(core: client.CoreV1Api) -> None:
    core.create_node(make_node("n1"))
    core.create_node(dict(make_node("n2"), spec={"unschedulable": True}))
    by = core.list_node(field_selector="spec.unschedulable=false").items
    assert [n.metadata.name for n in by] == ["n1"]
    assert [n.metadata.name for n in core.list_node(field_selector="metadata.name!=n1").items] == [
        "n2"
    ]
    with pytest.raises(ApiException) as info:
        core.list_node(field_selector="metadata.namespace=x")
    assert info.value.status == 400
    assert status_of(info.value)["message"] == "field label not supported: metadata.namespace"
    with pytest.raises(ApiException) as info:
        core.list_namespaced_config_map("default", field_selector="spec.foo=x")
    assert status_of(info.value)["message"] == (
        '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )
    core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Node", "name": "n1", "uid": "n1"},
            "reason": "Boom",
            "type": "Warning",
            "message": "m",
        },
    )
    evs = core.list_event_for_all_namespaces(
        field_selector="involvedObject.name=n1,involvedObject.namespace=,involvedObject.kind=Node"
    ).items
    assert [e.metadata.name for e in evs] == ["ev1"]
    svcs = core.list_service_for_all_namespaces(field_selector="spec.type=ClusterIP").items
    assert {s.metadata.name for s in svcs} == {"kubernetes", "kube-dns"}


def test_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(7):
        core.create_namespaced_config_map("default", make_cm(f"page-{i}"))
    first = core.list_namespaced_config_map("default", limit=3)
    assert [i.metadata.name for i in first.items] == ["kube-root-ca.crt", "page-0", "page-1"]
    assert first.metadata.remaining_item_count == 5
    core.create_namespaced_config_map("default", make_cm("page-9"))
    second = core.list_namespaced_config_map("default", limit=3, _continue=first.metadata._continue)
    assert [i.metadata.name for i in second.items] == ["page-2", "page-3", "page-4"]
    assert second.metadata.resource_version == first.metadata.resource_version
    rest = core.list_namespaced_config_map("default", limit=10, _continue=second.metadata._continue)
    assert [i.metadata.name for i in rest.items][-1] == "page-9"
    assert rest.metadata._continue is None
    assert rest.metadata.remaining_item_count is None
    assert core.list_namespaced_config_map("default", label_selector="none=here").items == []


def test_list_all_namespaces_is_ordered_by_namespace_then_name(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "aaa"}})
    core.create_namespaced_config_map("aaa", make_cm("zz"))
    items = core.list_config_map_for_all_namespaces().items
    keys = [(i.metadata.namespace, i.metadata.name) for i in items]
    assert keys == sorted(keys)
    assert keys[0] == ("aaa", "kube-root-ca.crt")


def test_generation_managed_only_for_deployments(sim: KubeServer, api_client: Any) -> None:
    apps = client.AppsV1Api(api_client)
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    dep = apps.create_namespaced_deployment("default", body)
    assert dep.metadata.generation == 1
    assert dep.spec.replicas == 1
    dep = apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"x": "y"}}})
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert dep.metadata.generation == 2
    dep = apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 3}})
    assert dep.metadata.generation == 2
    assert dep.status.replicas == 3


def test_status_subresource_rules(core: client.CoreV1Api) -> None:
    svc = core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
        },
    )
    assert svc.status.load_balancer.ingress is None  # create resets status
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}
    main = core.patch_namespaced_service("lb", "default", ingress)
    assert main.status.load_balancer.ingress is None  # main resource ignores status
    st = core.patch_namespaced_service_status(
        "lb", "default", {**ingress, "spec": {"type": "ClusterIP"}}
    )
    assert st.spec.type == "LoadBalancer"  # /status ignores spec
    assert st.status.load_balancer.ingress[0].ip == "1.2.3.4"
    assert st.status.load_balancer.ingress[0].ip_mode == "VIP"
    # /status accepts metadata: the service controller's finalizer patch
    fin = {"metadata": {"finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}}
    st = core.patch_namespaced_service_status("lb", "default", fin)
    assert st.metadata.finalizers == ["service.kubernetes.io/load-balancer-cleanup"]
    node = core.create_node(make_node("n1"))
    assert node.status.conditions[0].type == "Ready"  # node create keeps status
    node = core.patch_node("n1", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert node.status.conditions[0].status == "True"


def test_finalizers_hold_deletion_until_removed(core: client.CoreV1Api) -> None:
    cm = make_cm("fin")
    cm["metadata"]["finalizers"] = ["example.com/hold"]
    created = core.create_namespaced_config_map("default", cm)
    marked = core.delete_namespaced_config_map("fin", "default")
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    still = core.read_namespaced_config_map("fin", "default")
    assert still.metadata.deletion_timestamp is not None
    again = core.delete_namespaced_config_map("fin", "default")
    assert again["metadata"]["resourceVersion"] == still.metadata.resource_version
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "fin", "default", {"metadata": {"finalizers": ["example.com/hold", "x.io/new"]}}
        )
    assert info.value.status == 422
    assert "no new finalizers can be added if the object is being deleted" in info.value.body
    core.patch_namespaced_config_map(
        "fin",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/hold"]}},
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("fin", "default")
    assert gone.value.status == 404
    del created


def test_pod_graceful_deletion(core: client.CoreV1Api) -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    }
    core.create_namespaced_pod("default", pod)
    deleting = core.delete_namespaced_pod("p", "default")
    assert deleting.metadata.deletion_grace_period_seconds == 30
    assert core.read_namespaced_pod("p", "default").metadata.deletion_timestamp
    gone = core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert gone.metadata.name == "p"
    with pytest.raises(ApiException):
        core.read_namespaced_pod("p", "default")
    unscheduled = {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert core.create_namespaced_pod("default", unscheduled).status.phase == "Pending"
    core.delete_namespaced_pod("q", "default")
    with pytest.raises(ApiException):
        core.read_namespaced_pod("q", "default")


def test_delete_preconditions(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", make_cm("pre"))
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_config_map(
            "pre",
            "default",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other")),
        )
    assert info.value.status == 409
    assert "the UID in the precondition (other) does not match the UID in record" in info.value.body
    core.delete_namespaced_config_map(
        "pre",
        "default",
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=cm.metadata.uid)),
    )


def test_namespace_lifecycle(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.delete_namespace("default")
    assert info.value.status == 403
    assert (
        status_of(info.value)["message"]
        == 'namespaces "default" is forbidden: this namespace may not be deleted'
    )
    core.create_namespace({"metadata": {"name": "tmp"}})
    core.create_namespaced_config_map("tmp", make_cm("a"))
    held = make_cm("held")
    held["metadata"]["finalizers"] = ["example.com/x"]
    core.create_namespaced_config_map("tmp", held)
    ns = core.delete_namespace("tmp")
    assert ns["status"]["phase"] == "Terminating"
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("tmp", make_cm("late"))
    assert info.value.status == 403
    assert "because it is being terminated" in info.value.body
    assert [c.metadata.name for c in core.list_namespaced_config_map("tmp").items] == ["held"]
    core.patch_namespaced_config_map("held", "tmp", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespace("tmp")
    assert gone.value.status == 404


def test_owner_references_garbage_collected(core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map("default", make_cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for name in ("dep1", "dep2"):
        body = make_cm(name)
        body["metadata"]["ownerReferences"] = [ref]
        core.create_namespaced_config_map("default", body)
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    dep = core.read_namespaced_config_map("dep1", "default")
    assert dep.metadata.owner_references is None
    owner2 = core.create_namespaced_config_map("default", make_cm("owner2"))
    core.patch_namespaced_config_map(
        "dep2",
        "default",
        {"metadata": {"ownerReferences": [dict(ref, name="owner2", uid=owner2.metadata.uid)]}},
    )
    core.delete_namespaced_config_map("owner2", "default")
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("dep2", "default")


def test_deletecollection_returns_list(core: client.CoreV1Api) -> None:
    for name in ("x1", "x2", "y1"):
        core.create_namespaced_config_map("default", make_cm(name, group=name[0]))
    resp = core.delete_collection_namespaced_config_map(
        "default", label_selector="group=x", _preload_content=False
    )
    out = json.loads(resp.data)
    assert out["kind"] == "ConfigMapList"
    assert [i["metadata"]["name"] for i in out["items"]] == ["x1", "x2"]
    left = [
        c.metadata.name
        for c in core.list_namespaced_config_map("default", label_selector="group").items
    ]
    assert left == ["y1"]


def test_create_on_update_for_services_only(core: client.CoreV1Api) -> None:
    svc = {"metadata": {"name": "put"}, "spec": {"ports": [{"port": 80}]}}
    made = core.replace_namespaced_service("put", "default", svc)
    assert made.spec.cluster_ip
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_config_map("nothere", "default", make_cm("nothere"))
    assert info.value.status == 404


def test_fake_kubelet_confirms_graceful_pod_deletion(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    sim.store.fake_kubelet = True
    try:
        pod = {
            "metadata": {"name": "k"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        }
        core.create_namespaced_pod("default", pod)
        reply = core.delete_namespaced_pod("k", "default")
        assert reply.metadata.deletion_grace_period_seconds == 30
        with pytest.raises(ApiException) as info:
            core.read_namespaced_pod("k", "default")
        assert info.value.status == 404
    finally:
        sim.store.fake_kubelet = False


def test_expired_continue_token_is_410(sim: KubeServer, core: client.CoreV1Api) -> None:
    for i in range(3):
        core.create_namespaced_config_map("default", make_cm(f"exp-{i}"))
    first = core.list_namespaced_config_map("default", limit=2)
    core.create_namespaced_config_map("default", make_cm("exp-late"))
    sim.control.compact()
    with pytest.raises(ApiException) as info:
        core.list_namespaced_config_map("default", limit=2, _continue=first.metadata._continue)
    assert info.value.status == 410
    assert status_of(info.value)["reason"] == "Expired"
    assert "The provided continue parameter is too old" in status_of(info.value)["message"]
