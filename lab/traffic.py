"""The traffic probe: where a request to a LoadBalancer Service goes, hop by hop.

Every documented failure this lab reproduces is, for its users, a traffic failure. The probe
models N requests the way they travel on AWS and in the cluster and says which pods answered
and where the others were dropped, with the reason.

Through a Classic ELB: client -> the load balancer's security groups on the listener port ->
the listener -> an InService instance (round robin; per zone unless cross-zone load balancing
is on) -> the instance's security groups on the instance port (the nodePort), from the load
balancer's groups -> kube-proxy on that node (:class:`lab.dataplane.kubeproxy.KubeProxyModel`)
-> the pod answers, or refuses.

Through a network load balancer (the Service's hostname is an NLB's): client -> the NLB's
security groups when it has any -> the listener on the port -> its target group -> a target
(:class:`_NlbPicker`: a healthy target, per zone unless cross-zone load balancing is on; no
healthy target anywhere: fail open) -> the instance's security groups on the target port (the
nodePort) from the **client's** address when the group preserves client IPs (the default for
instance targets; then a node reaching itself through the NLB times out), else from the NLB
node's address, with UDP rules for a UDP listener -> kube-proxy -> the pod.

On the sim backend nothing is sent on any network: every hop is evaluated from state (moto's,
the API server's through the data plane's informers; :class:`ModelledCluster`). A call models
its requests at one lab instant, so a load balancer's health and the endpoints do not change
within it. Deterministic for a seed. On a backend with real nodes (kind) the hops up to the
instance are the same (the lab's ELB, its health checks and security groups: no real network
enforces them), and from there each request is really sent to the node's address on the
nodePort, through the real kube-proxy (:class:`RealCluster`); who answered is the pod the
answer names (agnhost ``netexec`` ``/hostname``).

Given ``settle`` (``Lab.traffic`` passes ``Lab.settle``), a call first waits until the lab's own
components have caught up (``lab.settle``: endpoints published, kube-proxy's informers current,
health checks due run), so a verdict never depends on how far a reaction had got when the call
came; a probe built without it models the lab exactly as it is at that instant (a test uses
that to show a component lagging).

Neighbours: :mod:`lab.aws.elbview` (the load balancer's configuration), the security-group
evaluator and the ELB health checker behind :class:`Gates`, :mod:`lab.dataplane` (kube-proxy
model, informers). ``Lab.traffic`` builds one; ``invoke lab.traffic`` reaches it through the
lab daemon.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lab.aws.app import AwsLab
from lab.aws.elbprobe import ProbeResult, ProbeTarget
from lab.aws.elbview import ClassicInstance, ClassicLoadBalancer, classic_load_balancer, instance
from lab.aws.nlbview import (
    NetworkLoadBalancer,
    NlbListener,
    NlbTarget,
    NlbTargetGroup,
    cross_zone,
    network_load_balancer,
    target_group,
)
from lab.dataplane.api import NODES, SERVICES, Api, Obj
from lab.dataplane.kubeproxy import ConnectionRefused, Drop, PodTarget
from lab.dataplane.plane import SimDataPlane
from lab.kubeclient import NotFound

DEFAULT_CLIENT = "198.51.100.7"
"""The modelled internet client (RFC 5737 documentation range; nothing is ever sent)."""

MAX_REQUESTS = 100_000


class TrafficError(ValueError):
    """A probe the user asked for wrongly (no such Service, not a LoadBalancer, bad source)."""


@dataclass(frozen=True)
class Gate:
    """A security-group verdict: allowed, and why (the rule that allowed it, or the groups
    that were evaluated and found no rule)."""

    allowed: bool
    reason: str


class Gates(Protocol):
    """The AWS verdicts the probe needs and does not compute itself."""

    def ingress(
        self,
        *,
        dest_groups: Sequence[str],
        protocol: str,
        port: int,
        source_groups: Sequence[str] = (),
        source_ip: str | None = None,
    ) -> Gate: ...

    def in_service(self, load_balancer: str, instance_id: str) -> tuple[bool, str]:
        """Whether the load balancer sends to the instance now, and the reason when not."""
        ...

    def target_health(self, target_group_arn: str, instance_id: str) -> tuple[str, str]:
        """An NLB target's state (``healthy``, ``unhealthy``...) and why."""
        ...


