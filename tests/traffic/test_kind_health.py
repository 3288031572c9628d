"""On kind, the ELB's health checks ask the real nodes (marker ``kind``; skipped with the reason
where Docker or kind is absent, as on machines without a Docker engine), and
``lab.traffic`` sends real requests through the nodes to an agnhost pod that names itself.

A lab on kind at ``--k8s-version``, the controller with ``ClusterServiceLoadBalancerHealthProbeMode
= Shared`` (the check is ``HTTP:10256/healthz``: real kube-proxy answers it on every node, no
workload image needed), one LoadBalancer Service: every node goes InService through real
requests to the node containers. Then a worker is tainted ``ToBeDeletedByClusterAutoscaler``:
from 1.30 its real kube-proxy answers 503 (KEP-3836) and the ELB takes it out of service, the
mechanism ``e2e/test_k8s_110195.py`` shows on the simulator; before 1.30 it stays InService.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client

from lab.compose import Lab, wait_for
from lab.spec import LabSpec
from lab.versions.release import node_image
from tests.incluster.support import docker_and_kind_missing

TAINT = "ToBeDeletedByClusterAutoscaler"
#: the Kubernetes e2e tests' own workload: ``netexec`` answers ``/hostname`` with the pod's name
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"


@pytest.mark.kind
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_kind_nodes_answer_the_elb_health_checks(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reason = docker_and_kind_missing()
    if reason:
        pytest.skip(f"needs a Docker engine and kind: {reason}")
    version = node_image(request.config.getoption("--k8s-version")).version
    lab = Lab(
        LabSpec(
            name=f"health-{os.getpid()}",
            backend="kind",
            k8s_version=str(version),
            nodes=3,
            zones=("us-east-1a",),
            state_dir=tmp_path / "lab",
        )
    )
    try:
        lab.start()
        config = lab.write_cloud_config(
            extra_global=(("ClusterServiceLoadBalancerHealthProbeMode", "Shared"),)
        )
        lab.start_controller(cloud_config=config)
        core = client.CoreV1Api(lab.api_client())
        core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "web"},
                "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                         "ports": [{"port": 80, "targetPort": 8080}]},
            },
        )  # fmt: skip
        elb = lab.aws.client("elb")
        name = wait_for(
            lambda: next(iter(elb.describe_load_balancers()["LoadBalancerDescriptions"]), {}).get(
                "LoadBalancerName"
            ),
            timeout=120,
            what="the ELB",
        )
        health = lab.aws.lab.elb_health
        workers = [n.instance_id for n in lab.workers]
        wait_for(
            lambda: all(health.in_service(name, i)[0] for i in workers),
            timeout=300,
            what="every worker InService through real /healthz answers",
        )
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": "web-0", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": AGNHOST,
                                         "args": ["netexec", "--http-port=8080"]}]},
            },
        )  # fmt: skip
        report = wait_for(
            lambda: (r := lab.traffic.send("web", requests=20)).answered_total == 20 and r,
            timeout=300,
            what="requests really sent through the nodes answered by the pod",
        )
        assert dict(report.answered) == {"default/web-0": 20}, report.to_json()
        tainted = lab.workers[0]
        node = core.read_node(tainted.name)
        taints = [t.to_dict() for t in node.spec.taints or []]
        core.patch_node(
            tainted.name, {"spec": {"taints": [*taints, {"key": TAINT, "effect": "NoSchedule"}]}}
        )
        if version.minor_key >= (1, 30):
            why = wait_for(
                lambda: None if (r := health.in_service(name, tainted.instance_id))[0] else r[1],
                timeout=300,
                what="the tainted node OutOfService (kube-proxy /healthz 503, KEP-3836)",
            )
            assert "HTTP 503" in why, why
        else:
            lab.clock.sleep(120)  # several checks' worth of lab time
            assert health.in_service(name, tainted.instance_id)[0]
    finally:
        lab.stop()
