"""The in-cluster deployment option (``lab.incluster``, ``deploy/``), tested through its seams.

There is no Docker engine here, so the image is never built in this suite unless the ``kind``
test finds Docker and kind. What is tested instead:

* the rendered manifests, field by field, and as the official client's models (every object
  round-trips through ``kubernetes.client`` deserialization unchanged, so no misspelled or
  unknown field survives), plus ``kubectl apply --dry-run=server`` against the API simulator for
  the kinds it serves (it serves no ``rbac.authorization.k8s.io``, and kubectl's client-side
  dry run needs a server's discovery, so RBAC objects are checked by the models and the RBAC
  evaluation below);
* RBAC derived from the controller, verified against what the API simulator served: the real
  controller process runs a service and a node lifecycle while a hook on the simulator's request
  handler records every request carrying the controller's own bearer token. Every request must
  be allowed by the rendered roles, and every granted verb must have been used. A second test
  calls each method of the ``KubeClient`` seam (``controller/runtime/kube.py``) directly, so a
  new API call in the controller fails here until the roles grant it;
* ``deploy``/``undeploy`` command sequences with fake ``docker``/``kind``/``kubectl`` on PATH;
* the Dockerfile and ``.dockerignore`` (an allow-list evaluated with Docker's matching rules).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from controller.aws.config import load_cloud_config
from controller.runtime.kube import ApiKube, KubeClient
from lab.cluster.kind import KindProvider
from lab.compose import Lab, wait_for
from lab.controllerproc import ControllerProcess
from lab.daemon import write_state
from lab.exec import CommandError, SubprocessRunner
from lab.incluster import (
    CLUSTER_RULES,
    DEFAULT_IMAGE,
    REPO_ROOT,
    InClusterSettings,
    deploy,
    deploy_to_lab,
    lab_settings,
    render_manifests,
    to_yaml,
    undeploy,
    undeploy_from_lab,
)
from lab.kube.server import KubeServer
from lab.kube.wire import Request
from lab.labctl import LabError
from tests.cluster.fakecli import FakeCLI, container

Obj = dict[str, Any]
PROBE_TOKEN = "ccm-rbac-probe"
KUBECTL = Path(sys.executable).parent / "kubectl"
LB_SERVICE: Obj = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "rbac-web", "namespace": "default"},
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
    },
}


def _settings(**changes: Any) -> InClusterSettings:
    return lab_settings(host="172.30.0.1", aws_port=4566, imds_port=4567, **changes)


def _by_kind(manifests: Iterable[Obj]) -> dict[str, Obj]:
    return {m["kind"]: m for m in manifests}


# --- manifests -------------------------------------------------------------------------------


def test_manifests_in_apply_order_with_the_service_account_everywhere() -> None:
    manifests = render_manifests(_settings())
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
    k = _by_kind(manifests)
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
    for manifest in render_manifests(_settings(namespace=namespace)):
        model = api.deserialize(json.dumps(manifest), f"V1{manifest['kind']}", "application/json")
        assert type(model).__name__ == f"V1{manifest['kind']}"
        # a field the models do not know (a typo, a wrong level) would be dropped here
        assert api.sanitize_for_serialization(model) == manifest, manifest["kind"]


def test_round_trip_check_catches_an_unknown_field() -> None:
    api: Any = ApiClient()
    deployment = _by_kind(render_manifests(_settings()))["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    model = api.deserialize(json.dumps(deployment), "V1Deployment", "application/json")
    assert api.sanitize_for_serialization(model) != deployment


def test_deployment_runs_one_leader_elected_hardened_replica() -> None:
    s = _settings(legacy=("k8s-81636",), cluster_name="lab")
    d = _by_kind(render_manifests(s))["Deployment"]
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

    d = _by_kind(render_manifests(_settings(legacy=("k8s-81636",))))["Deployment"]
    args = build_parser().parse_args(d["spec"]["template"]["spec"]["containers"][0]["args"])
    opts = options_from_args(args, LegacyFlags.parse(args.legacy_behavior))
    assert opts.leader_elect
    assert opts.leader.namespace == "kube-system"
    assert opts.metrics_addr == "0.0.0.0:10258"
    assert args.kubeconfig is None  # in-cluster config
    assert opts.legacy.enabled("k8s-81636")


def test_cloud_config_points_every_service_at_the_host_address() -> None:
    k = _by_kind(render_manifests(_settings()))
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
    manifests = render_manifests(_settings(namespace="ccm-system", name="ccm"))
    assert manifests[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ccm-system", "labels": manifests[1]["metadata"]["labels"]},
    }
    d = _by_kind(manifests)["Deployment"]
    assert "priorityClassName" not in d["spec"]["template"]["spec"]
    role = _by_kind(manifests)["Role"]
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
    manifests = [m for m in render_manifests(_settings()) if m["kind"] not in rbac]
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
        core: Any = __import__("kubernetes.client", fromlist=["CoreV1Api"]).CoreV1Api(
            sim.api_client()
        )
        names = [
            sa.metadata.name for sa in core.list_namespaced_service_account("kube-system").items
        ]
        assert "cloud-controller-manager" not in names


# --- RBAC: an evaluator and the requests the simulator served ------------------------------


@dataclasses.dataclass(frozen=True)
class ApiRequest:
    """One served request in RBAC terms."""

    method: str
    target: str
    status: int
    verb: str
    group: str
    resource: str  # "nodes" or "nodes/status"
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        request = f"{self.method} {self.target}"
        return f"{self.verb} {self.group or 'core'}/{self.resource}{where} ({request})"


_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def classify(method: str, target: str, status: int) -> ApiRequest:
    url = urllib.parse.urlsplit(target)
    m = _PATH.match(url.path)
    if m is None:
        raise AssertionError(f"not a resource request (no RBAC rule can allow it): {target}")
    query = urllib.parse.parse_qs(url.query)
    name = m["name"] or ""
    if method == "GET":
        verb = "get" if name else ("watch" if query.get("watch") == ["true"] else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
    resource = f"{m['res']}/{m['sub']}" if m["sub"] else m["res"]
    return ApiRequest(method, target, status, verb, m["group"] or "", resource, m["ns"] or "", name)


def _rule_allows(rule: Obj, req: ApiRequest) -> bool:
    names = rule.get("resourceNames") or []
    return (
        req.group in rule["apiGroups"]
        and req.resource in rule["resources"]
        and req.verb in rule["verbs"]
        and (not names or req.name in names)
    )


def granting_rules(manifests: list[Obj], namespace: str, sa: str) -> list[tuple[str, Obj]]:
    """(scope, rule) for every rule bound to the service account; scope "" = cluster-wide."""
    roles = {
        (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"]): m
        for m in manifests
        if m["kind"] in ("ClusterRole", "Role")
    }
    subject = {"kind": "ServiceAccount", "name": sa, "namespace": namespace}
    out: list[tuple[str, Obj]] = []
    for binding in manifests:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if subject not in binding["subjects"]:
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace", "")
        role_ns = "" if ref["kind"] == "ClusterRole" else scope
        role = roles[(ref["kind"], role_ns, ref["name"])]
        out += [(scope, rule) for rule in role["rules"]]
    return out


def allowed(rules: list[tuple[str, Obj]], req: ApiRequest) -> bool:
    return any((not scope or scope == req.namespace) and _rule_allows(r, req) for scope, r in rules)


def unused_grants(rules: list[tuple[str, Obj]], used: Iterable[ApiRequest]) -> list[str]:
    """Every (rule, resource, verb) cell that no served request needed."""
    used = list(used)
    out = []
    for scope, rule in rules:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                cell = {**rule, "resources": [resource], "verbs": [verb]}
                if not any(
                    (not scope or scope == r.namespace) and _rule_allows(cell, r) for r in used
                ):
                    out.append(
                        f"{verb} {rule['apiGroups']}/{resource} (scope {scope or 'cluster'})"
                    )
    return out


class ServedRequests:
    """Records what the simulator's request handler served to one bearer token."""

    def __init__(self, sim: KubeServer, monkeypatch: pytest.MonkeyPatch, token: str) -> None:
        self.requests: list[ApiRequest] = []
        inner = sim.api.handle
        header = f"Bearer {token}"

        def handle(req: Request) -> Any:
            resp = inner(req)
            if req.headers.get("authorization") == header:
                self.requests.append(classify(req.method, req.target, resp.status))
            return resp

        monkeypatch.setattr(sim.api, "handle", handle)

    def where(self, pred: Callable[[ApiRequest], bool]) -> list[ApiRequest]:
        return [r for r in list(self.requests) if pred(r)]


