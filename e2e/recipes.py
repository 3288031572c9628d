"""Seed 004's API-level recipes (``reference/termination-bugs.md`` §4), on any backend.

The seed-004 scenarios judge traffic through the sim backend's stand-ins (a kubelet that
kills pods, host-local IPAM, kube-proxy of a release), so on kind they skip. Their core, what
the endpoint controllers and kube-proxy of a release *publish*, needs no kubelet action: pods
on **fake Nodes** no kubelet owns (their Lease renewed here), their status written through the
status subresource, and a **sync barrier** (a second pod whose readiness is flipped until the
Endpoints and the EndpointSlice show it, so anything read afterwards includes every earlier
change). The same code runs on the sim backend against the release presets (``lab_at``) and
on kind against the cluster of ``--k8s-version`` (CI's seed-004 job: the pinned buggy and
fixed ``kindest/node`` images of §5, each with the kind release that built it). What a release
should show comes from the data-plane change table (``lab.versions.dataplane``, sourced from
the upstream changelogs and PRs): on sim that checks the stand-ins against it, on kind the
table against a real cluster.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.support import wait_for
from lab.compose import Lab

E = TypeVar("E")

FAKE_TAINT = "lab.example.com/fake"
#: a kubelet's lease renewal interval (lab seconds on sim)
KUBELET_LEASE_RENEW = 10.0
NUDGE = "lab.example.com/nudge"


def sim_backend(request: pytest.FixtureRequest) -> bool:
    return request.config.getoption("--backend") in (None, "sim", "auto")


def release_lab(request: pytest.FixtureRequest, sim_version: str, feature_gates: str = "") -> Lab:
    """On sim a fresh lab of ``sim_version`` (the release preset); elsewhere the session's
    cluster, whatever version it runs (the caller decides from :attr:`Lab.version`)."""
    if sim_backend(request):
        lab: Lab = request.getfixturevalue("lab_at")(sim_version, feature_gates)
        return lab
    session: Lab = request.getfixturevalue("lab")
    return session


def expect_release(
    request: pytest.FixtureRequest,
    lab: Lab,
    fixed: bool,
    *,
    release: str,
    recipe: str,
    kind: dict[str, str],
) -> None:
    """``fixed``: what the change table says of the cluster's version. On sim the preset asked
    for must be the ``release`` case's; on a backend with one cluster version (kind), the case
    of the other release skips, naming the cluster to run it on."""
    if fixed == (release == "fixed"):
        return
    if sim_backend(request):
        raise AssertionError(
            f"the {release} preset of {recipe} is kubernetes {lab.version}, which the change "
            f"table calls {'fixed' if fixed else 'buggy'}"
        )
    pytest.skip(
        f"this cluster runs kubernetes {lab.version}, not the {release} release of {recipe}; "
        f"that case runs on a cluster of {kind[release]} (`--k8s-version {kind[release]}`)"
    )


def judge(
    fixed: bool,
    evidence: E,
    *,
    assert_fixed: Callable[[E], None],
    assert_reproduced: Callable[[E], None],
) -> None:
    """The catalog's two-way judgement: the release's own assertions hold on its evidence and
    the other release's fail on it."""
    holds, fails = (assert_fixed, assert_reproduced) if fixed else (assert_reproduced, assert_fixed)
    holds(evidence)
    with pytest.raises(AssertionError):
        fails(evidence)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@contextlib.contextmanager
def fake_node(lab: Lab, name: str) -> Iterator[str]:
    """A Node no kubelet owns, Ready, its Lease renewed (so the node lifecycle controller never
    marks it Unknown, and never MarkPodsNotReady its pods), tainted so nothing is scheduled
    onto it; removed afterwards. Renewed every 10 seconds of lab time, as a kubelet does, and
    the renewer tells the lab clock when the next one is due (``lab.clock``): on sim the
    lifecycle controller's grace period is lab time, so a renewer in real time would lose that
    race at a fast clock or on a busy machine; on kind, at the lab's own clock speed (every
    10 lab seconds is well inside the real controller's 40 s grace at any speed >= 1)."""
    api = lab.api_client()
    core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
    core.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, FAKE_TAINT: "true"},
            },
            "spec": {"taints": [{"key": FAKE_TAINT, "value": "true", "effect": "NoSchedule"}]},
        }
    )
    set_node_ready(core, name, True)
    coord.create_namespaced_lease(
        "kube-node-lease",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _now()},
        },
    )
    stop = threading.Event()
    clock = lab.clock
    owner = f"fake-node {name}"

    def renew_once() -> None:
        with contextlib.suppress(ApiException, OSError):
            coord.patch_namespaced_lease(name, "kube-node-lease", {"spec": {"renewTime": _now()}})

    def renew() -> None:
        due = clock.now() + KUBELET_LEASE_RENEW
        while not stop.is_set():
            clock.owe(owner, due, name=owner)
            left = due - clock.now()
            if left > 0:
                stop.wait(clock.real_seconds(left))
                continue
            renew_once()
            due = clock.now() + KUBELET_LEASE_RENEW
        clock.owe(owner, None, name=owner)

    thread = threading.Thread(target=renew, name=f"lease-{name}", daemon=True)
    thread.start()
    try:
        yield name
    finally:
        stop.set()
        thread.join(timeout=5)
        with contextlib.suppress(ApiException):
            coord.delete_namespaced_lease(name, "kube-node-lease")
        with contextlib.suppress(ApiException):
            core.delete_node(name)


