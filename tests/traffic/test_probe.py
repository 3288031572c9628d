"""The traffic probe end to end on a sim lab: a 3-replica Deployment behind a LoadBalancer
Service, the lab's controller provisioning its ELB, the data plane running the pods.

Every hop is real lab state: the ELB and its registered instances in the AWS endpoint, the
node and ELB security groups as the controller left them, instance health from the ELB health
checker, EndpointSlices from the data plane's controller, the kube-proxy model's choice."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from lab.compose import Lab, wait_for
from lab.traffic.report import TrafficError, TrafficReport

pytestmark = pytest.mark.standin("pods run on the sim backend's data plane")

LABELS = {"app": "web"}


def deploy_web(
    lab: Lab,
    replicas: int = 3,
    *,
    annotations: dict[str, str] | None = None,
    source_ranges: list[str] | None = None,
) -> tuple[client.AppsV1Api, client.CoreV1Api]:
    api = lab.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    container = client.V1Container(
        name="web", image="nginx", ports=[client.V1ContainerPort(container_port=80)]
    )
    apps.create_namespaced_deployment(
        "default",
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1DeploymentSpec(
                replicas=replicas,
                selector=client.V1LabelSelector(match_labels=LABELS),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=LABELS),
                    spec=client.V1PodSpec(containers=[container]),
                ),
            ),
        ),
    )
    core.create_namespaced_service(
        "default",
        client.V1Service(
            metadata=client.V1ObjectMeta(name="web", annotations=annotations),
            spec=client.V1ServiceSpec(
                type="LoadBalancer",
                selector=LABELS,
                ports=[client.V1ServicePort(port=80, target_port=80)],
                load_balancer_source_ranges=source_ranges,
            ),
        ),
    )
    return apps, core


def running_pods(core: client.CoreV1Api) -> dict[str, str]:
    pods = core.list_namespaced_pod("default", label_selector="app=web").items
    return {
        f"default/{p.metadata.name}": p.status.pod_ip
        for p in pods
        if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
    }


def settled(lab: Lab, core: client.CoreV1Api, pods: int, requests: int = 300) -> TrafficReport:
    """A probe once ``pods`` pods run and the traffic reaches exactly them."""

    def probe() -> TrafficReport | None:
        running = running_pods(core)
        if len(running) != pods:
            return None
        report = lab.traffic.send("web", requests=requests, seed=7)
        return report if set(report.answered) == set(running) else None

    return wait_for(probe, timeout=60, what=f"traffic reaching {pods} running pods")


def test_three_pods_answer_300_requests(lab: Lab) -> None:
    lab.start_controller()
    _, core = deploy_web(lab)
    report = settled(lab, core, pods=3)
    assert report.answered_total == 300, report.to_json()
    assert not report.dropped
    assert all(count >= 50 for count in report.answered.values()), report.answered
    assert report.load_balancer is not None
    # The ELB sends to every worker; the control plane carries kubeadm's exclusion label.
    assert set(report.instances) == {n.instance_id for n in lab.workers}
    again = lab.traffic.send("web", requests=300, seed=7)
    assert again.to_json() == report.to_json(), "same seed, same answer"


def test_a_deleted_pod_gets_no_request_once_endpoints_update(lab: Lab) -> None:
    lab.start_controller()
    _, core = deploy_web(lab)
    settled(lab, core, pods=3)
    victim = sorted(running_pods(core))[0]
    core.delete_namespaced_pod(victim.split("/")[1], "default")

    def moved_on() -> TrafficReport | None:
        report = lab.traffic.send("web", requests=300, seed=3)
        if victim in report.answered or report.answered_total != 300:
            return None
        return report

    report = wait_for(moved_on, timeout=60, what="traffic leaving the deleted pod")
    assert victim not in report.answered
    assert set(report.answered) <= set(running_pods(core))


def test_scaled_to_zero_drops_at_no_endpoint(lab: Lab) -> None:
    lab.start_controller()
    apps, core = deploy_web(lab)
    settled(lab, core, pods=3)
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 0}})

    def all_dropped() -> dict[str, Any] | None:
        # Between the pods going and the endpoints following, requests still go to their
        # old addresses and die there ("no route to host"); then kube-proxy has no endpoint.
        doc = lab.traffic.send("web", requests=300).to_json()
        hops = {d["hop"] for d in doc["dropped"]}
        return doc if not doc["answered"] and hops == {"kube-proxy"} else None

    doc = wait_for(all_dropped, timeout=60, what="every request dropped")
    assert doc["dropped"] == [
        {"hop": "kube-proxy", "reason": "no endpoint for service default/web", "count": 300}
    ]


def test_bad_requests_name_the_problem(lab: Lab) -> None:
    core = client.CoreV1Api(lab.api_client())
    core.create_namespaced_service(
        "default",
        client.V1Service(
            metadata=client.V1ObjectMeta(name="inside"),
            spec=client.V1ServiceSpec(selector=LABELS, ports=[client.V1ServicePort(port=80)]),
        ),
    )
    with pytest.raises(TrafficError, match=r"type ClusterIP.*needs type LoadBalancer"):
        lab.traffic.send("inside")
    with pytest.raises(TrafficError, match="service default/nope not found"):
        lab.traffic.send("nope")
    with pytest.raises(TrafficError, match="--requests 0"):
        lab.traffic.send("inside", requests=0)
    with pytest.raises(TrafficError, match="--from 'bogus': neither a CIDR nor a node"):
        lab.traffic.send("inside", source="bogus")
