"""Field ownership for every manager and server-side apply against it (structured-merge-diff
semantics), through the official Python client and the real ``kubectl``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lab.kube.exceptions import ApiError
from lab.kube.handlers import manager_from_user_agent
from lab.kube.resources import RESOURCES
from lab.kube.server import KubeServer
from lab.kube.smd import Types, compare, field_set, from_fields_v1, to_fields_v1
from lab.kube.ssa import FieldManager
from tests.kube.conftest import raw
from tests.kube.test_kubectl import KUBECTL, Kubectl

APPLY = "application/apply-patch+yaml"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def deployment(name: str, replicas: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    }


@pytest.fixture
def apps(sim: KubeServer, api_client: Any) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


def entries(obj: Any) -> list[Any]:
    return list(obj.metadata.managed_fields or [])


def by_manager(obj: Any, manager: str) -> Any:
    return next(m for m in entries(obj) if m.manager == manager)


def test_manager_name_from_the_user_agent() -> None:
    """``prefixFromUserAgent``: up to the first ``/``, printable characters, 128 at most."""
    assert manager_from_user_agent("kubectl-create/v1.37.1 (linux/amd64)") == "kubectl-create"
    assert manager_from_user_agent("OpenAPI-Generator/33.1.0/python") == "OpenAPI-Generator"
    assert manager_from_user_agent("Go-http-client/1.1") == "Go-http-client"
    assert manager_from_user_agent("a\x00b\x7fc/1") == "abc"
    assert manager_from_user_agent("x" * 300) == "x" * 128


def test_a_create_records_the_fields_it_set(sim: KubeServer, apps: client.AppsV1Api) -> None:
    out = apps.create_namespaced_deployment("default", deployment("made", 2))
    status, wire = raw(sim, "GET", "/apis/apps/v1/namespaces/default/deployments/made")
    assert status == 200
    assert RFC3339.match(wire["metadata"]["managedFields"][0]["time"])
    [entry] = entries(out)
    assert (entry.manager, entry.operation, entry.api_version) == (
        "OpenAPI-Generator",
        "Update",
        "apps/v1",
    )
    assert entry.fields_type == "FieldsV1"
    assert entry.subresource is None
    fields = entry.fields_v1
    assert "f:replicas" in fields["f:spec"]
    assert fields["f:metadata"]["f:labels"] == {".": {}, "f:app": {}}  # a map it added
    containers = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(containers['k:{"name":"web"}']) >= {".", "f:image", "f:name"}
    # defaulted fields belong to the creator, as the decoder defaults before the field manager
    assert "f:progressDeadlineSeconds" in fields["f:spec"]
    assert "f:status" not in fields  # reset by the strategy: never owned through the main resource


def test_apply_conflicts_with_an_update_manager_and_force_takes_the_field(
    apps: client.AppsV1Api,
) -> None:
    apps.create_namespaced_deployment("default", deployment("contested", 2))
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment(
            "contested",
            "default",
            deployment("contested", 3),
            field_manager="ops",
            _content_type=APPLY,
        )
    body = json.loads(info.value.body)
    assert info.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "OpenAPI-Generator" using apps/v1: '
        ".spec.replicas"
    )
    # metav1.StatusCause writes its Type under the JSON name "reason" (clients such as
    # lightkube and kr8s read it there)
    assert body["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "OpenAPI-Generator" using apps/v1',
                "field": ".spec.replicas",
            }
        ]
    }
    assert apps.read_namespaced_deployment("contested", "default").spec.replicas == 2
    out = apps.patch_namespaced_deployment(
        "contested",
        "default",
        deployment("contested", 3),
        field_manager="ops",
        force=True,
        _content_type=APPLY,
    )
    assert out.spec.replicas == 3
    assert "f:replicas" in by_manager(out, "ops").fields_v1["f:spec"]
    assert "f:replicas" not in by_manager(out, "OpenAPI-Generator").fields_v1["f:spec"]
    # Apply entries sort before Update entries (sortEncodedManagedFields)
    assert [m.operation for m in entries(out)] == ["Apply", "Update"]


def test_applying_the_value_another_manager_set_shares_it(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("shared", 2))
    out = apps.patch_namespaced_deployment(
        "shared", "default", deployment("shared", 2), field_manager="ops", _content_type=APPLY
    )
    assert "f:replicas" in by_manager(out, "ops").fields_v1["f:spec"]
    assert "f:replicas" in by_manager(out, "OpenAPI-Generator").fields_v1["f:spec"]
    # a later Update of the field takes it from both
    out = apps.patch_namespaced_deployment(
        "shared", "default", {"spec": {"replicas": 5}}, field_manager="scaler"
    )
    assert by_manager(out, "scaler").fields_v1 == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in by_manager(out, "ops").fields_v1["f:spec"]
    # the applier no longer owns replicas, so leaving it out removes nothing
    cfg = deployment("shared", 2)
    del cfg["spec"]["replicas"]
    out = apps.patch_namespaced_deployment(
        "shared", "default", cfg, field_manager="ops", _content_type=APPLY
    )
    assert out.spec.replicas == 5


def test_a_dropped_field_goes_only_when_nobody_else_owns_it(core: client.CoreV1Api) -> None:
    def apply(data: dict[str, str]) -> Any:
        cfg = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "drop"}, "data": data}
        return core.patch_namespaced_config_map(
            "drop", "default", cfg, field_manager="ops", _content_type=APPLY
        )

    apply({"a": "1", "b": "1", "c": "1"})
    core.patch_namespaced_config_map(
        "drop", "default", {"data": {"b": "2"}}, field_manager="editor"
    )  # a strategic merge patch: editor now owns data.b
    assert by_manager(core.read_namespaced_config_map("drop", "default"), "editor").fields_v1 == {
        "f:data": {"f:b": {}}
    }
    out = apply({"c": "1"})
    assert out.data == {"b": "2", "c": "1"}  # a: only ops owned it; b: the editor's
    assert by_manager(out, "ops").fields_v1 == {"f:data": {"f:c": {}}}


def test_status_writes_are_their_own_entry(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment("default", deployment("stat", 1), field_manager="maker")
    out = apps.patch_namespaced_deployment_status(
        "stat", "default", {"status": {"observedGeneration": 1}}, field_manager="ctrl"
    )
    ctrl = by_manager(out, "ctrl")
    assert (ctrl.operation, ctrl.subresource) == ("Update", "status")
    assert ctrl.fields_v1 == {"f:status": {"f:observedGeneration": {}}}
    # the same manager through the main resource is a separate entry
    out = apps.patch_namespaced_deployment(
        "stat", "default", {"metadata": {"labels": {"x": "1"}}}, field_manager="ctrl"
    )
    assert sorted((m.manager, m.subresource or "") for m in entries(out)) == [
        ("ctrl", ""),
        ("ctrl", "status"),
        ("maker", ""),
    ]


def test_a_no_op_update_keeps_the_entries(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "same"}, "data": {"a": "1"}}, field_manager="one"
    )
    before = core.read_namespaced_config_map("same", "default")
    after = core.patch_namespaced_config_map(
        "same", "default", {"data": {"a": "1"}}, field_manager="two"
    )
    assert after.metadata.resource_version == before.metadata.resource_version
    assert [m.manager for m in entries(after)] == ["one"]


# ---- the pieces, against the schema -----------------------------------------------------------
SERVICE = next(r for r in RESOURCES if r.kind == "Service")


def test_fields_v1_round_trip_marks_members_with_children() -> None:
    paths = {
        ("f:spec", "f:ports"),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}'),
        ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:port"),
        ("f:metadata", "f:finalizers", 'v:"a/b"'),
    }
    doc = to_fields_v1(paths)
    assert doc["f:spec"]["f:ports"]['k:{"port":80,"protocol":"TCP"}'] == {".": {}, "f:port": {}}
    assert doc["f:spec"]["f:ports"]["."] == {}
    assert from_fields_v1(doc) == paths


def test_list_semantics_come_from_the_schema() -> None:
    types = Types("1.33")
    root = types.root(SERVICE)
    cfg = {
        "metadata": {"finalizers": ["a/b"], "labels": {"app": "x"}},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}, "externalIPs": ["1.2.3.4"]},
    }
    got = field_set(types, cfg, root)
    assert ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:port") in got  # list map
    assert ("f:metadata", "f:finalizers", 'v:"a/b"') in got  # set
    assert ("f:spec", "f:externalIPs") in got  # atomic list: one leaf
    assert ("f:metadata", "f:labels", "f:app") in got  # granular map
    assert ("f:spec", "f:selector") in got  # x-kubernetes-map-type: atomic
    old = {"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "type": "ClusterIP"}}
    new = {"spec": {"ports": [{"port": 81, "protocol": "TCP"}], "type": "NodePort"}}
    cmp = compare(types, old, new, root)
    assert ("f:spec", "f:type") in cmp.modified
    assert ("f:spec", "f:ports", 'k:{"port":81,"protocol":"TCP"}') in cmp.added
    assert ("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:port") in cmp.removed


def test_apply_of_a_list_map_element_over_another_manager() -> None:
    fm = FieldManager(Types("1.33"), SERVICE, True)
    live = {
        "metadata": {
            "name": "s",
            "managedFields": [
                {
                    "manager": "maker",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:spec": {
                            "f:ports": {
                                'k:{"port":80,"protocol":"TCP"}': {
                                    ".": {},
                                    "f:port": {},
                                    "f:targetPort": {},
                                }
                            }
                        }
                    },
                }
            ],
        },
        "spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]},
    }
    cfg = {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}
    with pytest.raises(ApiError) as info:
        fm.apply(live, cfg, manager="ops", subresource="", force=False)
    assert str(info.value).endswith('.spec.ports[port=80,protocol="TCP"].targetPort')


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl not installed")
def test_kubectl_apply_server_side_over_create_and_edit(sim: KubeServer, tmp_path: Path) -> None:
    k = Kubectl(sim.kubeconfig_path, tmp_path)
    k("create", "deployment", "web", "--image=nginx", "--replicas=2")
    created = k.json("deploy", "web", "--show-managed-fields")
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl-create", "Update")
    manifest = k.write("web.yaml", {**deployment("web", 3), "metadata": {"name": "web"}})
    failed = k("apply", "--server-side", "-f", str(manifest), check=False)
    assert failed.returncode != 0
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl-create" using apps/v1: '
        ".spec.replicas" in failed.stderr
    )
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/replicas: 2/replicas: 4/' \"$1\"\n")
    editor.chmod(0o755)
    k("edit", "deployment", "web", env={**os.environ, "KUBE_EDITOR": str(editor)})
    edited = k.json("deploy", "web", "--show-managed-fields")
    assert edited["spec"]["replicas"] == 4
    managers = {m["manager"]: m for m in edited["metadata"]["managedFields"]}
    assert managers["kubectl-edit"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    failed = k("apply", "--server-side", "-f", str(manifest), check=False)
    assert 'conflict with "kubectl-edit" using apps/v1: .spec.replicas' in failed.stderr
    k("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    forced = k.json("deploy", "web", "--show-managed-fields")
    assert forced["spec"]["replicas"] == 3
    managers = {m["manager"]: m for m in forced["metadata"]["managedFields"]}
    assert "kubectl-edit" not in managers  # its only field moved: the entry goes
    assert "f:replicas" in managers["kubectl"]["fieldsV1"]["f:spec"]
    assert managers["kubectl"]["operation"] == "Apply"
