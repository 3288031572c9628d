"""How fast the sim backend's data plane moves pods and endpoints (issue 12, first part).

One run, in this process: the API simulator, the kubelet stand-in with 50 worker nodes and the
data plane (``lab.dataplane``) on the lab clock at its default speed. Prints:

* a Deployment of 100 pods, then one of 1,000, from creation to every pod Running and to every
  pod a ready endpoint in the Service's EndpointSlices; the per-pod ratio 1,000 vs 100 (the
  baseline, same run);
* EndpointSlice update latency after readiness changes: a pod's app fails readiness (the lab
  API), until the slice shows ``ready: false`` for its IP, then back; p50/p99 over N flips;
* kube-proxy model ``route()`` calls per second against the 1,000-endpoint Service;
* process RSS before and after (simulator and data plane share the process).

    .venv/bin/python -m benchmarks.dataplane [--quick] [--flips N]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import threading
import time
from pathlib import Path

from lab.clock import DEFAULT_SPEED, ScaledClock
from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.dataplane.api import ENDPOINT_SLICES, PODS, Api
from lab.dataplane.informers import Informer
from lab.dataplane.kubeproxy import ConnectionRefused
from lab.dataplane.plane import SimDataPlane
from lab.kube.objects import Obj
from lab.kube.server import KubeServer
from lab.versions.release import KubeVersion

VERSION = "1.33"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Watcher:
    """Counts Running pods and ready slice endpoints per app, from watches."""

    def __init__(self, api: Api) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, set[str]] = {}
        self.ready_ips: dict[str, dict[str, bool]] = {}
        self.changed = threading.Condition(self.lock)
        self.pods = Informer(api, PODS)
        self.slices = Informer(api, ENDPOINT_SLICES)
        self.pods.add_handler(self._pod)
        self.slices.add_handler(self._slice)
        self.pods.start()
        self.slices.start()
        self.pods.wait_synced()
        self.slices.wait_synced()

    def _pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        app = (pod["metadata"].get("labels") or {}).get("app", "")
        with self.lock:
            names = self.running.setdefault(app, set())
            if event != "DELETED" and (pod.get("status") or {}).get("phase") == "Running":
                names.add(pod["metadata"]["name"])
            else:
                names.discard(pod["metadata"]["name"])
            self.changed.notify_all()

    def _slice(self, event: str, eps: Obj, old: Obj | None) -> None:
        app = (eps["metadata"].get("labels") or {}).get("kubernetes.io/service-name", "")
        with self.lock:
            ips = self.ready_ips.setdefault(app, {})
            for source in (old, eps):
                for e in (source or {}).get("endpoints") or []:
                    ips.pop(e["addresses"][0], None)
            if event != "DELETED":
                for e in eps.get("endpoints") or []:
                    ips[e["addresses"][0]] = (e.get("conditions") or {}).get("ready") is not False
            self.changed.notify_all()

    def wait(self, predicate: object, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate():  # type: ignore[operator]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("benchmark condition not reached")
                self.changed.wait(left)
        return time.monotonic()

    def stop(self) -> None:
        self.pods.stop()
        self.slices.stop()


def deploy(api: Api, watcher: Watcher, app: str, replicas: int) -> tuple[float, float]:
    api.create(
        "/api/v1/namespaces/default/services",
        {"metadata": {"name": app}, "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}},
    )
    t0 = time.monotonic()
    api.create(
        "/apis/apps/v1/namespaces/default/deployments",
        {
            "metadata": {"name": app},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                },
            },
        },
    )
    running = watcher.wait(lambda: len(watcher.running.get(app, ())) >= replicas, 600) - t0
    ready = watcher.wait(lambda: sum(watcher.ready_ips.get(app, {}).values()) >= replicas, 600) - t0
    return running, ready


def flip_latencies(plane: SimDataPlane, watcher: Watcher, app: str, flips: int) -> list[float]:
    pods = sorted(watcher.running[app])[:flips]
    out = []
    for i, name in enumerate(pods):
        ready = i % 2 == 1  # alternate: fail readiness, then back, on fresh pods
        pod = watcher.pods.get("default", name) or {}
        ip = (pod.get("status") or {}).get("podIP")
        t0 = time.monotonic()
        plane.kubelet.set_ready("default", name, ready)
        done = watcher.wait(lambda ip=ip, r=ready: watcher.ready_ips[app].get(ip) is r, 60)
        out.append(done - t0)
        if ready is False:
            plane.kubelet.set_ready("default", name, None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10 nodes, 50 and 200 pods")
    parser.add_argument("--flips", type=int, default=100, help="readiness flips to time")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    workers, small, large = (10, 50, 200) if args.quick else (50, 100, 1000)

    rss0 = rss_mib()
    clock = ScaledClock(DEFAULT_SPEED)
    version = KubeVersion.parse(VERSION)
    sim = KubeServer(version=VERSION).start()
    kubelet = KubeletStandIn(sim.api_client(), clock=clock)
    kubelet.start()
    api = Api(sim.api_client())
    for i in range(workers + 1):
        name = "cp" if i == 0 else f"w{i}"
        kubelet.register(
            NodeRegistration(
                name=name,
                ip=f"10.0.{i // 200}.{10 + i % 200}",
                version=version,
                role=Role.CONTROL_PLANE if i == 0 else Role.WORKER,
            )
        )
        node = api.get(f"/api/v1/nodes/{name}")
        taints = [t for t in node["spec"].get("taints") or [] if "uninitialized" not in t["key"]]
        api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints or None}})
    plane = SimDataPlane(sim.api_client(), version=version, hosts=kubelet, clock=clock).start()
    watcher = Watcher(api)
    rss_idle = rss_mib()
    rows: list[tuple[str, str]] = []
    try:
        run_s, ready_s = deploy(api, watcher, "small", small)
        rows.append(
            (f"{small} pods over {workers} nodes: creation to all Running", f"{run_s:.2f} s")
        )
        rows.append((f"{small} pods: creation to all ready endpoints", f"{ready_s:.2f} s"))
        run_l, ready_l = deploy(api, watcher, "large", large)
        rows.append(
            (f"{large} pods over {workers} nodes: creation to all Running", f"{run_l:.2f} s")
        )
        rows.append((f"{large} pods: creation to all ready endpoints", f"{ready_l:.2f} s"))
        per_small, per_large = ready_s / small, ready_l / large
        rows.append(
            (
                f"per pod to endpoints: {large} vs {small} (baseline)",
                f"{per_large * 1000:.1f} ms vs {per_small * 1000:.1f} ms "
                f"= {per_large / per_small:.2f}x",
            )
        )
        lat = sorted(flip_latencies(plane, watcher, "large", args.flips))
        p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
        rows.append(
            (
                f"EndpointSlice update after a readiness change ({len(lat)} flips)",
                f"p50 {statistics.median(lat) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms",
            )
        )
        svc = api.patch("/api/v1/namespaces/default/services/large", {"spec": {"type": "NodePort"}})
        port = svc["spec"]["ports"][0]["nodePort"]
        rng = random.Random(1)
        proxy = plane.kube_proxy
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                proxy.route(node="w1", node_port=port, rng=rng)
                break
            except ConnectionRefused:  # the model's informer has not seen the nodePort yet
                time.sleep(0.05)
        t0, calls = time.monotonic(), 0
        while time.monotonic() - t0 < 2.0:
            proxy.route(node="w1", node_port=port, rng=rng)
            calls += 1
        rows.append(
            (f"kube-proxy model route() against {large} endpoints", f"{calls / 2.0:,.0f} calls/s")
        )
        rss_end = rss_mib()
        rows.append(
            (
                "RSS: before / cluster idle / after (simulator + data plane, one process)",
                f"{rss0:.0f} / {rss_idle:.0f} / {rss_end:.0f} MiB",
            )
        )
        rows.append(
            (
                f"RSS per pod ({small + large} pods and their objects)",
                f"{(rss_end - rss_idle) * 1024 / (small + large):.1f} KiB",
            )
        )
        errors = plane.take_errors() + sim.internal_errors() + kubelet.errors
        rows.append(("component errors", str(len(errors))))
    finally:
        watcher.stop()
        plane.stop()
        kubelet.stop()
        sim.stop()
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