def _token_kubeconfig(sim: KubeServer, path: Path) -> Path:
    config = sim.kubeconfig()
    config["users"][0]["user"] = {"token": PROBE_TOKEN}
    path.write_text(yaml.safe_dump(config))
    return path


def test_no_wildcards_and_no_access_to_secrets_or_configmaps() -> None:
    manifests = render_manifests(_settings())
    rules = [r for _, r in granting_rules(manifests, "kube-system", "cloud-controller-manager")]
    assert len(rules) == len(CLUSTER_RULES) + 2
    for rule in rules:
        assert "nonResourceURLs" not in rule
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
        assert not {"secrets", "configmaps", "pods"} & set(rule["resources"]), rule


def _exercise_every_seam_method(kube: ApiKube, core: Any) -> set[str]:
    """Call each ``KubeClient`` method once against real objects; return the names called."""
    called: set[str] = set()

    def call(name: str, *args: Any) -> Any:
        called.add(name)
        return getattr(kube, name)(*args)

    core.create_namespaced_service("default", LB_SERVICE)
    core.create_node({"metadata": {"name": "rbac-node"}})
    call("list_objects", "services")
    call("list_objects", "nodes")
    call("watch_objects", "services", "0", 1).close()
    call("watch_objects", "nodes", "0", 1).close()
    call(
        "add_service_finalizer",
        "default",
        "rbac-web",
        "service.kubernetes.io/load-balancer-cleanup",
    )
    call(
        "patch_service_load_balancer_status",
        "default",
        "rbac-web",
        {"ingress": [{"hostname": "a.elb"}]},
    )
    call(
        "remove_service_finalizer",
        "default",
        "rbac-web",
        "service.kubernetes.io/load-balancer-cleanup",
    )
    node = call("get_node", "rbac-node")
    node["metadata"].setdefault("labels", {})["probe"] = "1"
    call("replace_node", node)
    call("patch_node_addresses", "rbac-node", [{"type": "InternalIP", "address": "10.0.0.9"}])
    call("delete_node", "rbac-node")
    event = {
        "metadata": {"name": "rbac-web.1", "namespace": "default"},
        "involvedObject": {"kind": "Service", "name": "rbac-web", "namespace": "default"},
        "reason": "Probe",
        "message": "probe",
        "type": "Normal",
        "count": 1,
    }
    call("create_event", "default", event)
    call("patch_event", "default", "rbac-web.1", {"count": 2})
    lease = {
        "metadata": {"name": "cloud-controller-manager", "namespace": "kube-system"},
        "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 15},
    }
    created = call("create_lease", "kube-system", lease)
    call("get_lease", "kube-system", "cloud-controller-manager")
    call("replace_lease", "kube-system", "cloud-controller-manager", created)
    return called


