"""kube-proxy of one rehearsal node (and its kubelet's port): real sockets in its namespace.

Run as ``ip netns exec <node> python -m tests.rehearsal.node_proxy ...``. It reads Services,
EndpointSlices and its Node from the API server every ``--period`` seconds (kube-proxy
resyncs on events; the period bounds how late it is) and serves what kube-proxy serves:

* every ``nodePort`` of a NodePort or LoadBalancer Service, on all the node's addresses: a TCP
  connection is forwarded to one ready endpoint of the port (any node's with
  ``externalTrafficPolicy: Cluster``, this node's only with ``Local``). A Service with no ready
  endpoint anywhere has no listener, so connections are refused (kube-proxy's REJECT). With
  ``Local`` and endpoints only on other nodes, kube-proxy DROPs; here the handshake completes
  and nothing answers until the client gives up: a TCP health check on such a port would pass
  where the real one times out (the controller's checks for ``Local`` Services are HTTP on the
  health-check node port, which answers 503 here as there);
* ``/healthz`` on 10256: 200 with ``lastUpdated``/``currentTime``; from the releases that have
  KEP-3836 (``lab.versions.dataplane.kube_proxy_behaviour``) also ``nodeEligible``, and 503
  when the node is tainted ``ToBeDeletedByClusterAutoscaler`` or being deleted;
* each ``healthCheckNodePort`` of a ``Local`` Service: 200 with the count of local endpoints,
  503 with none (``{"service": {...}, "localEndpoints": N, "serviceProxyHealthy": true}``).
"""

from __future__ import annotations

import argparse
import datetime
import http.server
import json
import random
import socket
import sys
import threading
import time
from typing import Any

import urllib3

from tests.rehearsal.net import Server, pipe

AUTOSCALER_TAINT = "ToBeDeletedByClusterAutoscaler"
HEALTHZ_PORT = 10256
KUBELET_PORT = 10250


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Api:
    """GETs against the API server with a bearer token (the cluster's CA is not checked: the
    node reaches the server at the network's gateway, which its certificate does not name)."""

    def __init__(self, server: str, token: str) -> None:
        self.server = server.rstrip("/")
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.http = urllib3.PoolManager(cert_reqs="CERT_NONE", timeout=5.0)
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str) -> dict[str, Any]:
        resp = self.http.request("GET", self.server + path, headers=self.headers)
        if resp.status == 404:
            return {}
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status}")
        data: dict[str, Any] = json.loads(resp.data)
        return data


class State:
    """What the proxy last read (replaced whole on every resync)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.services: list[dict[str, Any]] = []
        self.slices: list[dict[str, Any]] = []
        self.node: dict[str, Any] = {}
        self.updated = _now()

    def endpoints(
        self, svc: dict[str, Any], port: dict[str, Any], node: str, *, anywhere: bool = False
    ) -> list[tuple[str, int]]:
        """(address, port) of the ready endpoints behind ``port``: this node's only when the
        Service's policy is Local, unless ``anywhere``."""
        meta = svc["metadata"]
        local = not anywhere and (svc.get("spec") or {}).get("externalTrafficPolicy") == "Local"
        found = []
        for s in self.slices:
            labels = (s.get("metadata") or {}).get("labels") or {}
            if s["metadata"].get("namespace") != meta["namespace"]:
                continue
            if labels.get("kubernetes.io/service-name") != meta["name"]:
                continue
            target = next(
                (
                    p.get("port")
                    for p in s.get("ports") or []
                    if p.get("name", "") == port.get("name", "")
                ),
                None,
            )
            if target is None:
                continue
            for ep in s.get("endpoints") or []:
                if not (ep.get("conditions") or {}).get("ready"):
                    continue
                if local and ep.get("nodeName") != node:
                    continue
                found += [(a, int(target)) for a in ep.get("addresses") or []]
        return found


