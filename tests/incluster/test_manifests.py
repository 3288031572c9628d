"""The rendered manifests: order, fields, the official client's models, the controller's own
parsers, settings validation, and ``kubectl apply --dry-run=server`` against the simulator."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api

from controller.aws.config import load_cloud_config
from lab.incluster import DEFAULT_IMAGE, InClusterSettings, lab_settings, render_manifests, to_yaml
from lab.kube.server import KubeServer
from tests.incluster.support import KUBECTL, by_kind, kind_settings


def test_manifests_in_apply_order_with_the_service_account_everywhere() -> None:
    manifests = render_manifests(kind_settings())
    assert [m["kind"] for m in manifests] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Secret",
        "Deployment",
    ]
    k = by_kind(manifests)
    assert k["ServiceAccount"]["metadata"] == {
        "name": "cloud-controller-manager",
        "namespace": "kube-system",
        "labels": k["Deployment"]["metadata"]["labels"],
    }
    subject = {
        "kind": "ServiceAccount",
        "name": "cloud-controller-manager",
        "namespace": "kube-system",
    }
    assert k["ClusterRoleBinding"]["subjects"] == [subject]
    assert k["RoleBinding"]["subjects"] == [subject]
    assert k["ClusterRoleBinding"]["roleRef"]["name"] == k["ClusterRole"]["metadata"]["name"]
    assert k["RoleBinding"]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": k["Role"]["metadata"]["name"],
    }
    assert k["Role"]["metadata"]["namespace"] == "kube-system"
    assert "namespace" not in k["ClusterRole"]["metadata"]


@pytest.mark.parametrize("namespace", ["kube-system", "ccm-system"])
def test_every_manifest_round_trips_through_the_official_models(namespace: str) -> None:
    api: Any = ApiClient()
    for manifest in render_manifests(kind_settings(namespace=namespace)):
        model = api.deserialize(json.dumps(manifest), f"V1{manifest['kind']}", "application/json")
        assert type(model).__name__ == f"V1{manifest['kind']}"
        # a field the models do not know (a typo, a wrong level) would be dropped here
        assert api.sanitize_for_serialization(model) == manifest, manifest["kind"]


def test_round_trip_check_catches_an_unknown_field() -> None:
    api: Any = ApiClient()
    deployment = by_kind(render_manifests(kind_settings()))["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    model = api.deserialize(json.dumps(deployment), "V1Deployment", "application/json")
    assert api.sanitize_for_serialization(model) != deployment


def test_deployment_runs_one_leader_elected_hardened_replica() -> None:
    s = kind_settings(legacy=("k8s-81636",), cluster_name="lab")
    d = by_kind(render_manifests(s))["Deployment"]
    spec = d["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == "cloud-controller-manager"
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert {(t["key"], t["effect"]) for t in pod["tolerations"]} == {
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("node-role.kubernetes.io/control-plane", "NoSchedule"),
        ("node-role.kubernetes.io/master", "NoSchedule"),
    }
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532  # the Dockerfile's USER
    (c,) = pod["containers"]
    assert c["image"] == DEFAULT_IMAGE
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["resources"]["requests"] == {"cpu": "50m", "memory": "96Mi"}
    assert c["resources"]["limits"] == {"memory": "384Mi"}
    assert c["args"] == [
        "--cloud-config=/etc/kubernetes/cloud/cloud.conf",
        "--cluster-name=lab",
        "--leader-elect",
        "--leader-elect-resource-namespace=kube-system",
        "--leader-elect-resource-name=cloud-controller-manager",
        "--metrics-addr=0.0.0.0:10258",
        "--v=2",
        "--legacy-behavior=k8s-81636",
    ]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env == {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://172.30.0.1:4567",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE": "IPv4",
    }
    assert c["envFrom"] == [{"secretRef": {"name": "cloud-controller-manager-aws"}}]
    assert c["livenessProbe"]["httpGet"]["port"] == c["ports"][0]["containerPort"] == 10258
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts.keys() == volumes.keys() == {"cloud-config", "tmp"}
    assert mounts["cloud-config"]["readOnly"] is True
    assert volumes["cloud-config"]["configMap"]["name"] == "cloud-controller-manager-cloud-config"


def test_the_flags_parse_with_the_controllers_own_cli() -> None:
    from controller.app import build_parser, options_from_args
    from controller.legacy import LegacyFlags

    d = by_kind(render_manifests(kind_settings(legacy=("k8s-81636",))))["Deployment"]
    args = build_parser().parse_args(d["spec"]["template"]["spec"]["containers"][0]["args"])
    opts = options_from_args(args, LegacyFlags.parse(args.legacy_behavior))
    assert opts.leader_elect
    assert opts.leader.namespace == "kube-system"
    assert opts.metrics_addr == "0.0.0.0:10258"
    assert args.kubeconfig is None  # in-cluster config
    assert opts.legacy.enabled("k8s-81636")


def test_cloud_config_points_every_service_at_the_host_address() -> None:
    k = by_kind(render_manifests(kind_settings()))
    text = k["ConfigMap"]["data"]["cloud.conf"]
    config, warnings = load_cloud_config(text, source="configmap")  # the controller's parser
    assert warnings == []
    assert {o.service for o in config.service_overrides} == {"ec2", "elasticloadbalancing", "sts"}
    assert {o.url for o in config.service_overrides} == {"http://172.30.0.1:4566"}
    assert k["Secret"]["stringData"] == {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }


def test_a_custom_namespace_is_created_and_gets_no_system_priority() -> None:
    manifests = render_manifests(kind_settings(namespace="ccm-system", name="ccm"))
    assert manifests[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ccm-system", "labels": manifests[1]["metadata"]["labels"]},
    }
    d = by_kind(manifests)["Deployment"]
    assert "priorityClassName" not in d["spec"]["template"]["spec"]
    role = by_kind(manifests)["Role"]
    assert role["metadata"]["namespace"] == "ccm-system"
    assert role["rules"][1]["resourceNames"] == ["ccm"]
    args = d["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect-resource-namespace=ccm-system" in args
    assert "--leader-elect-resource-name=ccm" in args


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"image": "has space:1"}, "image must be a non-empty reference"),
        ({"image": ""}, "image must be a non-empty reference"),
        ({"image_pull_policy": "Sometimes"}, "image_pull_policy: unknown value 'Sometimes'"),
        ({"metrics_port": 0}, "metrics_port must be 1..65535, got 0"),
        ({"aws_credentials": {"TOKEN": "x"}}, "keys must be AWS_* variables, got ['TOKEN']"),
    ],
)
def test_bad_settings_name_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        InClusterSettings(**changes)


def test_bad_ports_name_the_field() -> None:
    with pytest.raises(ValueError, match=re.escape("imds_port must be 1..65535, got 70000")):
        lab_settings(host="172.18.0.1", aws_port=4566, imds_port=70000)


def test_kubectl_server_dry_run_accepts_the_kinds_the_simulator_serves(tmp_path: Path) -> None:
    if not KUBECTL.exists():
        pytest.skip(f"kubectl not installed at {KUBECTL}")
    rbac = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    manifests = [m for m in render_manifests(kind_settings()) if m["kind"] not in rbac]
    with KubeServer() as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        done = subprocess.run(
            [
                str(KUBECTL),
                "--kubeconfig",
                str(kubeconfig),
                "apply",
                "--dry-run=server",
                "-f",
                "-",
                "-o",
                "name",
            ],
            input=to_yaml(manifests),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [
            "serviceaccount/cloud-controller-manager",
            "configmap/cloud-controller-manager-cloud-config",
            "secret/cloud-controller-manager-aws",
            "deployment.apps/cloud-controller-manager",
        ]
        # a dry run persists nothing
        core: Any = CoreV1Api(sim.api_client())
        names = [
            sa.metadata.name for sa in core.list_namespaced_service_account("kube-system").items
        ]
        assert "cloud-controller-manager" not in names
