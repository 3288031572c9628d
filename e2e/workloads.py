"""Pods, endpoints and traffic helpers for the scenarios judged by where traffic goes.

Bare pods (no ReplicaSet) so a scenario decides exactly which pods exist and when; readiness
and endpoint reads through the official client. The stand-in cases synchronise with
``Lab.settle()`` (``lab.settle``): once it returns, the endpoint controllers and kube-proxy's
informers have seen every earlier change (what termination-bugs.md §4.0's barrier pod does on
a real cluster, which the recipe cases still use: ``e2e.recipes.barrier``), and every
``lab.traffic`` call settles first.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from e2e.support import UNINITIALIZED, create_service, lb_service, wait_for, wait_hostname
from lab.compose import Lab
from lab.traffic.report import TrafficReport

PORT = 8080
#: the Kubernetes e2e suites' own workload (kubernetes ``test/utils/image/manifest.go``): with
#: ``netexec --http-port=8080`` it answers ``/hostname`` with the pod's name (what
#: ``lab.traffic`` counts on a real cluster) and ``/healthz`` with 200, on the Services'
#: ``targetPort``
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"
NETEXEC_ARGS = ("netexec", f"--http-port={PORT}")
#: the readiness probe's path: one agnhost netexec serves (``shared/docs`` kind facts)
READY_PATH = "/healthz"


def ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    if name in {ns.metadata.name for ns in core.list_namespace().items}:
        return
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


def create_pod(
    core: client.CoreV1Api,
    name: str,
    *,
    namespace: str,
    app: str,
    node: str | None = None,
    annotations: dict[str, str] | None = None,
    grace: int = 30,
    readiness_probe: bool = False,
) -> None:
    """A bare pod of one agnhost ``netexec`` container listening on :data:`PORT` (the
    Services' ``targetPort``), so a real kubelet runs a pod that answers the ELB's health checks
    and names itself to ``lab.traffic`` (``readiness_probe``: an HTTP probe every 2 s, as in
    kubernetes#110309's reproduction)."""
    container: dict[str, Any] = {
        "name": app,
        "image": AGNHOST,
        "args": list(NETEXEC_ARGS),
        "ports": [{"containerPort": PORT}],
    }
    if readiness_probe:
        container["readinessProbe"] = {
            "httpGet": {"path": READY_PATH, "port": PORT},
            "periodSeconds": 2,
            "failureThreshold": 1,
        }
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {"app": app},
                "annotations": dict(annotations or {}),
            },
            "spec": {
                **({"nodeName": node} if node else {}),
                "terminationGracePeriodSeconds": grace,
                "containers": [container],
            },
        },
    )


def pod(core: client.CoreV1Api, name: str, namespace: str) -> Any:
    return core.read_namespaced_pod(name, namespace)


def ready(p: Any) -> str:
    return next((c.status for c in (p.status.conditions or []) if c.type == "Ready"), "?")


def wait_running(lab: Lab, core: client.CoreV1Api, name: str, namespace: str) -> Any:
    """The pod once Running and Ready, looked at on a settled lab (``lab.settle``). On sim a
    pod without a readiness probe is there at the first look; one with a probe needs its
    periods of lab time. On kind settling covers none of the cluster (its kubelets are real),
    so the looks poll the real kubelet's evidence."""

    def running() -> Any:
        lab.settle()
        p = pod(core, name, namespace)
        return p if p.status.phase == "Running" and ready(p) == "True" else None

    return wait_for(running, timeout=30, what=f"pod {namespace}/{name} running and ready")


def slice_endpoints(lab: Lab, service: str, namespace: str) -> dict[str, dict[str, bool]]:
    """EndpointSlice endpoints of a Service: address -> its ready/serving/terminating."""
    discovery = client.DiscoveryV1Api(lab.api_client())
    out: dict[str, dict[str, bool]] = {}
    for eps in discovery.list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    ).items:
        for ep in eps.endpoints or []:
            cond = ep.conditions
            for address in ep.addresses:
                out[address] = {
                    "ready": bool(cond and cond.ready),
                    "serving": bool(cond and cond.serving),
                    "terminating": bool(cond and cond.terminating),
                }
    return out