class NodePort:
    """One nodePort's listener; the Service and port it serves are looked up per connection."""

    def __init__(self, number: int, state: State, node: str) -> None:
        self.number, self.state, self.node = number, state, node
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", number))
        self.sock.listen(128)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _target(self) -> tuple[dict[str, Any], list[tuple[str, int]]] | None:
        with self.state.lock:
            for svc in self.state.services:
                for port in (svc.get("spec") or {}).get("ports") or []:
                    if port.get("nodePort") == self.number:
                        return svc, self.state.endpoints(svc, port, self.node)
        return None

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    def _forward(self, conn: socket.socket) -> None:
        found = self._target()
        if found is None or not found[1]:
            local = (
                found is not None
                and (found[0].get("spec") or {}).get("externalTrafficPolicy") == "Local"
            )
            if local:  # DROP: nothing comes back; held until the client gives up
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass
            conn.close()
            return
        address, port = random.choice(found[1])
        try:
            upstream = socket.create_connection((address, port), timeout=5)
        except OSError:
            conn.close()
            return
        threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
        pipe(upstream, conn)

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def _healthz(
    state: State, node: str, eligibility: bool
) -> type[http.server.BaseHTTPRequestHandler]:
    class Healthz(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            with state.lock:
                updated = state.updated
                taints = ((state.node.get("spec") or {}).get("taints")) or []
                deleting = bool((state.node.get("metadata") or {}).get("deletionTimestamp"))
                services = list(state.services)
            port = self.server.server_address[1]
            if port == HEALTHZ_PORT:
                body: dict[str, Any] = {"lastUpdated": updated, "currentTime": _now()}
                status = 200
                if eligibility:
                    eligible = not deleting and not any(
                        t.get("key") == AUTOSCALER_TAINT for t in taints
                    )
                    body["nodeEligible"] = eligible
                    status = 200 if eligible else 503
            else:
                svc = next(
                    (
                        s
                        for s in services
                        if (s.get("spec") or {}).get("healthCheckNodePort") == port
                    ),
                    None,
                )
                if svc is None:
                    status, body = 503, {}
                else:
                    with state.lock:
                        local = sum(
                            len(state.endpoints(svc, p, node))
                            for p in (svc.get("spec") or {}).get("ports") or []
                        )
                    meta = svc["metadata"]
                    body = {
                        "service": {"namespace": meta["namespace"], "name": meta["name"]},
                        "localEndpoints": local,
                        "serviceProxyHealthy": True,
                    }
                    status = 200 if local else 503
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Healthz


def _check_port(svc: dict[str, Any]) -> Any:
    return (svc.get("spec") or {}).get("healthCheckNodePort")


def _serve(port: int, handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.HTTPServer:
    server = Server(("0.0.0.0", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _kubelet_port() -> None:
    """The kubelet's 10250 takes connections (what the lab tries to see whether the host
    reaches the node network); it serves nothing here."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", KUBELET_PORT))
    sock.listen(16)

    def accept() -> None:
        while True:
            conn, _ = sock.accept()
            conn.close()

    threading.Thread(target=accept, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="node_proxy")
    parser.add_argument("--node", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--period", type=float, default=0.2)
    args = parser.parse_args(argv)
    from lab.versions.dataplane import kube_proxy_behaviour

    eligibility = kube_proxy_behaviour(args.version, {}).healthz_node_eligibility
    api = Api(args.server, args.token)
    state = State()
    _serve(HEALTHZ_PORT, _healthz(state, args.node, eligibility))
    _kubelet_port()
    node_ports: dict[int, NodePort] = {}
    health_ports: dict[int, http.server.HTTPServer] = {}
    while True:
        try:
            services = api.get("/api/v1/services").get("items") or []
            slices = api.get("/apis/discovery.k8s.io/v1/endpointslices").get("items") or []
            node = api.get(f"/api/v1/nodes/{args.node}")
        except Exception as exc:  # the server restarting: keep the last state
            sys.stderr.write(f"resync failed: {exc}\n")
            time.sleep(args.period)
            continue
        with state.lock:
            state.services, state.slices, state.node = services, slices, node
            state.updated = _now()
        with state.lock:
            wanted = _listening_node_ports(state, services)
        checks = {
            int(s["spec"]["healthCheckNodePort"])
            for s in services
            if (s.get("spec") or {}).get("healthCheckNodePort")
        }
        # close first: a port may move between a nodePort and a health-check port
        for number in sorted(set(node_ports) - wanted):
            node_ports.pop(number).close()
        for number in sorted(set(health_ports) - checks):
            server = health_ports.pop(number)
            server.shutdown()
            server.server_close()
        for number in sorted(wanted - set(node_ports)):
            try:
                node_ports[number] = NodePort(number, state, args.node)
            except OSError as exc:  # tried again at the next resync
                sys.stderr.write(f"nodePort {number}: {exc}\n")
        for number in sorted(checks - set(health_ports)):
            try:
                health_ports[number] = _serve(number, _healthz(state, args.node, eligibility))
            except OSError as exc:
                sys.stderr.write(f"healthCheckNodePort {number}: {exc}\n")
        time.sleep(args.period)


def _listening_node_ports(state: State, services: list[dict[str, Any]]) -> set[int]:
    """The nodePorts with a listener: those of a Service with at least one ready endpoint
    anywhere. Without one nothing listens, so a connection is refused, as kube-proxy's REJECT
    refuses it (state lock held)."""
    wanted = set()
    for svc in services:
        spec = svc.get("spec") or {}
        if spec.get("type") not in ("NodePort", "LoadBalancer"):
            continue
        for port in spec.get("ports") or []:
            if not port.get("nodePort"):
                continue
            if state.endpoints(svc, port, "", anywhere=True):
                wanted.add(int(port["nodePort"]))
    return wanted


if __name__ == "__main__":
    sys.exit(main())
