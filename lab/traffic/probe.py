"""The traffic probe's entry point: :class:`TrafficProbe` takes a Service and a number of
requests and answers where they went (``lab.traffic`` describes the hops).

Role: resolves the Service to its load balancer (Classic ELB or NLB, by the hostname in its
status), the client (the modelled internet client, a CIDR of ``--from``, or a node's instance),
settles the lab first when given ``settle``, and hands the requests to ``lab.traffic.classic``
or ``lab.traffic.nlb``; also kube-proxy's ``/healthz`` on a node and node-to-node reachability.

Neighbours: ``Lab.traffic`` builds one (``lab.compose``); the lab daemon serves ``invoke
lab.traffic`` from it; ``lab.traffic.clusters`` is its cluster side, ``lab.traffic.report`` its
vocabulary.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable
from typing import Any

from lab.aws.app import AwsLab
from lab.aws.health.network_view import network_load_balancer
from lab.aws.health.view import classic_load_balancer, instance
from lab.dataplane.plane import SimDataPlane
from lab.kube.objects import Obj
from lab.traffic.classic import send_classic
from lab.traffic.clusters import ClusterSide, ModelledCluster, instance_id_of, node_of
from lab.traffic.nlb import send_nlb
from lab.traffic.report import (
    DEFAULT_CLIENT,
    MAX_REQUESTS,
    Gates,
    PathVerdict,
    TrafficError,
    TrafficReport,
)
from lab.traffic.walk import Walk


class TrafficProbe:
    """See the module doc (and the package's, for the hops)."""

    def __init__(
        self,
        *,
        aws: AwsLab,
        gates: Gates,
        dataplane: SimDataPlane | None = None,
        cluster: ClusterSide | None = None,
        settle: Callable[[], object] | None = None,
    ) -> None:
        if (dataplane is None) == (cluster is None):
            raise ValueError("give the sim's dataplane or a cluster side, one of them")
        self.aws = aws
        self.gates = gates
        if cluster is None:
            assert dataplane is not None
            cluster = ModelledCluster(dataplane)
        self.cluster: ClusterSide = cluster
        self.settle = settle

    # -- lookups --------------------------------------------------------------------------
    def _service(self, ref: str) -> dict[str, Any]:
        namespace, _, name = ref.rpartition("/")
        namespace = namespace or "default"
        if not name:
            raise TrafficError(f"service {ref!r}: give NAME or NAMESPACE/NAME")
        svc = self.cluster.service(namespace, name)
        if svc is None:
            raise TrafficError(
                f"service {namespace}/{name} not found; `invoke lab.kubectl -- get svc -A` lists "
                "them"
            )
        kind = (svc.get("spec") or {}).get("type") or "ClusterIP"
        if kind != "LoadBalancer":
            raise TrafficError(
                f"service {namespace}/{name} is type {kind}; the probe follows requests through "
                "a load balancer, so it needs type LoadBalancer"
            )
        return svc

    def node_of(self, instance_id: str) -> str | None:
        return node_of(self.cluster.node_objects(), instance_id)

    def instance_of(self, node: str) -> str:
        obj = self.cluster.node(node)
        if obj is None:
            raise TrafficError(f"no node {node!r} in the cluster")
        found = instance_id_of(str((obj.get("spec") or {}).get("providerID") or ""))
        if not found:
            raise TrafficError(f"node {node} has no aws:// providerID, so no instance to send from")
        return found

    def _source(self, source: str | None, rng: random.Random) -> tuple[str, tuple[str, ...]]:
        """The client's address and security groups (a node's, for ``--from NODE``)."""
        if source is None:
            return DEFAULT_CLIENT, ()
        try:
            net = ipaddress.ip_network(source, strict=False)
        except ValueError:
            if self.cluster.node(source) is None:
                raise TrafficError(
                    f"--from {source!r}: neither a CIDR nor a node of the cluster"
                ) from None
            inst = instance(self.aws, self.instance_of(source))
            return inst.private_ip, inst.groups
        if net.version != 4:
            raise TrafficError(f"--from {source!r}: only IPv4 sources are modelled")
        if net.num_addresses <= 2:
            return str(net.network_address), ()
        offset = rng.randrange(1, net.num_addresses - 1)
        return str(net.network_address + offset), ()

    # -- the walk ---------------------------------------------------------------------------
    def send(
        self,
        service: str,
        *,
        requests: int = 100,
        source: str | None = None,
        port: int | None = None,
        seed: int = 0,
    ) -> TrafficReport:
        """Model ``requests`` requests to ``service`` (``NAME`` or ``NAMESPACE/NAME``)."""
        if not 1 <= requests <= MAX_REQUESTS:
            raise TrafficError(f"--requests {requests}: give 1 to {MAX_REQUESTS}")
        rng = random.Random(seed)
        self._source(source, random.Random(seed))  # a bad --from fails before anything else
        self._settle()
        svc = self._service(service)
        meta = svc["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        report = TrafficReport(key, requests, seed, source or DEFAULT_CLIENT)
        port = _service_port(svc, key, port)
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        hostname = next((str(i.get("hostname")) for i in ingress if i.get("hostname")), None)
        if hostname is None:
            report.drop(
                "service", "no load balancer: status.loadBalancer.ingress is empty", requests
            )
            return report
        walk = Walk(
            self.aws,
            self.gates,
            self.cluster,
            rng,
            str(meta.get("namespace") or "default"),
            client=lambda: self._source(source, rng),
        )
        lb = classic_load_balancer(self.aws, dns_name=hostname)
        if lb is not None:
            send_classic(report, walk, lb, port)
            return report
        nlb = network_load_balancer(self.aws, dns_name=hostname)
        if nlb is None:
            report.drop("dns", f"{hostname} resolves to no load balancer", requests)
            return report
        send_nlb(report, walk, nlb, port)
        return report

    def _settle(self) -> None:
        if self.settle is None:
            return
        try:
            self.settle()
        except TimeoutError as err:  # lab.settle.SettleTimeout: who is stuck, and doing what
            raise TrafficError(f"{err}\n(no request was modelled)") from None

    def kube_proxy_healthz(self, node: str) -> tuple[int, Obj]:
        """kube-proxy's ``/healthz`` on ``node`` (status, JSON body), asked after the lab
        settled: the model's answer on sim, a real request to the node on kind."""
        if self.settle is not None:
            self.settle()
        inst = instance(self.aws, self.instance_of(node))
        return self.cluster.kube_proxy_healthz(inst, node)

    def between(
        self, source_node: str, dest_node: str, port: int, *, protocol: str = "tcp"
    ) -> PathVerdict:
        """Whether ``source_node`` may open ``protocol/port`` to ``dest_node`` (security groups)."""
        src = instance(self.aws, self.instance_of(source_node))
        dst = instance(self.aws, self.instance_of(dest_node))
        gate = self.gates.ingress(
            dest_groups=dst.groups,
            protocol=protocol,
            port=port,
            source_groups=src.groups,
            source_ip=src.private_ip or None,
        )
        return PathVerdict(source_node, dest_node, protocol, port, gate.allowed, gate.reason)


def _service_port(svc: Obj, key: str, port: int | None) -> int:
    """``port`` if the Service exposes it, else (None) its first port."""
    ports = [int(p["port"]) for p in (svc.get("spec") or {}).get("ports") or []]
    if port is None:
        if not ports:
            raise TrafficError(f"service {key} has no ports")
        return ports[0]
    if port not in ports:
        raise TrafficError(f"--port {port}: service {key} exposes {ports}")
    return port