def endpoints_addresses(core: client.CoreV1Api, service: str, namespace: str) -> set[str]:
    """The ready addresses of a Service's Endpoints object."""
    eps = core.read_namespaced_endpoints(service, namespace)
    return {a.ip for s in (eps.subsets or []) for a in (s.addresses or [])}


# --- a Service and a scheduled pod, judged by traffic ------------------------------------


def serve(lab: Lab, core: client.CoreV1Api) -> None:
    """A LoadBalancer Service and one pod for the scheduler to place (no nodeName)."""
    create_service(core, lb_service("web"))
    create_pod(core, "web-0", namespace="default", app="web")
    wait_hostname(core, "web", timeout=30)


def assert_traffic_fails_for_want_of_a_node(lab: Lab, core: client.CoreV1Api) -> None:
    """What the user sees while the only worker is stuck uninitialized (tainted): the pod
    cannot be scheduled, so no request finds an endpoint: kube-proxy has none, and the ELB's
    health checks (a TCP connect through the nodePort) fail for the same reason; a node the
    controller cannot match to an instance is not registered at all."""
    report = lab.traffic.send("web", requests=50)
    assert report.answered_total == 0, report.to_json()
    for hop, reason in report.dropped:
        # dropped by kube-proxy, or already at the ELB: its health checks reach no endpoint
        # either, or the node is not registered at all
        assert hop in ("kube-proxy", "elb"), report.to_json()
        assert "no endpoint" in reason or "has no registered instance" in reason, report.to_json()
    pending = wait_for(
        lambda: next(
            (c for c in pod(core, "web-0", "default").status.conditions or []
             if c.type == "PodScheduled" and c.reason == "Unschedulable"),
            None,
        ),
        timeout=20,
        what="the pod unschedulable",
    )  # fmt: skip
    assert UNINITIALIZED in pending.message, pending.message


def assert_pod_answers(lab: Lab) -> None:
    """Every request through the ELB answered by ``web-0`` (waits for the path to settle)."""
    last: list[Any] = []

    def answered() -> bool:
        last[:] = [lab.traffic.send("web", requests=50)]
        return bool(last[0].answered.get("default/web-0") == 50)

    try:
        wait_for(answered, timeout=30, what="the pod answering through the ELB")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last: {last[0].to_json() if last else None}") from None


def wait_pods_answer(lab: Lab, service: str, pods: int, *, requests: int = 60) -> None:
    """Wait until ``pods`` distinct pods answer requests to ``service`` through its ELB (its
    health checks passed and the endpoints are published)."""
    wait_for(
        lambda: len(lab.traffic.send(service, requests=requests).answered) == pods,
        timeout=30,
        what=f"{pods} pods of {service} answering through the ELB",
    )


def decided_traffic(lab: Lab, service: str, *, requests: int = 60) -> TrafficReport:
    """Requests to ``service`` once its ELB's health checks have decided: no request is held
    up by an instance still "in registration" or short of HealthyThreshold (a failing one is
    decided after UnhealthyThreshold checks, 6 x 10 lab seconds with the controller's
    defaults)."""
    # callers have seen the hostname through the API; the data plane's informers (which the
    # traffic model reads) may not have the status yet under load
    pending = (
        "registration is still in progress",
        "has not passed the configured",
        "status.loadBalancer.ingress is empty",
    )

    def decided() -> TrafficReport | None:
        report = lab.traffic.send(service, requests=requests, seed=8)
        if any(p in reason for _, reason in report.dropped for p in pending):
            return None
        return report

    found: TrafficReport = wait_for(decided, timeout=30, what="the ELB's health checks decided")
    return found