@dataclass
class TrafficReport:
    """Which pods answered how many requests, and every drop with its hop and reason."""

    service: str
    requests: int
    seed: int
    source: str
    load_balancer: str | None = None
    answered: Counter[str] = field(default_factory=Counter)
    dropped: Counter[tuple[str, str]] = field(default_factory=Counter)
    instances: Counter[str] = field(default_factory=Counter)
    """Requests per instance the load balancer picked."""

    def drop(self, hop: str, reason: str, count: int = 1) -> None:
        self.dropped[(hop, reason)] += count

    @property
    def answered_total(self) -> int:
        return sum(self.answered.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "requests": self.requests,
            "seed": self.seed,
            "source": self.source,
            "load_balancer": self.load_balancer,
            "answered": dict(sorted(self.answered.items())),
            "dropped": [
                {"hop": hop, "reason": reason, "count": count}
                for (hop, reason), count in sorted(self.dropped.items(), key=lambda kv: -kv[1])
            ],
            "instances": dict(sorted(self.instances.items())),
        }


@dataclass(frozen=True)
class PathVerdict:
    """Node-to-node reachability on one port (``between``)."""

    source: str
    dest: str
    protocol: str
    port: int
    allowed: bool
    reason: str


#: kube-proxy's health server (``--healthz-bind-address``, default 0.0.0.0:10256)
KUBE_PROXY_HEALTHZ_PORT = 10256


def _http_answer(check: Any, node: str, status: int, body: dict[str, Any]) -> ProbeResult:
    text = json.dumps(body, sort_keys=True)
    return ProbeResult(status == 200, f"{check} on {node}: HTTP {status} {text}")


def _instance_id(provider_id: str) -> str:
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id.startswith("aws://") else ""


class ClusterSide(Protocol):
    """What the probe asks of the cluster: its objects, and what happens to a request that
    reached ``node:node_port`` (past the instance's security groups)."""

    def service(self, namespace: str, name: str) -> Obj | None: ...

    def node(self, name: str) -> Obj | None: ...

    def node_objects(self) -> list[Obj]: ...

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop: ...

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """kube-proxy's ``/healthz`` on ``node``: its HTTP status and JSON body."""
        ...


def node_of(nodes: Sequence[Obj], instance_id: str) -> str | None:
    """The Node whose providerID names ``instance_id``."""
    for node in nodes:
        if _instance_id(str((node.get("spec") or {}).get("providerID") or "")) == instance_id:
            return str(node["metadata"]["name"])
    return None


def get_or_none(api: Api, url: str) -> Obj | None:
    """The object at ``url``, or None when the API server says 404."""
    try:
        return api.get(url)
    except NotFound:
        return None


