"""What the simulator serves for the data plane: pods/binding, ReplicaSets, and the
DefaultTolerationSeconds admission every real cluster runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kubernetes import client

from lab.kube.server import KubeServer
from tests.kube.conftest import raw

KUBECTL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "kubectl"
PODS = "/api/v1/namespaces/default/pods"


def make_pod(core: client.CoreV1Api, name: str = "p", **spec: object) -> dict:
    body = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec},
    }
    return core.api_client.sanitize_for_serialization(core.create_namespaced_pod("default", body))


def bind(sim: KubeServer, name: str, body: dict) -> tuple[int, dict]:
    return raw(
        sim,
        "POST",
        f"{PODS}/{name}/binding",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )


def test_binding_assigns_the_node_and_schedules(sim: KubeServer, core: client.CoreV1Api) -> None:
    pod = make_pod(core)
    code, status = bind(
        sim,
        "p",
        {
            "metadata": {"name": "p", "uid": pod["metadata"]["uid"]},
            "target": {"kind": "Node", "name": "n1"},
        },
    )
    assert (code, status["status"]) == (201, "Success")
    bound = core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    code, status = bind(sim, "p", {"target": {"name": "n2"}})
    assert code == 409
    assert status["message"] == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
    )
    code, status = bind(sim, "q", {"target": {"name": "n1"}})
    assert code == 404
    make_pod(core, "r")
    code, status = bind(sim, "r", {"target": {}})
    assert code == 422
    assert "target.name: Required value" in status["message"]
    code, status = bind(sim, "r", {"metadata": {"name": "other"}, "target": {"name": "n1"}})
    assert code == 400
    assert core.read_namespaced_pod("r", "default").spec.node_name is None  # nothing changed


def test_a_pod_being_deleted_cannot_be_bound(sim: KubeServer, core: client.CoreV1Api) -> None:
    make_pod(core, "held")
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": ["lab/hold"]}})
    core.delete_namespaced_pod("held", "default")
    code, status = bind(sim, "held", {"target": {"name": "n1"}})
    assert code == 409
    assert "pod held is being deleted, cannot be assigned to a host" in status["message"]
    core.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})


def test_default_toleration_seconds_on_create_only(sim: KubeServer, core: client.CoreV1Api) -> None:
    pod = make_pod(core)
    tolerations = pod["spec"]["tolerations"]
    assert tolerations == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    everything = make_pod(core, "tolerant", tolerations=[{"operator": "Exists"}])
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_replica_sets_are_served_validated_and_printed(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    apps = client.AppsV1Api(core.api_client)
    body = {
        "metadata": {"name": "web-abc"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    created = apps.create_namespaced_replica_set("default", body)
    assert created.metadata.generation == 1
    assert created.status.replicas == 0
    bad = json.loads(json.dumps(body))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    with pytest.raises(client.ApiException) as refused:
        apps.create_namespaced_replica_set("default", bad)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert "`selector` does not match template `labels`" in message
    out = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(sim.kubeconfig_path), "get", "rs", "-o", "wide"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    assert out[0].split() == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    assert out[1].split()[:4] == ["web-abc", "2", "0", "0"]