def set_node_ready(core: client.CoreV1Api, name: str, ready: bool) -> None:
    now = _now()
    condition = (
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake"}
        if ready
        else {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "fake"}
    )
    condition |= {"lastHeartbeatTime": now, "lastTransitionTime": now}
    core.patch_node_status(name, {"status": {"conditions": [condition]}})


def ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    with contextlib.suppress(ApiException):
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def create_service(core: client.CoreV1Api, namespace: str, name: str, app: str) -> None:
    core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "selector": {"app": app},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        },
    )


def create_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    *,
    app: str,
    node: str,
    ip: str,
    restart_policy: str = "Always",
    finalizers: tuple[str, ...] = (),
) -> None:
    """A pod bound to a fake node, then Running and Ready at ``ip`` (its status written)."""
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app": app},
                "finalizers": list(finalizers),
            },
            "spec": {
                "nodeName": node,
                "restartPolicy": restart_policy,
                "tolerations": [{"key": FAKE_TAINT, "operator": "Exists"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.6",
                        "ports": [{"name": "http", "containerPort": 8080}],
                    }
                ],
            },
        },
    )
    set_pod_status(core, namespace, name, phase="Running", ready=True, ip=ip)


def set_pod_status(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    *,
    phase: str,
    ready: bool,
    ip: str,
    reason: str | None = None,
    message: str | None = None,
) -> None:
    """One status write (a strategic merge patch, as the official client sends one): phase,
    the IP and the four conditions, merged by type."""
    flag = "True" if ready else "False"
    status: dict[str, Any] = {
        "phase": phase,
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": flag},
            {"type": "Ready", "status": flag},
        ],
    }
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    core.patch_namespaced_pod_status(name, namespace, {"status": status})


@dataclass(frozen=True)
class Listing:
    """Where an address appears for a Service: Endpoints ``addresses`` / ``notReadyAddresses``,
    and the EndpointSlice conditions per address."""

    ready: frozenset[str]
    not_ready: frozenset[str]
    slice: dict[str, dict[str, bool | None]]

    def anywhere(self, ip: str) -> bool:
        return ip in self.ready or ip in self.not_ready or ip in self.slice


def listing(lab: Lab, namespace: str, service: str) -> Listing:
    api = lab.api_client()
    core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    try:
        eps = core.read_namespaced_endpoints(service, namespace)
        subsets = eps.subsets or []
    except ApiException as exc:
        if exc.status != 404:
            raise
        subsets = []
    ready = frozenset(a.ip for s in subsets for a in (s.addresses or []))
    not_ready = frozenset(a.ip for s in subsets for a in (s.not_ready_addresses or []))
    slices: dict[str, dict[str, bool | None]] = {}
    for item in discovery.list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    ).items:
        for ep in item.endpoints or []:
            cond = ep.conditions
            for address in ep.addresses:
                slices[address] = {
                    "ready": cond.ready if cond else None,
                    "serving": cond.serving if cond else None,
                    "terminating": cond.terminating if cond else None,
                }
    return Listing(ready, not_ready, slices)


def barrier(lab: Lab, namespace: str, service: str, *, pod: str, ip: str) -> None:
    """Nudge the Service (both endpoint controllers requeue it), then flip the barrier pod's
    readiness and back, each time waiting until the Endpoints and the slice show it: every
    change made before this call has then been through both controllers (§4.0)."""
    core = client.CoreV1Api(lab.api_client())
    core.patch_namespaced_service(
        service, namespace, {"metadata": {"annotations": {NUDGE: _now()}}}
    )
    for ready in (False, True):
        set_pod_status(core, namespace, pod, phase="Running", ready=ready, ip=ip)

        def shows(ready: bool = ready) -> bool:
            seen = listing(lab, namespace, service)
            in_endpoints = ip in (seen.ready if ready else seen.not_ready)
            return in_endpoints and (seen.slice.get(ip) or {}).get("ready") is ready

        wait_for(
            shows,
            timeout=30,
            what=f"the barrier {namespace}/{pod} ready={ready} in {service}'s Endpoints and slice",
        )


def force_delete_pods(core: client.CoreV1Api, namespace: str) -> None:
    """Pods on fake nodes never finish: drop finalizers, delete with grace 0."""
    with contextlib.suppress(ApiException):
        for p in core.list_namespaced_pod(namespace).items:
            if p.metadata.finalizers:
                core.patch_namespaced_pod(
                    p.metadata.name, namespace, {"metadata": {"finalizers": None}}
                )
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        core.delete_namespace(namespace)


def proxy_healthz(lab: Lab, node: str) -> tuple[int, dict[str, Any]]:
    """kube-proxy's ``/healthz`` on 10256 of ``node`` (``lab.traffic``): the model's answer on
    a settled sim lab, a real request to the node elsewhere (kind: the node container,
    reachable from the host)."""
    return lab.traffic.kube_proxy_healthz(node)


def set_taint(lab: Lab, node: str, key: str, value: str | None) -> None:
    """Add (``value``) or remove (None) a NoSchedule taint, keeping every other taint."""
    core = client.CoreV1Api(lab.api_client())
    taints = [t.to_dict() for t in core.read_node(node).spec.taints or [] if t.key != key]
    if value is not None:
        taints.append({"key": key, "value": value, "effect": "NoSchedule"})
    core.patch_node(
        node, {"spec": {"taints": [{k: v for k, v in t.items() if v is not None} for t in taints]}}
    )
