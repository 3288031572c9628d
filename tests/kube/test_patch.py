"""PATCH flavours: JSON patch, merge patch, strategic merge patch and server-side apply.

Pure-function checks of ``lab.kube.patch`` for the strategic-merge directives, then the same
behaviours end to end through the official client [apiserver-spec.md 6.6, 6.7, 10].
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube import patch as P
from lab.kube.server import KubeServer
from tests.kube.conftest import make_cm, make_node, raw

NODE = P.strategies_for("Node")
POD = P.strategies_for("Pod")


def test_smp_merges_lists_by_key_and_replaces_atomic_lists() -> None:
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "DiskPressure", "status": "False"},
            ]
        },
    }
    out = P.strategic_merge(
        node,
        {
            "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}]},
        },
        NODE,
    )
    assert out["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]  # atomic
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False"},
        {"type": "DiskPressure", "status": "False"},
    ]
    assert node["status"]["conditions"][0]["status"] == "True"  # input untouched


def test_smp_list_replace_directive_for_node_addresses() -> None:
    node = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "Hostname", "address": "n1"},
            ]
        }
    }
    patch = {
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}, {"$patch": "replace"}]
        }
    }
    out = P.strategic_merge(node, patch, NODE)
    assert out["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.9"}]


def test_smp_delete_element_primitive_sets_and_element_order() -> None:
    pod = {
        "metadata": {"finalizers": ["a", "b"]},
        "spec": {
            "containers": [
                {"name": "x", "image": "1", "env": [{"name": "E", "value": "1"}]},
                {"name": "y", "image": "2"},
            ]
        },
    }
    patch = {
        "metadata": {"finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]},
        "spec": {
            "$setElementOrder/containers": [{"name": "y"}, {"name": "x"}],
            "containers": [
                {"name": "x", "env": [{"name": "F", "value": "2"}]},
                {"name": "z", "$patch": "delete"},
            ],
        },
    }
    out = P.strategic_merge(pod, patch, POD)
    assert out["metadata"]["finalizers"] == ["a", "c"]
    assert [c["name"] for c in out["spec"]["containers"]] == ["y", "x"]
    assert out["spec"]["containers"][1]["env"] == [
        {"name": "E", "value": "1"},
        {"name": "F", "value": "2"},
    ]
    removed = P.strategic_merge(
        out, {"spec": {"containers": [{"name": "y", "$patch": "delete"}]}}, POD
    )
    assert [c["name"] for c in removed["spec"]["containers"]] == ["x"]
    gone = P.strategic_merge(out, {"spec": {"$patch": "delete"}}, POD)
    assert "spec" not in gone
    replaced = P.strategic_merge(out, {"spec": {"$patch": "replace", "hostNetwork": True}}, POD)
    assert replaced["spec"] == {"hostNetwork": True}


def test_merge_patch_rfc7386() -> None:
    assert P.merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == {
        "a": {"c": 2},
        "l": [3],
    }


def test_service_smp_port_merge_like_python_e2e(core: client.CoreV1Api) -> None:
    core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "svc"},
            "spec": {
                "selector": {"app": "x"},
                "ports": [{"name": "http", "port": 80, "targetPort": 80}],
            },
        },
    )
    out = core.patch_namespaced_service(
        "svc",
        "default",
        {"spec": {"ports": [{"name": "new", "port": 8080, "protocol": "TCP", "targetPort": 8080}]}},
    )
    assert sorted(p.port for p in out.spec.ports) == [80, 8080]
    assert out.status is not None


def test_configmap_json_patch_then_smp_like_python_e2e(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}}
    )
    out = core.patch_namespaced_config_map(
        "cm", "default", [{"op": "replace", "path": "/data", "value": {"new": "x"}}]
    )
    assert out.data == {"new": "x"}
    out = core.patch_namespaced_config_map("cm", "default", {"data": {"new": "y"}})
    assert out.data == {"new": "y"}
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "cm", "default", [{"op": "test", "path": "/data/new", "value": "zzz"}]
        )
    assert info.value.status == 422
    assert json.loads(info.value.body)["message"].startswith(
        "the server rejected our request due to an error in our request"
    )


def test_merge_patch_labels_and_resource_version_precondition(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", make_cm("lbl", a="1", b="2"))
    out = core.patch_namespaced_config_map(
        "lbl",
        "default",
        {"metadata": {"labels": {"a": None, "c": "3"}}},
        _content_type="application/merge-patch+json",
    )
    assert out.metadata.labels == {"b": "2", "c": "3"}
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "lbl",
            "default",
            {"metadata": {"labels": {"d": "4"}, "resourceVersion": cm.metadata.resource_version}},
            _content_type="application/merge-patch+json",
        )
    assert info.value.status == 409
    assert "the object has been modified" in info.value.body


def test_node_status_patch_with_replace_directive(core: client.CoreV1Api) -> None:
    core.create_node(make_node("n1"))
    body = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.5"},
                {"type": "InternalIP", "address": "10.0.0.6"},
                {"$patch": "replace"},
            ]
        }
    }
    out = core.patch_node_status("n1", body)
    assert [(a.type, a.address) for a in out.status.addresses] == [
        ("InternalIP", "10.0.0.5"),
        ("InternalIP", "10.0.0.6"),
    ]
    taint = {
        "key": "node.cloudprovider.kubernetes.io/uninitialized",
        "value": "true",
        "effect": "NoSchedule",
    }
    out = core.patch_node("n1", {"spec": {"taints": [taint]}})
    assert out.spec.taints[0].key == taint["key"]
    out = core.patch_node("n1", {"spec": {"taints": []}})
    assert out.spec.taints in (None, [])


def test_unsupported_patch_type_and_force_rules(sim: KubeServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", make_cm("p"))
    status, body = raw(
        sim,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/p",
        b"{}",
        {"Content-Type": "application/xml"},
    )
    assert status == 415
    assert body["reason"] == "UnsupportedMediaType"
    assert body["message"].startswith(
        "the body of the request was in an unknown format - "
        "accepted media types include: application/json-patch+json"
    )
    status, body = raw(
        sim,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        b"k8s\x00",
        {"Content-Type": "application/vnd.kubernetes.protobuf"},
    )
    assert status == 415
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map("p", "default", {"data": {}}, force=True)
    assert info.value.status == 422
    assert "may not be specified for non-apply patch" in info.value.body


def test_server_side_apply_create_then_merge(sim: KubeServer, api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "ssa", "default", cfg, _content_type="application/apply-patch+yaml"
        )
    assert info.value.status == 422
    assert "fieldManager: Required value" in info.value.body
    made = core.patch_namespaced_config_map(
        "ssa", "default", cfg, field_manager="test", _content_type="application/apply-patch+yaml"
    )
    assert made.data == {"a": "1"}
    assert made.metadata.managed_fields[0].manager == "test"
    assert made.metadata.managed_fields[0].operation == "Apply"
    # the aio e2e: an SMP carrying the read-back RV and managedFields is accepted
    body = client.ApiClient().sanitize_for_serialization(made)
    body["data"]["b"] = "2"
    out = core.patch_namespaced_config_map("ssa", "default", body, field_manager="test")
    assert out.data == {"a": "1", "b": "2"}
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "ssa-svc"},
        "spec": {"ports": [{"port": 53, "protocol": "UDP", "name": "dns"}]},
    }
    core.patch_namespaced_service(
        "ssa-svc",
        "default",
        svc,
        field_manager="test",
        _content_type="application/apply-patch+yaml",
    )
    svc["spec"]["ports"] = [{"port": 53, "protocol": "TCP", "name": "dns-tcp"}]
    out = core.patch_namespaced_service(
        "ssa-svc",
        "default",
        svc,
        field_manager="other",
        _content_type="application/apply-patch+yaml",
    )
    assert sorted((p.port, p.protocol) for p in out.spec.ports) == [(53, "TCP"), (53, "UDP")]


def test_server_side_apply_removes_fields_the_applier_dropped(core: client.CoreV1Api) -> None:
    def apply(manager: str, labels: dict[str, str], ports: list[int]) -> Any:
        cfg = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "owned", "labels": labels},
            "spec": {"ports": [{"name": f"p{p}", "port": p} for p in ports]},
        }
        return core.patch_namespaced_service(
            "owned",
            "default",
            cfg,
            field_manager=manager,
            _content_type="application/apply-patch+yaml",
        )

    apply("alice", {"a": "1", "b": "2"}, [80, 443])
    fields = next(
        m.fields_v1
        for m in core.read_namespaced_service("owned", "default").metadata.managed_fields
        if m.manager == "alice"
    )
    assert 'k:{"port":80,"protocol":"TCP"}' in fields["f:spec"]["f:ports"]
    assert fields["f:metadata"]["f:labels"] == {"f:a": {}, "f:b": {}}
    core.patch_namespaced_service("owned", "default", {"metadata": {"labels": {"c": "3"}}})
    apply("bob", {"b": "2"}, [443])
    out = apply("alice", {"a": "1"}, [443])
    assert out.metadata.labels == {"a": "1", "b": "2", "c": "3"}  # bob still owns b
    assert [p.port for p in out.spec.ports] == [443]  # bob owns 443, nobody owns 80 any more
    out = apply("bob", {}, [443])
    assert out.metadata.labels == {"a": "1", "c": "3"}


def test_identical_reapply_is_a_no_op(core: client.CoreV1Api) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "same-apply"},
        "data": {"a": "1"},
    }
    for manager in ("one", "two"):
        core.patch_namespaced_config_map(
            "same-apply",
            "default",
            cfg,
            field_manager=manager,
            _content_type="application/apply-patch+yaml",
        )
    before = core.read_namespaced_config_map("same-apply", "default").metadata.resource_version
    again = core.patch_namespaced_config_map(
        "same-apply",
        "default",
        cfg,
        field_manager="one",
        _content_type="application/apply-patch+yaml",
    )
    assert again.metadata.resource_version == before


def test_server_side_apply_conflicts_between_appliers_and_force(core: client.CoreV1Api) -> None:
    def apply(manager: str, data: dict[str, str], **kw: Any) -> Any:
        cfg = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "contested"},
            "data": data,
        }
        return core.patch_namespaced_config_map(
            "contested",
            "default",
            cfg,
            field_manager=manager,
            _content_type="application/apply-patch+yaml",
            **kw,
        )

    apply("alice", {"k": "1", "j": "1"})
    assert apply("bob", {"k": "1"}).data == {"k": "1", "j": "1"}  # same value: shared, no conflict
    with pytest.raises(ApiException) as info:
        apply("bob", {"k": "2", "j": "2"})
    body = json.loads(info.value.body)
    assert info.value.status == 409
    assert body["reason"] == "Conflict"
    # printManager names an applier without its apiVersion; NewApplyConflict's details carry
    # only the causes
    assert body["message"] == (
        'Apply failed with 2 conflicts: conflicts with "alice":\n- .data.j\n- .data.k'
    )
    assert body["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "field": f".data.{key}",
                "message": 'conflict with "alice"',
            }
            for key in "jk"
        ]
    }
    out = apply("bob", {"k": "2"}, force=True)
    assert out.data == {"k": "2", "j": "1"}
    out = apply("alice", {"j": "1"})  # alice no longer owns k: dropping it removes nothing
    assert out.data == {"k": "2", "j": "1"}