def test_every_kube_seam_call_is_allowed_and_every_grant_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seam's whole surface, called once each: the roles allow exactly this."""
    seam = {
        n for n, _ in inspect.getmembers(KubeClient, inspect.isfunction) if not n.startswith("_")
    }
    manifests = render_manifests(_settings())
    rules = granting_rules(manifests, "kube-system", "cloud-controller-manager")
    with KubeServer() as sim:
        served = ServedRequests(sim, monkeypatch, PROBE_TOKEN)
        kube = ApiKube.from_kubeconfig(str(_token_kubeconfig(sim, tmp_path / "kubeconfig")))
        from kubernetes.client import CoreV1Api

        try:
            called = _exercise_every_seam_method(kube, CoreV1Api(sim.api_client()))
        finally:
            kube.close()
    assert called == seam, f"seam methods not exercised (add them here): {seam - called}"
    assert served.requests, "the hook recorded nothing"
    failed = [r for r in served.requests if r.status >= 400]
    assert not failed, [str(r) for r in failed]
    denied = [str(r) for r in served.requests if not allowed(rules, r)]
    assert not denied, "the controller needs more than the roles grant:\n" + "\n".join(denied)
    assert unused_grants(rules, served.requests) == []


def test_roles_that_miss_a_verb_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator is not vacuous: drop one verb and a served request is denied."""
    manifests = render_manifests(_settings())
    role = _by_kind(manifests)["ClusterRole"]
    role["rules"] = [
        {**r, "verbs": [v for v in r["verbs"] if v != "delete"]} for r in role["rules"]
    ]
    rules = granting_rules(manifests, "kube-system", "cloud-controller-manager")
    delete = classify("DELETE", "/api/v1/nodes/a", 200)
    assert not allowed(rules, delete)
    lease_get_other = classify(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/other", 200
    )
    assert not allowed(rules, lease_get_other)  # resourceNames pins our Lease
    lease_in_default = classify(
        "POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", 201
    )
    assert not allowed(rules, lease_in_default)  # the Role is namespaced
    assert unused_grants(rules, [delete]) != []


def _node_initialized(core: Any, name: str) -> bool:
    taints = core.read_node(name).spec.taints or []
    return not any(t.key == "node.cloudprovider.kubernetes.io/uninitialized" for t in taints)


def _gone(read: Callable[[], Any]) -> bool:
    try:
        read()
    except Exception as exc:  # kubernetes.client.ApiException
        if getattr(exc, "status", None) == 404:
            return True
        raise
    return False


@pytest.mark.standin("stops a worker's heartbeats so the lifecycle controller deletes its node")
def test_controller_process_requests_are_allowed_and_use_every_grant(
    lab: Lab, core_v1: Any, ec2: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real controller process, leader-elected, through a service's and a node's life."""
    sim = lab.kube
    assert sim is not None
    assert lab.kubelet is not None
    served = ServedRequests(sim, monkeypatch, PROBE_TOKEN)
    spec = lab.controller_spec(
        args=(
            "--leader-elect",
            "--node-monitor-period=0.3s",
            "--node-deletion-grace-period=1s",
        )
    )
    spec = dataclasses.replace(spec, kubeconfig=_token_kubeconfig(sim, tmp_path / "kubeconfig"))
    proc = ControllerProcess(spec)
    lab.controller = proc  # the next reset kills it if this test fails midway
    proc.start()
    worker = lab.workers[0]
    wait_for(
        lambda: all(_node_initialized(core_v1, n.name) for n in lab.nodes),
        timeout=30,
        what="nodes initialized",
    )
    core_v1.create_namespaced_service("default", LB_SERVICE)
    wait_for(
        lambda: core_v1.read_namespaced_service("rbac-web", "default").status.load_balancer.ingress,
        timeout=30,
        what="load balancer ingress",
    )
    # a spec change resyncs: "Ensuring load balancer" again is aggregated into a PATCH
    core_v1.patch_namespaced_service(
        "rbac-web",
        "default",
        {
            "spec": {
                "ports": [
                    *LB_SERVICE["spec"]["ports"],
                    {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
                ]
            }
        },
    )
    wait_for(
        lambda: served.where(lambda r: r.resource == "events" and r.verb == "patch"),
        timeout=30,
        what="an aggregated event patch",
    )
    ec2.terminate_instances(InstanceIds=[worker.instance_id])
    lab.kubelet.stop_heartbeat(worker.name)
    wait_for(lambda: _gone(lambda: core_v1.read_node(worker.name)), timeout=30, what="node deleted")
    core_v1.delete_namespaced_service("rbac-web", "default")
    wait_for(
        lambda: _gone(lambda: core_v1.read_namespaced_service("rbac-web", "default")),
        timeout=30,
        what="service gone (finalizer removed)",
    )
    wait_for(
        lambda: served.where(lambda r: r.resource == "leases" and r.verb == "update"),
        timeout=30,
        what="a lease renewal",
    )
    assert proc.stop() == 0, proc.log_tail()

    rules = granting_rules(render_manifests(_settings()), "kube-system", "cloud-controller-manager")
    denied = [str(r) for r in served.requests if not allowed(rules, r)]
    assert not denied, "the controller made requests the roles deny:\n" + "\n".join(denied)
    assert unused_grants(rules, served.requests) == []
    errors = [str(r) for r in served.requests if r.status >= 500]
    assert not errors


# --- deploy / undeploy with fake CLIs ------------------------------------------------------

_FAKE = """#!{python} -IS
import json, os, sys
argv = sys.argv[1:]
root = {root!r}
stdin = sys.stdin.read() if "-f" in argv and argv[argv.index("-f") + 1] == "-" else None
if {name!r} == "docker" and argv[:1] != ["build"]:
    os.execv({fallback!r}, [{fallback!r}, *argv])
with open(os.path.join(root, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": [{name!r}, *argv], "cwd": os.getcwd(), "stdin": stdin}}) + "\\n")
if os.path.exists(os.path.join(root, "fail-" + {name!r} + "-" + argv[0])):
    sys.stderr.write("ERROR: fake " + {name!r} + " " + argv[0] + " failed\\n"); sys.exit(1)
if {name!r} == "docker" and not os.path.exists("deploy/Dockerfile"):
    sys.stderr.write("unable to prepare context: deploy/Dockerfile not found\\n"); sys.exit(1)
"""


@dataclasses.dataclass
class Fakes:
    cli: FakeCLI
    runner: SubprocessRunner
    kubeconfig: Path

    def calls(self) -> list[Obj]:
        path = self.cli.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def fail(self, tool: str, command: str) -> None:
        (self.cli.root / f"fail-{tool}-{command}").touch()


@pytest.fixture
def fakes(tmp_path: Path) -> Fakes:
    cli = FakeCLI(tmp_path / "fake")
    cli.set(networks=["kind"], gateway="172.30.0.1")
    extra = tmp_path / "fake" / "wrappers"
    extra.mkdir()
    for name in ("docker", "kubectl"):
        path = extra / name
        path.write_text(
            _FAKE.format(
                python=sys.executable,
                root=str(cli.root),
                name=name,
                fallback=str(cli.bin / "docker"),
            )
        )
        path.chmod(0o755)
    runner = SubprocessRunner(
        base_env={"PATH": os.pathsep.join([str(extra), str(cli.bin), os.environ["PATH"]])}
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    return Fakes(cli, runner, kubeconfig)


def test_deploy_builds_loads_applies_and_waits_in_order(fakes: Fakes, tmp_path: Path) -> None:
    provider = KindProvider("ccm-lab", state_dir=tmp_path / "state", runner=fakes.runner)
    settings = lab_settings(host=provider.host_address(), aws_port=4566, imds_port=4567)
    applied = deploy(provider, settings=settings, runner=fakes.runner, kubeconfig=fakes.kubeconfig)
    calls = fakes.calls()
    kc = str(fakes.kubeconfig)
    assert [c["argv"] for c in calls] == [
        [
            "docker",
            "network",
            "inspect",
            "kind",
            "--format",
            "{{range .IPAM.Config}}{{.Gateway}} {{end}}",
        ],
        ["docker", "build", "-f", "deploy/Dockerfile", "-t", DEFAULT_IMAGE, "."],
        ["kind", "load", "docker-image", DEFAULT_IMAGE, "--name", "ccm-lab"],
        ["kubectl", "--kubeconfig", kc, "apply", "-f", "-"],
        [
            "kubectl",
            "--kubeconfig",
            kc,
            "rollout",
            "status",
            "deployment/cloud-controller-manager",
            "--namespace",
            "kube-system",
            "--timeout=180s",
        ],
    ]
    assert calls[1]["cwd"] == str(REPO_ROOT)
    assert list(yaml.safe_load_all(calls[3]["stdin"])) == applied == render_manifests(settings)
    text = _by_kind(applied)["ConfigMap"]["data"]["cloud.conf"]
    assert "URL = http://172.30.0.1:4566" in text


def test_deploy_stops_at_the_failed_build_with_a_pasteable_command(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.fail("docker", "build")
    provider = KindProvider("ccm-lab", state_dir=tmp_path / "state", runner=fakes.runner)
    with pytest.raises(CommandError) as err:
        deploy(provider, settings=_settings(), runner=fakes.runner, kubeconfig=fakes.kubeconfig)
    assert f"$ docker build -f deploy/Dockerfile -t {DEFAULT_IMAGE} ." in str(err.value)
    assert "fake docker build failed" in str(err.value)
    assert [c["argv"][0] for c in fakes.calls()] == ["docker"]  # nothing loaded or applied


def test_deploy_without_build_or_wait(fakes: Fakes, tmp_path: Path) -> None:
    provider = KindProvider("lab2", state_dir=tmp_path / "state", runner=fakes.runner)
    settings = _settings(image="registry.local/ccm:1.2.3")
    deploy(
        provider,
        settings=settings,
        runner=fakes.runner,
        kubeconfig=fakes.kubeconfig,
        build=False,
        wait_timeout=None,
    )
    assert [c["argv"][:4] for c in fakes.calls()] == [
        ["kind", "load", "docker-image", "registry.local/ccm:1.2.3"],
        ["kubectl", "--kubeconfig", str(fakes.kubeconfig), "apply"],
    ]


def test_undeploy_deletes_in_reverse_and_never_a_system_namespace(fakes: Fakes) -> None:
    for namespace, first in (("kube-system", "Deployment"), ("ccm-system", "Deployment")):
        settings = _settings(namespace=namespace)
        undeploy(settings, runner=fakes.runner, kubeconfig=fakes.kubeconfig)
        call = fakes.calls()[-1]
        assert call["argv"] == [
            "kubectl",
            "--kubeconfig",
            str(fakes.kubeconfig),
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
        ]
        docs = list(yaml.safe_load_all(call["stdin"]))
        assert docs[0]["kind"] == first
        namespaces = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
        assert namespaces == ([] if namespace == "kube-system" else ["ccm-system"])


def _lab_state(root: Path, name: str = "t", **changes: Any) -> Path:
    state_dir = root / name
    state_dir.mkdir(parents=True)
    state: Obj = {
        "name": name,
        "backend": "kind",
        "kubeconfig": str(state_dir / "kubeconfig"),
        "aws_endpoint": "http://0.0.0.0:41000",
        "imds_endpoint": "http://0.0.0.0:41001",
        "region": "us-east-1",
        "cluster_id": "ccm-lab",
        "controller": None,
        **changes,
    }
    write_state(state_dir, state)
    return root


def test_deploy_to_a_kind_lab_uses_its_gateway_and_ports(fakes: Fakes, tmp_path: Path) -> None:
    root = _lab_state(tmp_path / "labs")
    cluster = "ccm-lab-t"
    network = f"ccm-lab-{cluster}"
    fakes.cli.set(
        containers=[
            container(f"{cluster}-control-plane", "control-plane", cluster, "10.0.1.140", network)
        ]
    )
    applied = deploy_to_lab(
        "t", root=root, runner=fakes.runner, legacy=["k8s-81636"], wait_timeout=None
    )
    argvs = [c["argv"] for c in fakes.calls()]
    assert [a[:2] for a in argvs] == [
        ["docker", "ps"],
        ["docker", "inspect"],
        ["docker", "build"],
        ["kind", "load"],
        ["kubectl", "--kubeconfig"],
    ]
    assert argvs[3] == ["kind", "load", "docker-image", DEFAULT_IMAGE, "--name", cluster]
    assert argvs[4][2] == str(root / "t" / "kubeconfig")
    k = _by_kind(applied)
    assert "URL = http://172.30.0.1:41000" in k["ConfigMap"]["data"]["cloud.conf"]
    env = k["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT", "value": "http://172.30.0.1:41001"} in env


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"backend": "sim"}, "runs on 'sim'; the in-cluster controller needs kind"),
        ({"controller": {"pid": 1}}, "already runs the controller as a local process"),
        (
            {"aws_endpoint": "http://127.0.0.1:41000"},
            "['http://127.0.0.1:41000'] listen on loopback only",
        ),
    ],
)
def test_deploy_to_lab_refuses_with_the_reason(
    fakes: Fakes, tmp_path: Path, changes: Obj, message: str
) -> None:
    root = _lab_state(tmp_path / "labs", **changes)
    with pytest.raises(LabError, match=re.escape(message)):
        deploy_to_lab("t", root=root, runner=fakes.runner)
    assert not (fakes.cli.root / "calls.jsonl").exists()  # nothing was run


