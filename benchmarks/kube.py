"""Benchmark the embedded Kubernetes API simulator (lab.kube).

Measures, over real HTTP on loopback:
  * GET latency p50/p99 and LIST latency p50/p99 with 1,000 and 10,000 nodes in the store;
  * create throughput (sequential, one keep-alive connection);
  * watch fan-out: time from issuing a write to each of 50 watchers reading the event;
  * memory per 10,000 stored nodes (tracemalloc, in-process store), and the one-time load of
    the OpenAPI schema set that writes are checked against (its time and memory).
The baseline, measured in the same run, is a ``GET /healthz`` round trip (the HTTP stack alone);
each latency is also printed as a ratio to it. Targets: GET p50 < 2 ms, LIST of 1,000 nodes
< 50 ms, watch event to 50 watchers < 20 ms p99.

    .venv/bin/python benchmarks/kube.py [--quick] [--process]

``--process`` runs the simulator as ``python -m lab.kube`` (its own interpreter, so the
client's threads do not share its GIL); the default runs it in a thread of this process.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.kube.registry import Registry  # noqa: E402
from lab.kube.schema import definitions  # noqa: E402
from lab.kube.server import KubeServer  # noqa: E402
from lab.versions.release import DEFAULT_K8S_VERSION  # noqa: E402


def node(i: int) -> dict[str, Any]:
    name = f"ip-10-0-{i // 250}-{i % 250}.ec2.internal"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
            },
            "annotations": {"alpha.kubernetes.io/provided-node-ip": f"10.0.{i // 250}.{i % 250}"},
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{i:017x}"},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Ubuntu 24.04",
                "containerRuntimeVersion": "containerd://1.7.0",
            },
        },
    }


class Conn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.c = http.client.HTTPConnection(u.hostname or "", u.port, timeout=60)

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        self.c.request(method, path, body=data, headers=headers)
        resp = self.c.getresponse()
        return resp.status, resp.read()


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def line(label: str, samples: list[float], base: float | None = None) -> str:
    p50, p99 = pct(samples, 0.5), pct(samples, 0.99)
    ratio = f"  ({p50 / base:5.1f}x baseline p50)" if base else ""
    return f"  {label:<34} p50 {p50:8.3f} ms   p99 {p99:8.3f} ms{ratio}"


@contextmanager
def simulator(process: bool) -> Iterator[str]:
    if not process:
        with KubeServer(history=200000) as sim:
            yield sim.url
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lab.kube", "--kubeconfig", f"{tmp}/kubeconfig"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        try:
            yield ready.rsplit(" ", 1)[1].strip()
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def populate(conn: Conn, start: int, stop: int) -> float:
    t0 = time.perf_counter()
    for i in range(start, stop):
        status, body = conn.call("POST", "/api/v1/nodes", node(i))
        if status != 201:
            raise SystemExit(f"create failed: {status} {body[:200]!r}")
    return time.perf_counter() - t0


def watch_fanout(url: str, watchers: int, events: int) -> list[float]:
    conn = Conn(url)
    _, body = conn.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "fanout"}, "data": {"seq": "-1"}},
    )
    rv = json.loads(body)["metadata"]["resourceVersion"]
    sent: dict[str, float] = {}
    samples: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(watchers + 1)

    def watch() -> None:
        u = urlsplit(url)
        c = http.client.HTTPConnection(u.hostname or "", u.port, timeout=60)
        c.request(
            "GET",
            "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=120"
            f"&resourceVersion={rv}&fieldSelector=metadata.name%3Dfanout",
        )
        resp = c.getresponse()
        ready.wait()
        got = 0
        while got < events:
            raw = resp.readline()
            now = time.perf_counter()
            if not raw:
                break
            seq = json.loads(raw)["object"]["data"]["seq"]
            with lock:
                samples.append((now - sent[seq]) * 1000)
            got += 1
        c.close()

    threads = [threading.Thread(target=watch, daemon=True) for _ in range(watchers)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.2)  # let every stream reach its read loop
    for i in range(events):
        seq = str(i)
        sent[seq] = time.perf_counter()
        conn.call(
            "PATCH",
            "/api/v1/namespaces/default/configmaps/fanout",
            {"data": {"seq": seq}},
            "application/merge-patch+json",
        )
        time.sleep(0.02)
    for t in threads:
        t.join(30)
    return samples


def schema_load() -> tuple[float, float]:
    """(seconds, bytes) to load the OpenAPI schema set writes are checked against; a one-time
    cost paid by the first write, kept out of the per-node figure below."""
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    started = time.perf_counter()
    definitions(DEFAULT_K8S_VERSION)
    took = time.perf_counter() - started
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    return took, sum(s.size_diff for s in after.compare_to(before, "filename"))


def memory_per_10k(n: int) -> float:
    store = Registry()
    nodes = [node(i) for i in range(n)]
    rt = store.rt("", "nodes")
    store.writer.create(rt, "", node(-1), manager="bench")  # one-time loads stay out
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for body in nodes:
        store.writer.create(rt, "", body, manager="bench")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / n * 10_000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples and objects (~15 s)")
    parser.add_argument("--process", action="store_true", help="run the simulator as a subprocess")
    args = parser.parse_args()
    schema_s, schema_bytes = schema_load()  # first, while nothing has loaded the schemas
    sizes = (1_000, 3_000) if args.quick else (1_000, 10_000)
    n_get, n_list = (200, 10) if args.quick else (1000, 30)
    watchers, events = (50, 20) if args.quick else (50, 60)
    mode = "subprocess" if args.process else "in-process thread"
    print(f"lab.kube simulator benchmark ({mode}; {'quick' if args.quick else 'full'})")
    with simulator(args.process) as url:
        conn = Conn(url)
        base = timed(lambda: conn.call("GET", "/healthz"), n_get)
        print(line("baseline GET /healthz", base))
        base50 = pct(base, 0.5)
        fan = watch_fanout(url, watchers, events)  # before the bulk load: no GC pressure
        print(line(f"watch event -> {watchers} watchers", fan, base50))
        print(f"    ({len(fan)} deliveries of {watchers * events} expected)")
        created = 0
        for size in sizes:
            secs = populate(conn, created, size)
            rate = (size - created) / secs
            print(f"  created {size - created:6d} nodes over HTTP: {rate:8.0f} creates/s")
            created = size
            name = node(size // 2)["metadata"]["name"]
            get_path = f"/api/v1/nodes/{name}"
            get = timed(lambda: conn.call("GET", get_path), n_get)  # noqa: B023
            print(line(f"GET node ({size} nodes)", get, base50))
            lst = timed(lambda: conn.call("GET", "/api/v1/nodes"), n_list)
            print(line(f"LIST all nodes ({size} nodes)", lst, base50))
            page = timed(lambda: conn.call("GET", "/api/v1/nodes?limit=500"), n_list)
            print(line(f"LIST limit=500 ({size} nodes)", page, base50))
            sel = timed(
                lambda: conn.call(
                    "GET", "/api/v1/nodes?labelSelector=kubernetes.io%2Fos%3Dlinux&limit=1000"
                ),
                n_list,
            )
            print(line(f"LIST selector, limit=1000 ({size})", sel, base50))
    per10k = memory_per_10k(sizes[-1])
    print(f"  memory per 10,000 nodes (store, tracemalloc): {per10k / 1e6:7.1f} MB")
    print(
        f"  schema set load (first write, once):  {schema_s * 1000:7.1f} ms"
        f"  {schema_bytes / 1e6:7.1f} MB"
    )


if __name__ == "__main__":
    main()
