"""One rehearsal cluster: what ``kind create cluster`` leaves running, in one process.

Started by the fake ``kind`` (``tests/cluster/fakecli.py``, rehearsal mode) as
``python -m tests.rehearsal.cluster --dir DIR --spec FILE`` and stopped by ``kind delete
cluster`` with SIGTERM. The spec names the cluster, its Kubernetes version, the Docker
network's bridge, gateway and prefix, and each node with its container IP and the kubelet
arguments kind's patched kubeadm config gives it (``kind_releases.kubelet_args``). It runs:

* the API server: the simulator, on 127.0.0.1 as kind publishes its API (the kubeconfig names
  https://127.0.0.1:PORT), and reachable from the nodes at the network's gateway (a relay);
* the control plane: the sim's scheduler, node IPAM, node lifecycle, taint eviction, GC,
  ReplicaSet, Deployment, Endpoints and EndpointSlice controllers, on a real-time clock;
* per node, a network namespace on the bridge with the container's IP (the "container"), a
  kubelet that registers the Node from kind's kubelet arguments and heartbeats
  (``lab.cluster.kubelet.KubeletStandIn``), its pod half (``tests.rehearsal.pods``: pods as real
  processes) and kube-proxy (``tests.rehearsal.node_proxy``: real ``/healthz`` and nodePorts).

It writes ``DIR/kubeconfig`` and then ``DIR/ready`` (the fake ``kind`` waits for it); on SIGTERM
it stops every process it started and deletes the namespaces. The lab never sees any of this:
it drives the fake ``kind``/``docker`` exactly as the real ones.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from tests.rehearsal.net import pipe

log = logging.getLogger("rehearsal")


def ns_name(node: str) -> str:
    return f"node-{node}"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def make_node_namespace(node: str, ip: str, prefix: int, bridge: str, gateway: str) -> str:
    """A network namespace for ``node`` with ``ip`` on the bridge: its "container"."""
    ns = ns_name(node)
    tag = hashlib.sha1(node.encode()).hexdigest()[:8]  # interface names: 15 characters at most
    host_end, node_end = f"vh{tag}", f"vn{tag}"
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
        _ip("link", "set", host_end, "master", bridge, "up")
        _ip("link", "set", node_end, "netns", ns)
        _ip("-n", ns, "link", "set", node_end, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{ip}/{prefix}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", gateway)
    except subprocess.CalledProcessError:  # half a node: undone (the veth goes with either end)
        subprocess.run(["ip", "link", "del", host_end], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        raise
    return ns


def _relay(listen: tuple[str, int], target: tuple[str, int]) -> int:
    """Forward TCP connections on ``listen`` to ``target``; returns the port listened on."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(listen)
    server.listen(64)

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            try:
                upstream = socket.create_connection(target, timeout=5)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return int(server.getsockname()[1])


def run(directory: Path, spec: dict[str, Any], stop: threading.Event) -> None:
    from lab.clock import ScaledClock
    from lab.cluster.base import Role
    from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
    from lab.dataplane.api import Api, new_api_client
    from lab.dataplane.plane import SimDataPlane
    from lab.kube.server import KubeServer
    from lab.versions.release import KubeVersion
    from tests.rehearsal.pods import NodePods

    version = KubeVersion.parse(spec["version"])
    clock = ScaledClock(1.0)
    started: list[Any] = []
    namespaces: list[str] = []
    processes: list[subprocess.Popen[bytes]] = []
    try:
        kube = KubeServer(version=str(version), tls=True, workdir=directory / "apiserver")
        kube.start()
        started.append(kube)
        kube.write_kubeconfig(directory / "kubeconfig")
        relay = _relay((spec["gateway"], 0), ("127.0.0.1", kube.port))
        server_for_nodes = f"https://{spec['gateway']}:{relay}"

        for node in spec["nodes"]:
            namespaces.append(
                make_node_namespace(
                    node["name"], node["ip"], spec["prefix"], spec["bridge"], spec["gateway"]
                )
            )
        kubelets = KubeletStandIn(kube.api_client(), clock=clock)
        kubelets.start()
        started.append(kubelets)
        for node in spec["nodes"]:
            args = node["args"]
            labels = dict(
                pair.split("=", 1) for pair in str(args.get("node-labels") or "").split(",") if pair
            )
            kubelets.register(
                NodeRegistration(
                    name=node["name"],
                    ip=args["node-ip"],
                    version=version,
                    role=Role(node["role"]),
                    provider_id=args.get("provider-id"),
                    labels=labels,
                    control_plane_taints=bool(node.get("control_plane_taints", True)),
                    exclusion_label=bool(node.get("exclusion_label", False)),
                )
            )

        class ControlPlane(SimDataPlane):
            """The sim's controllers without its kubelet model: the nodes run real pods."""

            @property
            def controllers(self) -> list[Any]:
                return [c for c in super().controllers if c is not self.kubelet]

        plane = ControlPlane(kube.api_client(), version=version, hosts=kubelets, clock=clock)
        plane.start()
        started.append(plane)

        for node, ns in zip(spec["nodes"], namespaces, strict=True):
            pods = NodePods(
                Api(new_api_client(kube.api_client())),
                node["name"],
                ns,
                run_in_node=lambda argv, ns=ns: ["ip", "netns", "exec", ns, *argv],
                log_dir=directory,
            )
            pods.start()
            started.append(pods)
            log_file = (directory / f"kube-proxy-{node['name']}.log").open("wb")
            processes.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", ns, sys.executable, "-m",
                     "tests.rehearsal.node_proxy", "--node", node["name"],
                     "--server", server_for_nodes, f"--token={kube.token}",
                     "--version", str(version)],
                    stdout=log_file, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        ready = directory / "ready.tmp"  # renamed whole: the fake kind never reads half of it
        ready.write_text(json.dumps({"api": kube.url}))
        ready.rename(directory / "ready")
        stop.wait()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        for component in reversed(started):
            try:
                component.stop()
            except Exception:
                log.exception("stopping %r", component)
        for ns in namespaces:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rehearsal-cluster")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--spec", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(
        filename=args.dir / "cluster.log",
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    spec = yaml.safe_load(args.spec.read_text())
    try:
        run(args.dir, spec, stop)
    except Exception:
        log.exception("the rehearsal cluster failed")
        (args.dir / "failed").write_text("see cluster.log")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