def test_deploy_to_lab_turns_a_failed_command_into_a_lab_error(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = _lab_state(tmp_path / "labs")
    fakes.cli.set(
        containers=[container("ccm-lab-t-control-plane", "control-plane", "t", "10.0.1.9")]
    )
    fakes.fail("docker", "build")
    with pytest.raises(LabError, match=re.escape("$ docker build -f deploy/Dockerfile")):
        deploy_to_lab("t", root=root, runner=fakes.runner)


def test_undeploy_from_lab_deletes_with_the_labs_kubeconfig(fakes: Fakes, tmp_path: Path) -> None:
    root = _lab_state(tmp_path / "labs")
    undeploy_from_lab("t", root=root, runner=fakes.runner)
    (call,) = fakes.calls()
    assert call["argv"][:4] == ["kubectl", "--kubeconfig", str(root / "t" / "kubeconfig"), "delete"]
    kinds = [d["kind"] for d in yaml.safe_load_all(call["stdin"])]
    assert kinds[0] == "Deployment"
    assert "Namespace" not in kinds


def test_deploy_to_a_lab_that_is_not_up_says_how_to_start_it(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=re.escape("invoke lab.up --name nope")):
        deploy_to_lab("nope", root=tmp_path)


# --- Dockerfile and .dockerignore ----------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    text = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_is_slim_non_root_without_dev_extras() -> None:
    steps = _dockerfile()
    args = dict(a.split("=", 1) for op, a in steps if op == "ARG" and "=" in a)
    assert args["PYTHON_IMAGE"].startswith("python:3.11-slim")
    froms = [a for op, a in steps if op == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM") :]
    users = [a for op, a in final if op == "USER"]
    assert users == ["65532:65532"]
    assert [a for op, a in final if op == "ENTRYPOINT"] == ['["python", "-m", "controller"]']
    runs = " ".join(a for op, a in steps if op == "RUN")
    assert "pip install --constraint deploy/constraints.txt ." in runs
    assert "[dev]" not in runs
    assert "--no-cache-dir" in runs or "PIP_NO_CACHE_DIR=1" in " ".join(a for _, a in steps)
    for op, a in steps:
        if op == "COPY" and not a.startswith("--from"):
            for src in a.split()[:-1]:
                assert (REPO_ROOT / src).exists(), src


def test_constraints_pin_what_the_tests_run_with() -> None:
    """The image installs exactly the runtime versions this virtualenv tests."""
    spec = importlib.util.spec_from_file_location(
        "pin", REPO_ROOT / "deploy" / "pin_constraints.py"
    )
    assert spec is not None
    assert spec.loader is not None
    pin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pin)
    pins = pin.runtime_pins()
    assert {"boto3", "kubernetes", "moto", "prometheus-client"} <= pins.keys()
    assert not {"pytest", "mypy", "ruff", "hypothesis"} & pins.keys()  # no dev extras
    current = (REPO_ROOT / "deploy" / "constraints.txt").read_text()
    assert current == pin.render(pins), (
        "deploy/constraints.txt is stale; run .venv/bin/python deploy/pin_constraints.py"
    )


def _docker_pattern(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):
                out, i = out[:-2] + "(?:.*/)?", i + 1
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pat = os.path.normpath(raw[1:] if negate else raw)
        rx = _docker_pattern(pat)
        if any(rx.match(c) for c in candidates):
            excluded = not negate
    return excluded


def _ignore_patterns() -> list[str]:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("controller/app.py", False),
        ("controller/aws/config.py", False),
        ("lab/exec.py", False),
        ("deploy/Dockerfile", False),
        ("deploy/constraints.txt", False),
        ("deploy/pin_constraints.py", True),
        (".venv/bin/python", True),
        (".lab/default/state.json", True),
        (".git/config", True),
        ("tests/test_incluster.py", True),
        ("e2e/test_node_lifecycle.py", True),
        ("controller/__pycache__/app.cpython-311.pyc", True),
        ("lab/kube/__pycache__/store.cpython-311.pyc", True),
        (".mypy_cache/3.11/x.json", True),
        ("ccm_lab.egg-info/PKG-INFO", True),
        ("kubeconfig", True),
    ],
)
def test_dockerignore_is_an_allow_list(path: str, ignored: bool) -> None:
    assert dockerignored(path, _ignore_patterns()) is ignored


