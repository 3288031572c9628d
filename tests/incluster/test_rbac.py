"""RBAC: the rendered roles allow exactly what the controller asks of the API server.

What the controller asks is not assumed: the API simulator's request handler records every
request carrying the controller's bearer token (:class:`~tests.incluster.support.ServedRequests`)
and the evaluator in ``support`` decides each one against the rendered roles.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.runtime.kube import ApiKube, KubeClient
from lab.compose import Lab, wait_for
from lab.controllerproc import ControllerProcess
from lab.incluster import CLUSTER_RULES, render_manifests
from lab.kube.server import KubeServer
from tests.incluster.support import (
    LB_SERVICE,
    PROBE_TOKEN,
    SERVICE_ACCOUNT,
    ServedRequests,
    allowed,
    by_kind,
    classify,
    granting_rules,
    kind_settings,
    token_kubeconfig,
    unused_grants,
)


def test_no_wildcards_and_no_access_to_secrets_or_configmaps() -> None:
    manifests = render_manifests(kind_settings())
    rules = [r for _, r in granting_rules(manifests, *SERVICE_ACCOUNT)]
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
    manifests = render_manifests(kind_settings())
    rules = granting_rules(manifests, *SERVICE_ACCOUNT)
    with KubeServer() as sim:
        served = ServedRequests(sim, monkeypatch, PROBE_TOKEN)
        kube = ApiKube.from_kubeconfig(str(token_kubeconfig(sim, tmp_path / "kubeconfig")))
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
    manifests = render_manifests(kind_settings())
    role = by_kind(manifests)["ClusterRole"]
    role["rules"] = [
        {**r, "verbs": [v for v in r["verbs"] if v != "delete"]} for r in role["rules"]
    ]
    rules = granting_rules(manifests, *SERVICE_ACCOUNT)
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


@pytest.mark.parametrize(
    ("method", "target", "attributes"),
    [
        ("GET", "/api/v1/nodes", ("list", "", "nodes", "", "")),
        ("GET", "/api/v1/nodes?watch=true&resourceVersion=5", ("watch", "", "nodes", "", "")),
        ("GET", "/api/v1/nodes?watch=1", ("watch", "", "nodes", "", "")),
        ("GET", "/api/v1/nodes?watch=false", ("list", "", "nodes", "", "")),
        ("GET", "/api/v1/nodes/n1", ("get", "", "nodes", "", "n1")),
        ("PATCH", "/api/v1/nodes/n1/status", ("patch", "", "nodes/status", "", "n1")),
        (
            "DELETE",
            "/api/v1/namespaces/default/events",
            ("deletecollection", "", "events", "default", ""),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            ("update", "coordination.k8s.io", "leases", "kube-system", "l"),
        ),
    ],
)
def test_requests_are_read_in_rbac_terms_as_the_apiserver_does(
    method: str, target: str, attributes: tuple[str, str, str, str, str]
) -> None:
    req = classify(method, target, 200)
    assert (req.verb, req.group, req.resource, req.namespace, req.name) == attributes


def test_a_non_resource_request_can_never_be_allowed() -> None:
    with pytest.raises(AssertionError, match="not a resource request"):
        classify("GET", "/version", 200)


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
    sim = lab.sim.kube
    assert sim is not None
    assert lab.sim.kubelet is not None
    # the lab's simulator requires a token it knows: the controller authenticates as its
    # ServiceAccount, with a token from the TokenRequest API, as it would in the cluster
    namespace, account = SERVICE_ACCOUNT
    core_v1.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    token = core_v1.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    served = ServedRequests(sim, monkeypatch, token)
    spec = lab.controller_spec(
        args=(
            "--leader-elect",
            "--node-monitor-period=0.3s",
            "--node-deletion-grace-period=1s",
        )
    )
    spec = dataclasses.replace(
        spec, kubeconfig=token_kubeconfig(sim, tmp_path / "kubeconfig", token)
    )
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
    lab.sim.stand_in.stop_heartbeat(worker.name)
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

    rules = granting_rules(render_manifests(kind_settings()), *SERVICE_ACCOUNT)
    denied = [str(r) for r in served.requests if not allowed(rules, r)]
    assert not denied, "the controller made requests the roles deny:\n" + "\n".join(denied)
    assert unused_grants(rules, served.requests) == []
    errors = [str(r) for r in served.requests if r.status >= 500]
    assert not errors
