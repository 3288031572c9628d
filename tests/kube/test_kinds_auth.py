"""Workload, RBAC and aggregation kinds, ``scale``, tokens and the review APIs.

Driven by the official Python client and the real ``kubectl`` (``.venv/bin/kubectl``) against a
started simulator: defaults as upstream's SetDefaults_* functions write them, discovery as
``kubectl api-resources`` prints it, ``kubectl scale``, ``kubectl create token``, ``kubectl auth
whoami`` / ``can-i`` with the default AlwaysAllow authorizer and with ``authorization="rbac"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lab.kube.server import KubeServer

KUBECTL = Path(sys.executable).with_name("kubectl")
needs_kubectl = pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl not at {KUBECTL}")


def kubectl(kubeconfig: Path, *args: str, token: str | None = None, check: bool = True) -> str:
    argv = [
        str(KUBECTL),
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(kubeconfig.parent / "cache"),
        "--request-timeout",
        "20s",
    ]
    if token:
        argv += ["--token", token]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {args} failed: {done.stderr}")
    return done.stdout + (done.stderr if not check else "")


@pytest.fixture
def kubeconfig(sim: KubeServer, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    sim.write_kubeconfig(path)
    return path


@pytest.fixture
def rbac_sim(tmp_path: Path) -> Iterator[tuple[KubeServer, Path]]:
    with KubeServer(authorization="rbac", tls=True) as sim:
        path = tmp_path / "kubeconfig"
        sim.write_kubeconfig(path)
        yield sim, path
        assert sim.take_internal_errors() == []


def _template(labels: dict[str, str], restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": labels}, "spec": spec}


# ---- kinds and defaults -------------------------------------------------------------------


def test_workload_defaults_as_upstream(sim: KubeServer, api_client: Any) -> None:
    apps, batch = client.AppsV1Api(api_client), client.BatchV1Api(api_client)
    sel = {"matchLabels": {"app": "x"}}
    ds = apps.create_namespaced_daemon_set(
        "default",
        {
            "metadata": {"name": "ds"},
            "spec": {"selector": sel, "template": _template({"app": "x"})},
        },
    )
    assert ds.metadata.annotations == {"deprecated.daemonset.template.generation": "1"}
    assert ds.spec.update_strategy.type == "RollingUpdate"
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
    assert ds.spec.update_strategy.rolling_update.max_surge == 0
    assert ds.spec.revision_history_limit == 10
    assert ds.status.desired_number_scheduled == 0
    assert ds.status.number_ready == 0
    ds.spec.template.spec.containers[0].image = "busybox:1.37"
    ds = apps.replace_namespaced_daemon_set("ds", "default", ds)
    assert ds.metadata.annotations["deprecated.daemonset.template.generation"] == "2"
    assert ds.metadata.generation == 2

    sts = apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "sts"},
            "spec": {"selector": sel, "template": _template({"app": "x"})},
        },
    )
    assert sts.spec.replicas == 1
    assert sts.spec.pod_management_policy == "OrderedReady"
    assert sts.spec.update_strategy.rolling_update.partition == 0
    assert sts.spec.persistent_volume_claim_retention_policy.when_deleted == "Retain"
    assert sts.status.replicas == 0

    job = batch.create_namespaced_job(
        "default", {"metadata": {"name": "pi"}, "spec": {"template": _template({}, "Never")}}
    )
    uid = job.metadata.uid
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert job.spec.template.metadata.labels["job-name"] == "pi"
    assert job.metadata.labels["batch.kubernetes.io/job-name"] == "pi"
    assert (job.spec.completions, job.spec.parallelism, job.spec.backoff_limit) == (1, 1, 6)
    assert job.spec.completion_mode == "NonIndexed"
    assert job.spec.pod_replacement_policy == "TerminatingOrFailed"
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(
            "default", {"metadata": {"name": "bad"}, "spec": {"template": _template({})}}
        )
    assert err.value.status == 422
    message = json.loads(err.value.body)["message"]
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in message

    cj = batch.create_namespaced_cron_job(
        "default",
        {
            "metadata": {"name": "cj"},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": _template({}, "OnFailure")}},
            },
        },
    )
    assert (cj.spec.concurrency_policy, cj.spec.successful_jobs_history_limit) == ("Allow", 3)
    assert cj.spec.failed_jobs_history_limit == 1
    assert cj.spec.suspend is False

    rc = client.CoreV1Api(api_client).create_namespaced_replication_controller(
        "default", {"metadata": {"name": "rc"}, "spec": {"template": _template({"app": "rc"})}}
    )
    assert rc.spec.selector == {"app": "rc"}
    assert rc.metadata.labels == {"app": "rc"}
    assert rc.spec.replicas == 1
    assert rc.status.replicas == 0


def test_rbac_objects_defaults_and_validation(sim: KubeServer, api_client: Any) -> None:
    rbac = client.RbacAuthorizationV1Api(api_client)
    rb = rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "rb"},
            "roleRef": {"kind": "Role", "name": "r", "apiGroup": ""},
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    assert rb.role_ref.api_group == "rbac.authorization.k8s.io"
    assert rb.subjects[0].api_group == "rbac.authorization.k8s.io"
    rb.role_ref.name = "other"
    with pytest.raises(ApiException) as err:
        rbac.replace_namespaced_role_binding("rb", "default", rb)
    assert err.value.status == 422
    assert "cannot change roleRef" in err.value.body
    with pytest.raises(ApiException) as err:
        rbac.create_namespaced_role(
            "default",
            {"metadata": {"name": "r"}, "rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}]},
        )
    assert "namespaced rules cannot apply to non-resource URLs" in err.value.body
    assert rbac.read_cluster_role("cluster-admin").rules[0].verbs == ["*"]


def test_local_api_services_listed(sim: KubeServer, api_client: Any) -> None:
    items = client.ApiregistrationV1Api(api_client).list_api_service().items
    by_name = {a.metadata.name: a for a in items}
    assert {"v1.", "v1.apps", "v1.batch", "v1.rbac.authorization.k8s.io"} <= set(by_name)
    core = by_name["v1."]
    assert (core.spec.group_priority_minimum, core.spec.version_priority) == (18000, 1)
    assert by_name["v1.apps"].spec.group_priority_minimum == 17800
    cond = core.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("Available", "True", "Local")


# ---- scale -----------------------------------------------------------------------------------


def test_scale_subresource_with_the_client(sim: KubeServer, api_client: Any) -> None:
    apps = client.AppsV1Api(api_client)
    body = {
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": _template({"app": "w"})},
    }
    apps.create_namespaced_deployment("default", body)
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert scale.spec.replicas == 1
    assert scale.status.selector == "app=w"
    scale.spec.replicas = 4
    assert apps.replace_namespaced_deployment_scale("web", "default", scale).spec.replicas == 4
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 4
    stale = apps.read_namespaced_deployment_scale("web", "default")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 2}})
    stale.spec.replicas = 7
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment_scale("web", "default", stale)
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": -1}})
    assert err.value.status == 422
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 2
    with pytest.raises(ApiException) as err:
        apps.read_namespaced_daemon_set_scale("nope", "default") if hasattr(
            apps, "read_namespaced_daemon_set_scale"
        ) else apps.read_namespaced_stateful_set_scale("nope", "default")
    assert err.value.status == 404


@needs_kubectl
def test_kubectl_scale_get_and_api_resources(sim: KubeServer, kubeconfig: Path) -> None:
    apps = client.AppsV1Api(sim.api_client())
    apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {
                "selector": {"matchLabels": {"app": "db"}},
                "template": _template({"app": "db"}),
            },
        },
    )
    client.CoreV1Api(sim.api_client()).create_namespaced_replication_controller(
        "default", {"metadata": {"name": "rc"}, "spec": {"template": _template({"app": "rc"})}}
    )
    assert "statefulset.apps/db scaled" in kubectl(
        kubeconfig, "scale", "statefulset", "db", "--replicas=3"
    )
    assert "replicationcontroller/rc scaled" in kubectl(
        kubeconfig, "scale", "rc", "rc", "--replicas=0"
    )
    assert apps.read_namespaced_stateful_set("db", "default").spec.replicas == 3
    out = kubectl(kubeconfig, "get", "ds,sts,job,cronjob,rc,sa,role,clusterrole", "-A")
    assert "statefulset.apps/db" in out
    assert "replicationcontroller/rc" in out
    assert "serviceaccount/default" in out
    assert "clusterrole.rbac.authorization.k8s.io/cluster-admin" in out
    table = kubectl(kubeconfig, "api-resources", "-o", "wide", "--no-headers")
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.strip()}
    assert rows["daemonsets"][1:4] == ["ds", "apps/v1", "true"]
    assert rows["statefulsets"][1:4] == ["sts", "apps/v1", "true"]
    assert rows["cronjobs"][1:4] == ["cj", "batch/v1", "true"]
    assert rows["replicationcontrollers"][1:4] == ["rc", "v1", "true"]
    assert rows["jobs"][1:3] == ["batch/v1", "true"]
    assert rows["clusterroles"][1:4] == ["rbac.authorization.k8s.io/v1", "false", "ClusterRole"]
    assert rows["tokenreviews"][-1] == "create"
    assert "api-extensions" in " ".join(rows["apiservices"])


# ---- tokens and reviews ----------------------------------------------------------------------


def test_token_request_and_token_review(sim: KubeServer, api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    issued = core.create_namespaced_service_account_token("default", "default", {"spec": {}})
    assert issued.spec.expiration_seconds == 3600
    assert issued.spec.audiences == ["https://kubernetes.default.svc.cluster.local"]
    review = client.AuthenticationV1Api(api_client).create_token_review(
        {"spec": {"token": issued.status.token}}
    )
    assert review.status.authenticated is True
    assert review.status.user.username == "system:serviceaccount:default:default"
    assert review.status.user.groups == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token(
            "default", "default", {"spec": {"expirationSeconds": 599}}
        )
    assert err.value.status == 422
    assert "less than 10 minutes" in err.value.body
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service_account_token(
            "default",
            "default",
            {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}}},
        )
    assert err.value.status == 400
    assert "cannot bind token to object of type" in err.value.body
    other = client.AuthenticationV1Api(api_client).create_token_review(
        {"spec": {"token": issued.status.token, "audiences": ["vault"]}}
    )
    assert not other.status.authenticated
    assert "audiences" in other.status.error
    bogus = client.AuthenticationV1Api(api_client).create_token_review({"spec": {"token": "a.b.c"}})
    assert not bogus.status.authenticated


@needs_kubectl
def test_kubectl_create_token_whoami_and_can_i(tmp_path: Path) -> None:
    # TLS: kubectl sends a bearer token only over HTTPS
    with KubeServer(tls=True) as sim:
        kubeconfig = tmp_path / "kubeconfig"
        sim.write_kubeconfig(kubeconfig)
        _create_token_whoami_can_i(kubeconfig)
        assert sim.take_internal_errors() == []


def _create_token_whoami_can_i(kubeconfig: Path) -> None:
    token = kubectl(kubeconfig, "create", "token", "default", "--duration=20m").strip()
    assert token.count(".") == 2
    who = json.loads(kubectl(kubeconfig, "auth", "whoami", "-o", "json", token=token))
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
    # AlwaysAllow: yes to anything
    assert kubectl(kubeconfig, "auth", "can-i", "delete", "nodes", token=token).strip() == "yes"


def test_rbac_authorizer_with_kubectl(rbac_sim: tuple[KubeServer, Path]) -> None:
    sim, kubeconfig = rbac_sim
    api = sim.api_client()
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "ccm"}})
    token = core.create_namespaced_service_account_token(
        "ccm", "default", {"spec": {}}
    ).status.token
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role(
        {
            "metadata": {"name": "nodes-reader"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"]},
            ],
        }
    )
    rbac.create_namespaced_role(
        "default",
        {
            "metadata": {"name": "one-cm"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["lock"],
                    "verbs": ["*"],
                }
            ],
        },
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "ccm-nodes"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "nodes-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "default"}],
        }
    )
    rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "ccm-lock"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": "ccm", "namespace": "default"}],
        },
    )
    if KUBECTL.exists():

        def can(*args: str) -> str:
            return kubectl(kubeconfig, "auth", "can-i", *args, token=token, check=False).split()[0]

        assert can("list", "nodes") == "yes"
        assert can("delete", "nodes") == "no"
        assert can("patch", "services", "--subresource=status") == "yes"
        assert can("patch", "services") == "no"
        assert can("update", "configmaps/lock") == "yes"
        assert can("update", "configmaps/other") == "no"
        assert can("get", "configmaps/lock", "-n", "kube-system") == "no"
        who = json.loads(kubectl(kubeconfig, "auth", "whoami", "-o", "json", token=token))
        assert who["status"]["userInfo"]["username"] == "system:serviceaccount:default:ccm"
        out = kubectl(kubeconfig, "get", "pods", token=token, check=False)
        assert (
            'pods is forbidden: User "system:serviceaccount:default:ccm" cannot list resource '
            '"pods" in API group "" in the namespace "default"'
        ) in out
    sar = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "spec": {
                "user": "system:serviceaccount:default:ccm",
                "resourceAttributes": {"verb": "list", "resource": "nodes"},
            }
        }
    )
    assert sar.status.allowed is True
    assert 'ClusterRoleBinding "ccm-nodes" of ClusterRole "nodes-reader"' in sar.status.reason
    with pytest.raises(ApiException) as err:
        client.AuthorizationV1Api(api).create_subject_access_review(
            {"spec": {"resourceAttributes": {"verb": "list", "resource": "nodes"}}}
        )
    assert err.value.status == 422


def test_always_allow_reviews(sim: KubeServer, api_client: Any) -> None:
    authz = client.AuthorizationV1Api(api_client)
    ssar = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}}
    )
    assert ssar.status.allowed is True
    rules = authz.create_self_subject_rules_review({"spec": {"namespace": "default"}})
    assert rules.status.resource_rules[0].verbs == ["*"]
    assert rules.status.incomplete is False


# ---- pods/log, exec, attach, portforward ------------------------------------------------------


def _pod(name: str, *containers: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": c, "image": "busybox:1.36"} for c in containers]
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def test_pod_log_and_exec_of_pods_that_do_not_run(sim: KubeServer, api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod("default", _pod("pending", "c"))
    # unscheduled: the location streamer has nowhere to read (204, no body)
    resp = core.read_namespaced_pod_log("pending", "default", _preload_content=False)
    assert resp.status == 204
    assert resp.data == b""
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("pending", "default", container="nope")
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == "container nope is not valid for pod pending"
    core.create_namespaced_pod("default", _pod("two", "a", "b"))
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("two", "default")
    assert json.loads(err.value.body)["message"] == (
        "a container name must be specified for pod two, choose one of: [a b]"
    )
    # scheduled, container waiting: the kubelet's answer, passed on as 400
    core.create_namespaced_pod("default", _pod("creating", "c", node="n1"))
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("creating", "default")
    assert (
        json.loads(err.value.body)["message"] == 'container "c" in pod "creating" is not available'
    )
    pod = core.read_namespaced_pod("creating", "default")
    pod.status.container_statuses = [
        {
            "name": "c",
            "image": "busybox:1.36",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}},
        }
    ]
    core.replace_namespaced_pod_status("creating", "default", pod)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("creating", "default")
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == (
        'container "c" in pod "creating" is waiting to start: ContainerCreating'
    )
    status, _, body = _raw(sim, "POST", "/api/v1/namespaces/default/pods/pending/exec?command=ls")
    assert status == 400
    assert json.loads(body)["message"] == "pod pending does not have a host assigned"
    status, _, body = _raw(
        sim, "GET", "/api/v1/namespaces/default/pods/pending/portforward?ports=80"
    )
    assert json.loads(body)["message"] == "pod pending does not have a host assigned"
    status, _, _ = _raw(sim, "GET", "/api/v1/namespaces/default/pods/ghost/attach")
    assert status == 404


def _raw(sim: KubeServer, method: str, path: str) -> tuple[int, str, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read()
    finally:
        conn.close()


@needs_kubectl
def test_kubectl_logs_and_exec_answers(sim: KubeServer, kubeconfig: Path) -> None:
    client.CoreV1Api(sim.api_client()).create_namespaced_pod("default", _pod("web", "c"))
    assert kubectl(kubeconfig, "logs", "web") == ""
    out = kubectl(kubeconfig, "exec", "web", "--", "ls", check=False)
    assert "pod web does not have a host assigned" in out


@needs_kubectl
def test_kubectl_create_generators_for_the_new_kinds(sim: KubeServer, kubeconfig: Path) -> None:
    kubectl(kubeconfig, "create", "job", "pi", "--image=busybox:1.36", "--", "true")
    kubectl(
        kubeconfig, "create", "cronjob", "tick", "--image=busybox:1.36", "--schedule=*/5 * * * *"
    )
    kubectl(kubeconfig, "create", "role", "reader", "--verb=get,list", "--resource=pods")
    kubectl(
        kubeconfig,
        "create",
        "rolebinding",
        "rb",
        "--role=reader",
        "--serviceaccount=default:default",
    )
    kubectl(kubeconfig, "create", "clusterrole", "nodes", "--verb=get", "--resource=nodes")
    kubectl(
        kubeconfig, "create", "clusterrolebinding", "crb", "--clusterrole=nodes", "--user=alice"
    )
    api = sim.api_client()
    job = client.BatchV1Api(api).read_namespaced_job("pi", "default")
    assert job.spec.template.spec.restart_policy == "Never"
    assert job.spec.template.spec.containers[0].command == ["true"]
    assert (
        client.BatchV1Api(api).read_namespaced_cron_job("tick", "default").spec.schedule
        == "*/5 * * * *"
    )
    rbac = client.RbacAuthorizationV1Api(api)
    assert rbac.read_namespaced_role("reader", "default").rules[0].verbs == ["get", "list"]
    rb = rbac.read_namespaced_role_binding("rb", "default")
    assert (rb.role_ref.kind, rb.subjects[0].kind, rb.subjects[0].namespace) == (
        "Role",
        "ServiceAccount",
        "default",
    )
    crb = rbac.read_cluster_role_binding("crb")
    assert crb.subjects[0].api_group == "rbac.authorization.k8s.io"
    out = kubectl(kubeconfig, "get", "job,cronjob,rolebinding")
    assert "job.batch/pi" in out
    assert "cronjob.batch/tick" in out
    assert "Role/reader" in out