def _context_files() -> Iterator[Path]:
    patterns = _ignore_patterns()
    for path in sorted(REPO_ROOT.rglob("*")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if (
            path.is_file()
            and not rel.startswith((".git/", ".venv/"))
            and not dockerignored(rel, patterns)
        ):
            yield path


def test_the_build_context_holds_a_runnable_controller(tmp_path: Path) -> None:
    """What Docker would send: copied out, it still runs ``python -m controller --help``."""
    ctx = tmp_path / "ctx"
    for path in _context_files():
        target = ctx / path.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    assert (ctx / "controller" / "__main__.py").exists()
    assert not (ctx / "tests").exists()
    assert not list(ctx.rglob("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-B", "-m", "controller", "--help"],
        cwd=ctx,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--leader-elect" in done.stdout


# --- the real thing, where Docker and kind exist --------------------------------------------


def _docker_and_kind() -> str | None:
    """Why the real build-load-deploy test cannot run here, or None."""
    problems = []
    if shutil.which("kind") is None:
        problems.append("no kind CLI on PATH")
    if shutil.which("docker") is None:
        problems.append("no docker CLI on PATH")
    else:
        try:
            done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
            if done.returncode != 0:
                problems.append("`docker info` does not answer (no Docker engine)")
        except subprocess.TimeoutExpired:
            problems.append("`docker info` timed out")
    return "; ".join(problems) or None


@pytest.mark.kind
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_load_and_deploy_on_kind(tmp_path: Path) -> None:
    """Really build the image, load it into a one-node kind cluster and roll it out; the pod
    reaches the lab's AWS endpoint and IMDS on the nodes' gateway, elects itself leader and
    turns ready."""
    reason = _docker_and_kind()
    if reason:
        pytest.skip(reason)
    from lab.aws import AwsServer
    from lab.cluster.base import ClusterSpec, NodeSpec, Role
    from lab.cluster.versions import KubeVersion
    from lab.imds import ImdsServer

    name = f"ccm-incluster-{os.getpid()}"
    provider = KindProvider(name, state_dir=tmp_path, strict_kind_version=False)
    spec = ClusterSpec(name, KubeVersion.parse("1.33"), (NodeSpec(Role.CONTROL_PLANE),))
    runner = SubprocessRunner()
    try:
        provider.provision(spec)
        host = provider.host_address()
        # listen on every address so pods reach them through the gateway
        with AwsServer(host="0.0.0.0") as aws, ImdsServer(aws.url, host="0.0.0.0") as imds:
            settings = lab_settings(
                host=host,
                aws_port=urllib.parse.urlsplit(aws.url).port or 0,
                imds_port=urllib.parse.urlsplit(imds.url).port or 0,
            )
            deploy(provider, settings=settings, runner=runner, kubeconfig=provider.kubeconfig())
            lease = runner.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(provider.kubeconfig()),
                    "get",
                    "lease",
                    "-n",
                    "kube-system",
                    "cloud-controller-manager",
                    "-o",
                    "json",
                ]
            )
            assert json.loads(lease.stdout)["spec"]["holderIdentity"]
            undeploy(settings, runner=runner, kubeconfig=provider.kubeconfig())
    finally:
        provider.delete()
