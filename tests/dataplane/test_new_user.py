"""What a new user tries first, with the real kubectl against a sim lab: create a Deployment,
expose it through a LoadBalancer, wait for the rollout, look at the pods.

The lab runs its controller (it initializes the nodes and provisions the ELB); the pods are
scheduled, started and published by the sim backend's data plane."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest

from lab.compose import Lab, wait_for

KUBECTL = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "kubectl"
pytestmark = pytest.mark.standin("pods run on the sim backend's data plane")


def kubectl(lab: Lab, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(lab.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_create_expose_rollout_and_see_running_pods(lab: Lab) -> None:
    lab.start_controller()
    created = ok(kubectl(lab, "create", "deployment", "web", "--image=nginx", "--replicas=3"))
    assert created.strip() == "deployment.apps/web created"
    exposed = ok(kubectl(lab, "expose", "deployment", "web", "--type=LoadBalancer", "--port=80"))
    assert exposed.strip() == "service/web exposed"
    rollout = ok(kubectl(lab, "rollout", "status", "deployment/web", "--timeout=60s", timeout=90))
    assert rollout.strip().splitlines()[-1] == 'deployment "web" successfully rolled out'

    wide = ok(kubectl(lab, "get", "pods", "-o", "wide")).splitlines()
    header, rows = wide[0].split(), [line.split() for line in wide[1:]]
    assert header[:8] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED"]
    assert len(rows) == 3
    workers = {n.name for n in lab.workers}
    cluster_cidr = ipaddress.ip_network("10.244.0.0/16")
    for name, ready, status, _restarts, _age, ip, node, *_ in rows:
        assert name.startswith("web-")
        assert (ready, status) == ("1/1", "Running")
        assert ipaddress.ip_address(ip) in cluster_cidr
        assert node in workers  # the control plane keeps its NoSchedule taint
    assert len({row[5] for row in rows}) == 3

    # the endpoints controller publishes ready pods after the rollout says done (as on a real
    # cluster: `rollout status` watches the Deployment, not the Service): wait for them
    addresses = "jsonpath={.subsets[*].addresses[*].ip}"
    pod_ips = sorted(row[5] for row in rows)

    def endpoint_ips() -> list[str]:
        got = sorted(ok(kubectl(lab, "get", "endpoints", "web", "-o", addresses)).split())
        return got if got == pod_ips else []

    assert wait_for(endpoint_ips, timeout=30, what="the Service's endpoints") == pod_ips

    def elb_hostname() -> str:
        ingress = "jsonpath={.status.loadBalancer.ingress[0].hostname}"
        return kubectl(lab, "get", "service", "web", "-o", ingress).stdout.strip()

    hostname = wait_for(elb_hostname, timeout=30, what="the ELB hostname")
    assert hostname.endswith(".elb.amazonaws.com")
    assert "web" in ok(kubectl(lab, "get", "rs"))
