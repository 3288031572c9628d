"""The catalog's pods are pods a real cluster runs and a real ELB can reach.

On sim the kubelet stand-in models what a pod answers whatever its image; on kind the image
runs. So what the catalog's pods are is checked here against what the Services ask of them:
they must listen on the Services' ``targetPort`` (else the ELB's TCP health checks are refused
and every instance goes OutOfService) and answer ``/hostname`` with their name (what
``lab.traffic`` counts on a real cluster): agnhost ``netexec --http-port=<targetPort>``.
"""

from __future__ import annotations

from typing import Any

from e2e import workloads
from e2e.support import lb_service


class _Core:
    """Records the pods ``create_pod`` asks for."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create_namespaced_pod(self, namespace: str, body: dict[str, Any]) -> None:
        self.created.append(body)


def _container(**kwargs: Any) -> dict[str, Any]:
    core = _Core()
    workloads.create_pod(core, "web-0", namespace="default", app="web", **kwargs)  # type: ignore[arg-type]
    (pod,) = core.created
    (container,) = pod["spec"]["containers"]
    return dict(container)


def test_catalog_pods_run_agnhost_netexec_on_the_services_target_port() -> None:
    target_ports = {p["targetPort"] for p in lb_service("web")["spec"]["ports"]}
    container = _container()
    assert container["image"].startswith("registry.k8s.io/e2e-test-images/agnhost:")
    args = container["args"]
    assert args[0] == "netexec"
    http_port = next(int(a.split("=", 1)[1]) for a in args if a.startswith("--http-port="))
    assert {http_port} == target_ports, "the pod listens where the Service sends"
    assert [p["containerPort"] for p in container["ports"]] == [http_port]


def test_the_readiness_probe_asks_a_path_netexec_serves() -> None:
    probe = _container(readiness_probe=True)["readinessProbe"]["httpGet"]
    assert probe["port"] == workloads.PORT
    # agnhost netexec's handlers include /healthz (200 while serving); it has no /ready
    assert probe["path"] == "/healthz"