class ModelledCluster:
    """The sim backend's side: the data plane's informers and its kube-proxy model; nothing is
    sent on any network."""

    def __init__(self, dataplane: SimDataPlane) -> None:
        self.plane = dataplane
        self.services = dataplane.informers(SERVICES)
        self.nodes = dataplane.informers(NODES)

    def service(self, namespace: str, name: str) -> Obj | None:
        """From the cache, or (just created, not seen yet) from the API server."""
        found = self.services.get(namespace, name)
        if found is not None:
            return found
        return get_or_none(self.plane.api, f"/api/v1/namespaces/{namespace}/services/{name}")

    def node(self, name: str) -> Obj | None:
        return self.nodes.get("", name)

    def node_objects(self) -> list[Obj]:
        return self.nodes.objects()

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop:
        if self.plane.kubelet.powered_off(node):
            return Drop("node", f"{node} ({inst.instance_id}) is powered off: no answer")
        try:
            return self.plane.kube_proxy.route(node=node, node_port=node_port, rng=rng)
        except ConnectionRefused as exc:
            return Drop("node", f"connection refused: {exc}")

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """The kube-proxy model's answer (what its informers have seen)."""
        return self.plane.kube_proxy.healthz(node=node)

    def answer_health_check(self, inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        """What a node answers a Classic ELB health check that got past the security groups
        (the AWS endpoint's prober asks this, ``lab.aws.elbprobe.NodeAnswers``): kube-proxy's
        ``healthCheckNodePort`` (eTP=Local) or ``/healthz`` on 10256 for HTTP checks; for TCP
        and other ports, whether kube-proxy forwards the connection to a pod that accepts it.
        A powered-off node answers nothing."""
        check = target.target
        node = node_of(self.node_objects(), inst.instance_id)
        if node is None:
            return ProbeResult(False, f"{check}: {inst.instance_id} is no node of the cluster")
        if self.plane.kubelet.powered_off(node):
            return ProbeResult(False, f"{node} is powered off: no answer", timed_out=True)
        proxy = self.plane.kube_proxy
        try:
            if check.protocol in ("HTTP", "HTTPS") and check.port == KUBE_PROXY_HEALTHZ_PORT:
                status, body = proxy.healthz(node=node)
                return _http_answer(check, node, status, body)
            if check.protocol in ("HTTP", "HTTPS") and self._is_health_check_port(check.port):
                status, body = proxy.health_check_node_port(node=node, port=check.port)
                return _http_answer(check, node, status, body)
            found = proxy.route(node=node, node_port=check.port, rng=random.Random(0))
        except ConnectionRefused as exc:
            return ProbeResult(False, f"{check} on {node}: {exc} (connection refused)")
        if isinstance(found, Drop):
            silent = "no local endpoint" in found.reason  # dropped, not rejected: a timeout
            return ProbeResult(
                False, f"{check} on {node}: {found.hop}: {found.reason}", timed_out=silent
            )
        return ProbeResult(True, f"{check} on {node}: answered by {found.namespace}/{found.name}")

    def _is_health_check_port(self, port: int) -> bool:
        return any(
            (s.get("spec") or {}).get("healthCheckNodePort") == port
            for s in self.services.objects()
        )


NodeAddress = Callable[[ClassicInstance, int], tuple[str, int]]
"""Where a request for ``instance:port`` really connects (kind: the node container's IP)."""


def instance_address(inst: ClassicInstance, port: int) -> tuple[str, int]:
    return inst.private_ip, port


_POD_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class RealCluster:
    """A backend with real nodes (kind): objects read from the API server, and each request
    really sent: ``GET <path>`` to the node's address on the nodePort (``address_of``), through
    the real kube-proxy, to whatever pod it picks. Who answered is the first line of the body
    when it is a pod name (what ``agnhost netexec`` answers on ``/hostname``, the Kubernetes
    e2e tests' own workload); any other answer is counted as answered by "(unnamed: HTTP
    <status>)". A refused connection or no answer in ``timeout`` real seconds is a drop at the
    node. The security groups and the ELB's choice are still the lab's (no real network
    enforces them)."""

    def __init__(
        self,
        api: Api,
        *,
        address_of: NodeAddress = instance_address,
        path: str = "/hostname",
        timeout: float = 2.0,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.api = api
        self.address_of = address_of
        self.path = path
        self.timeout = timeout

    def _get(self, url: str) -> Obj | None:
        return get_or_none(self.api, url)

    def service(self, namespace: str, name: str) -> Obj | None:
        return self._get(f"/api/v1/namespaces/{namespace}/services/{name}")

    def node(self, name: str) -> Obj | None:
        return self._get(f"/api/v1/nodes/{name}")

    def node_objects(self) -> list[Obj]:
        return list((self._get("/api/v1/nodes") or {}).get("items") or [])

    def deliver(
        self,
        inst: ClassicInstance,
        node: str,
        node_port: int,
        *,
        namespace: str,
        rng: random.Random,
    ) -> PodTarget | Drop:
        host, port = self.address_of(inst, node_port)
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", self.path, headers={"User-Agent": "ccm-lab-traffic/1.0"})
            answer = conn.getresponse()
            status, body = answer.status, answer.read(4096)
        except ConnectionRefusedError:
            return Drop("node", f"connection refused at {host}:{port} ({node})")
        except TimeoutError:
            return Drop("node", f"no answer from {host}:{port} ({node}) in {self.timeout:g}s")
        except (OSError, http.client.HTTPException) as exc:
            return Drop("node", f"{host}:{port} ({node}): {type(exc).__name__}: {exc}")
        finally:
            conn.close()
        first = body.decode(errors="replace").strip().splitlines()[:1]
        name = first[0].strip() if first else ""
        if status == 200 and _POD_NAME.match(name):
            return PodTarget(namespace=namespace, name=name, ip="", node="")
        return PodTarget(namespace=namespace, name=f"(unnamed: HTTP {status})", ip="", node="")

    def kube_proxy_healthz(self, inst: ClassicInstance, node: str) -> tuple[int, Obj]:
        """A real ``GET /healthz`` to the node's kube-proxy (port 10256 at ``address_of``).
        Raises :class:`TrafficError` naming the address when nothing answers."""
        host, port = self.address_of(inst, KUBE_PROXY_HEALTHZ_PORT)
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", "/healthz", headers={"User-Agent": "ccm-lab-traffic/1.0"})
            answer = conn.getresponse()
            status, body = answer.status, answer.read(65536)
        except (OSError, http.client.HTTPException) as exc:
            raise TrafficError(
                f"kube-proxy's /healthz at {host}:{port} ({node}): {type(exc).__name__}: {exc}"
            ) from None
        finally:
            conn.close()
        try:
            parsed = json.loads(body or b"{}")
        except ValueError:
            raise TrafficError(
                f"kube-proxy's /healthz at {host}:{port} ({node}) answered HTTP {status} with a "
                f"body that is not JSON: {body[:120]!r}"
            ) from None
        return status, parsed if isinstance(parsed, dict) else {"body": parsed}


class TrafficProbe:
    """See the module doc."""

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
        self._nodes_now: list[Obj] | None = None

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
        nodes = self._nodes_now if self._nodes_now is not None else self.cluster.node_objects()
        return node_of(nodes, instance_id)

    def instance_of(self, node: str) -> str:
        obj = self.cluster.node(node)
        if obj is None:
            raise TrafficError(f"no node {node!r} in the cluster")
        found = _instance_id(str((obj.get("spec") or {}).get("providerID") or ""))
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
        if self.settle is not None:
            try:
                self.settle()
            except TimeoutError as err:  # lab.settle.SettleTimeout: who is stuck, and doing what
                raise TrafficError(f"{err}\n(no request was modelled)") from None
        svc = self._service(service)
        meta = svc["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        report = TrafficReport(key, requests, seed, source or DEFAULT_CLIENT)
        ports = [int(p["port"]) for p in (svc.get("spec") or {}).get("ports") or []]
        if port is None:
            if not ports:
                raise TrafficError(f"service {key} has no ports")
            port = ports[0]
        elif port not in ports:
            raise TrafficError(f"--port {port}: service {key} exposes {ports}")
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        hostname = next((str(i.get("hostname")) for i in ingress if i.get("hostname")), None)
        if hostname is None:
            report.drop(
                "service", "no load balancer: status.loadBalancer.ingress is empty", requests
            )
            return report
        lb = classic_load_balancer(self.aws, dns_name=hostname)
        namespace = str(meta.get("namespace") or "default")
        if lb is None:
            nlb = network_load_balancer(self.aws, dns_name=hostname)
            if nlb is None:
                report.drop("dns", f"{hostname} resolves to no load balancer", requests)
                return report
            self._send_nlb(report, nlb, port, source, rng, namespace)
            return report
        report.load_balancer = lb.name
        listener = lb.listener(port)
        if listener is None:
            have = ", ".join(str(x.port) for x in lb.listeners) or "none"
            report.drop(
                "elb-listener", f"{lb.name} has no listener on port {port} (has {have})", requests
            )
            return report
        pick = _Picker(lb, self.gates, rng)
        self._nodes_now = self.cluster.node_objects()  # one read per call, not per request
        try:
            self._walk(report, lb, listener, source, pick, rng, namespace)
        finally:
            self._nodes_now = None
        return report

    def _walk(
        self,
        report: TrafficReport,
        lb: ClassicLoadBalancer,
        listener: Any,
        source: str | None,
        pick: _Picker,
        rng: random.Random,
        namespace: str,
    ) -> None:
        for _ in range(report.requests):
            client_ip, client_groups = self._source(source, rng)
            hop = self._one(
                lb,
                listener.port,
                listener.instance_port,
                client_ip,
                client_groups,
                pick,
                rng,
                namespace,
            )
            if isinstance(hop, PodTarget):
                report.answered[f"{hop.namespace}/{hop.name}"] += 1
            else:
                report.drop(hop.hop, hop.reason)
            if pick.last is not None:
                report.instances[pick.last] += 1

    def _one(
        self,
        lb: ClassicLoadBalancer,
        port: int,
        node_port: int,
        client_ip: str,
        client_groups: tuple[str, ...],
        pick: _Picker,
        rng: random.Random,
        namespace: str,
    ) -> PodTarget | Drop:
        pick.last = None
        if lb.scheme == "internal" and not ipaddress.ip_address(client_ip).is_private:
            return Drop("elb", f"{lb.name} is internal: no route from {client_ip}")
        gate = self.gates.ingress(
            dest_groups=lb.security_groups,
            protocol="tcp",
            port=port,
            source_groups=client_groups,
            source_ip=client_ip,
        )
        if not gate.allowed:
            return Drop("elb-security-group", gate.reason)
        chosen = pick.next()
        if isinstance(chosen, Drop):
            return chosen
        pick.last = chosen.instance_id
        gate = self.gates.ingress(
            dest_groups=chosen.groups,
            protocol="tcp",
            port=node_port,
            source_groups=lb.security_groups,
        )
        if not gate.allowed:
            return Drop("node-security-group", gate.reason)
        node = self.node_of(chosen.instance_id)
        if node is None:
            return Drop(
                "node",
                f"{chosen.instance_id} is no node of the cluster (no Node has its providerID)",
            )
        return self.cluster.deliver(chosen, node, node_port, namespace=namespace, rng=rng)

    # -- through a network load balancer ---------------------------------------------------
    def _send_nlb(
        self,
        report: TrafficReport,
        nlb: NetworkLoadBalancer,
        port: int,
        source: str | None,
        rng: random.Random,
        namespace: str,
    ) -> None:
        report.load_balancer = nlb.name
        requests = report.requests
        listener = nlb.listener(port)
        if listener is None:
            have = ", ".join(str(x.port) for x in nlb.listeners) or "none"
            report.drop(
                "nlb-listener", f"{nlb.name} has no listener on port {port} (has {have})", requests
            )
            return
        tg = target_group(self.aws, listener.target_group_arn or "")
        if tg is None:
            report.drop(
                "nlb-listener",
                f"the listener on port {port} forwards to no target group "
                f"({listener.target_group_arn or 'no forward action'})",
                requests,
            )
            return
        pick = _NlbPicker(nlb, tg, self.gates, self.aws, rng)
        self._nodes_now = self.cluster.node_objects()
        try:
            for _ in range(requests):
                client_ip, client_groups = self._source(source, rng)
                hop = self._one_nlb(
                    nlb, tg, listener, client_ip, client_groups, pick, rng, namespace
                )
                if isinstance(hop, PodTarget):
                    report.answered[f"{hop.namespace}/{hop.name}"] += 1
                else:
                    report.drop(hop.hop, hop.reason)
                if pick.last is not None:
                    report.instances[pick.last] += 1
        finally:
            self._nodes_now = None

    def _one_nlb(
        self,
        nlb: NetworkLoadBalancer,
        tg: NlbTargetGroup,
        listener: NlbListener,
        client_ip: str,
        client_groups: tuple[str, ...],
        pick: _NlbPicker,
        rng: random.Random,
        namespace: str,
    ) -> PodTarget | Drop:
        pick.last = None
        # a UDP listener's datagrams meet UDP rules; TCP, TLS and TCP_UDP's TCP half meet TCP's
        protocol = "udp" if listener.protocol == "UDP" else "tcp"
        if nlb.scheme == "internal" and not ipaddress.ip_address(client_ip).is_private:
            return Drop("nlb", f"{nlb.name} is internal: no route from {client_ip}")
        if nlb.security_groups:
            gate = self.gates.ingress(
                dest_groups=nlb.security_groups,
                protocol=protocol,
                port=listener.port,
                source_groups=client_groups,
                source_ip=client_ip,
            )
            if not gate.allowed:
                return Drop("nlb-security-group", gate.reason)
        chosen = pick.next()
        if isinstance(chosen, Drop):
            return chosen
        inst, target = chosen
        pick.last = inst.instance_id
        if tg.preserve_client_ip and client_ip == inst.private_ip:
            # NLB guide, "Troubleshoot your Network Load Balancer" (loopback timeout): with client
            # IP preservation a target that reaches itself through the NLB (hairpinning) sees
            # its own address as the source and the connection times out
            return Drop(
                "nlb",
                f"{inst.instance_id} reached itself through the NLB with client IP preservation "
                "on: hairpinned connections time out",
            )
        source_ip: str | None = client_ip
        source_groups = client_groups
        if not tg.preserve_client_ip:  # the node sees the NLB node's address, not the client's
            source_ip, source_groups = nlb.node_address(inst.zone), nlb.security_groups
        gate = self.gates.ingress(
            dest_groups=inst.groups,
            protocol=protocol,
            port=target.port,
            source_groups=source_groups,
            source_ip=source_ip,
        )
        if not gate.allowed:
            seen = (
                "the client's address (client IP preserved)"
                if tg.preserve_client_ip
                else ("the NLB node's address (client IP not preserved)")
            )
            return Drop("node-security-group", f"{gate.reason}; the node sees {seen}")
        node = self.node_of(inst.instance_id)
        if node is None:
            return Drop(
                "node", f"{inst.instance_id} is no node of the cluster (no Node has its providerID)"
            )
        return self.cluster.deliver(inst, node, target.port, namespace=namespace, rng=rng)

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


class _Picker:
    """The load balancer's choice of instance: round robin over InService instances, within
    the client's zone unless cross-zone load balancing is on (a zone with no InService
    instance is left out of DNS, so its clients go to the other zones)."""

    def __init__(self, lb: ClassicLoadBalancer, gates: Gates, rng: random.Random) -> None:
        self.lb = lb
        self.rng = rng
        self.last: str | None = None
        self.healthy: list[ClassicInstance] = []
        self.reasons: list[str] = []
        for inst in sorted(lb.instances, key=lambda i: i.instance_id):
            ok, reason = gates.in_service(lb.name, inst.instance_id)
            if ok:
                self.healthy.append(inst)
            else:
                self.reasons.append(f"{inst.instance_id}: {reason}")
        self._turn: Counter[str] = Counter()

    def next(self) -> ClassicInstance | Drop:
        if not self.healthy:
            if not self.lb.instances:
                return Drop("elb", f"{self.lb.name} has no registered instance")
            return Drop("elb", "no InService instance (" + "; ".join(self.reasons) + ")")
        pool = self.healthy
        if not self.lb.cross_zone:
            zones = sorted({i.zone for i in self.healthy})
            zone = self.rng.choice(zones)
            pool = [i for i in self.healthy if i.zone == zone]
        key = "" if self.lb.cross_zone else pool[0].zone
        chosen = pool[self._turn[key] % len(pool)]
        self._turn[key] += 1
        return chosen


class _NlbPicker:
    """The NLB's choice of target (NLB guide, "Health checks for Network Load Balancer target
    groups" and "Cross-zone load balancing"):

    * targets in zones the NLB has no subnet in, draining, initial or unused get nothing (a new
      target gets traffic once it passed its initial checks);
    * the client resolves the NLB's name to the nodes of the zones that have a healthy target
      (the others are removed from DNS) and picks one; that node sends to a healthy target of
      its zone, or of any enabled zone with cross-zone load balancing (the group's
      ``load_balancing.cross_zone.enabled``, or the NLB's, default off);
    * when no enabled zone has a healthy target the NLB fails open: every zone is in DNS, and
      the unhealthy targets get traffic as if they were healthy;
    * the target within the pool: a flow hash (a random draw per request, from the seed).
    """

    def __init__(
        self,
        nlb: NetworkLoadBalancer,
        tg: NlbTargetGroup,
        gates: Gates,
        aws: AwsLab,
        rng: random.Random,
    ) -> None:
        self.nlb = nlb
        self.rng = rng
        self.cross_zone = cross_zone(nlb, tg)
        self.last: str | None = None
        self.reasons: list[str] = []
        healthy: list[tuple[ClassicInstance, NlbTarget]] = []
        unhealthy: list[tuple[ClassicInstance, NlbTarget]] = []
        for target in sorted(tg.targets, key=lambda t: t.instance_id):
            state, why = gates.target_health(tg.arn, target.instance_id)
            inst = instance(aws, target.instance_id)
            if nlb.zones and inst.zone not in nlb.zones:
                self.reasons.append(f"{target.instance_id}: {why}")
                continue
            if state == "healthy":
                healthy.append((inst, target))
            else:
                if state == "unhealthy":
                    unhealthy.append((inst, target))
                self.reasons.append(f"{target.instance_id}: {why}")
        self.registered = len(tg.targets)
        self.fail_open = not healthy and bool(unhealthy)
        self.pool = healthy or unhealthy
        if self.fail_open:
            self.zones = sorted(nlb.zones) or sorted({i.zone for i, _ in self.pool})
        else:
            self.zones = sorted({i.zone for i, _ in self.pool})

    def next(self) -> tuple[ClassicInstance, NlbTarget] | Drop:
        if not self.pool:
            if not self.registered:
                return Drop("nlb", f"{self.nlb.name}: its target group has no registered target")
            return Drop("nlb", "no healthy target (" + "; ".join(self.reasons) + ")")
        zone = self.rng.choice(self.zones)
        pool = self.pool if self.cross_zone else [m for m in self.pool if m[0].zone == zone]
        if not pool:
            return Drop(
                "nlb",
                f"failing open, the NLB node in {zone} has no target in its zone and cross-zone "
                "load balancing is off",
            )
        return self.rng.choice(pool)
