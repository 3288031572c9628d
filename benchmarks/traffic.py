"""How many requests the traffic probe models per second (issue 12, traffic probe).

One sim lab (3 nodes: control plane and two workers, one zone) with its controller: a
Deployment of N pods behind a LoadBalancer Service, its ELB provisioned. Prints, in one run:

* ``lab.traffic.send`` requests modelled per second (every hop: ELB listener, instance
  choice, both security-group verdicts, node, kube-proxy, pod), for 1,000 and 10,000 requests;
* the baseline, measured in the same run: the kube-proxy model's ``route()`` alone on the same
  Service, per second; the ratio is what the AWS hops cost on top;
* one ``send`` of 100 requests end to end (what ``invoke lab.traffic`` costs in the daemon).

    .venv/bin/python -m benchmarks.traffic [--pods N]
"""

from __future__ import annotations

import argparse
import random
import time

from kubernetes import client

from lab.compose import Lab, wait_for
from lab.spec import LabSpec
from lab.traffic.report import TrafficError

LABELS = {"app": "web"}


def deploy(lab: Lab, pods: int) -> None:
    api = lab.api_client()
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    container = {"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}
    apps.create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": pods,
                "selector": {"matchLabels": LABELS},
                "template": {"metadata": {"labels": LABELS}, "spec": {"containers": [container]}},
            },
        },
    )
    core.create_namespaced_service(
        "default",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "selector": LABELS, "ports": [{"port": 80}]},
        },
    )

    def answering() -> bool:
        try:
            return len(lab.traffic.send("web", requests=200).answered) == pods
        except TrafficError:  # the Service is not in the probe's cache yet
            return False

    wait_for(answering, timeout=120, what=f"{pods} pods answering")


def rate(fn: object, count: int) -> float:
    assert callable(fn)
    t0 = time.perf_counter()
    fn(count)
    return count / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3)
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    with Lab(LabSpec(name="bench-traffic", nodes=3, zones=("us-east-1a",))) as lab:
        lab.start_controller()
        deploy(lab, args.pods)
        probe = lab.traffic
        svc = probe.cluster.service("default", "web")
        assert svc is not None
        node_port = int(svc["spec"]["ports"][0]["nodePort"])
        node = lab.workers[0].name
        rng = random.Random(0)

        def routes(n: int) -> None:
            for _ in range(n):
                lab.sim.plane.kube_proxy.route(node=node, node_port=node_port, rng=rng)

        def sends(n: int) -> None:
            report = probe.send("web", requests=n, seed=1)
            assert report.answered_total == n, report.to_json()

        base = rate(routes, 10_000)
        r1k = rate(sends, 1_000)
        r10k = rate(sends, 10_000)
        t0 = time.perf_counter()
        probe.send("web", requests=100)
        one = time.perf_counter() - t0
        rows += [
            (f"baseline: kube-proxy route() alone ({args.pods} endpoints)", f"{base:,.0f} /s"),
            ("lab.traffic.send, 1,000 requests", f"{r1k:,.0f} requests/s"),
            ("lab.traffic.send, 10,000 requests", f"{r10k:,.0f} requests/s"),
            ("ratio: route() alone / full walk (10,000)", f"{base / r10k:.2f}x"),
            ("one send of 100 requests", f"{one * 1000:.1f} ms"),
        ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
