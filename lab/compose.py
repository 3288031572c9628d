"""The composed lab: AWS endpoint, EC2 topology, metadata, cluster, kubelet stand-in, controller.

One :class:`Lab` object owns every piece of one lab and brings them up in order:

1. the AWS endpoint (moto + fidelity + trail + faults, ``lab.aws``), in a thread;
2. the EC2 world the nodes live in (``lab.aws.topology``): VPC, public subnets per zone, node
   security group with its self rule, one instance per node carrying the node's IP;
3. the instance metadata service (``lab.imds``) whose default instance is the control-plane
   node's, so the controller's "own instance" is that node, as on a real control plane;
4. the cluster: the API simulator (``lab.kube``) plus the kubelet stand-in
   (``lab.cluster.kubelet``) registering every node as a ``--cloud-provider=external`` kubelet
   of the chosen Kubernetes version does, with ``provider-id`` set as the kind configs set it;
5. the controller (``lab.controllerproc``) as a child process with a written cloud config.

The same object serves pytest (``lab.pytest_plugin``: one lab per session or xdist worker,
``reset()`` between tests) and ``invoke lab.up`` (``lab.daemon`` hosts it in a background
process and writes ``.lab/<name>/state.json``). ``reset()`` restores the freshly-seeded world
without restarting servers: AWS state and trail, Kubernetes objects, node registrations,
metadata injections, and stops the controller so the next test starts it with its own flags.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from lab.aws import AwsServer
from lab.aws.topology import NodeSpec as AwsNodeSpec
from lab.aws.topology import Topology, TopologySpec, seed_topology
from lab.cluster.base import Role
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.cluster.versions import KubeVersion
from lab.controllerproc import ControllerProcess, ControllerSpec, render_cloud_config
from lab.imds import ImdsServer
from lab.kube.server import KubeServer
from lab.kube.version import DEFAULT_K8S_VERSION

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LabNode:
    """One node of the lab: its Kubernetes name and the EC2 instance behind it."""

    name: str
    role: Role
    private_ip: str
    zone: str
    instance_id: str
    private_dns_name: str

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.instance_id}"


@dataclasses.dataclass(frozen=True)
class LabConfig:
    """Everything that shapes a lab. Defaults give the write-ups' setup, already fixed."""

    name: str = "default"
    nodes: int = 2
    k8s_version: str = DEFAULT_K8S_VERSION
    region: str = "us-east-1"
    zones: tuple[str, ...] = ("us-east-1a", "us-east-1b")
    cluster_id: str = "ccm-lab"
    seed: int = 1
    #: register nodes with ``provider-id`` (as the kind configs do); False = name lookup only
    provider_ids: bool = True
    #: "sim" (API simulator + kubelet stand-in) or "kind" (real kind through its CLI)
    backend: str = "sim"
    kind_binary: str = "kind"
    docker_binary: str = "docker"
    #: kind only: the AWS endpoint and metadata service listen on the nodes' Docker gateway
    #: (not loopback) so an in-cluster controller (``invoke lab.controller.deploy``) reaches them
    expose_to_nodes: bool = False
    #: Kubelet stand-in timing: fast enough for tests, shaped like a real kubelet.
    lease_renew_interval: float = 2.0
    node_monitor_grace_period: float = 4.0
    state_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if not self.zones:
            raise ValueError("zones must not be empty")
        if self.backend not in ("sim", "kind"):
            raise ValueError(f"backend must be 'sim' or 'kind', got {self.backend!r}")


def node_plan(cfg: LabConfig) -> list[tuple[str, Role, str, str]]:
    """(name, role, private IP, zone) per node: kind's names, one subnet per zone.

    The control plane is ``<cluster>-control-plane``; workers are ``<cluster>-worker``,
    ``<cluster>-worker2``, ... so the sim and kind backends name nodes alike.
    """
    cidrs = _topology_spec(cfg, ()).subnet_cidrs()
    plan: list[tuple[str, Role, str, str]] = []
    for i in range(cfg.nodes):
        zone_index = i % len(cfg.zones)
        ip = str(ipaddress.ip_network(cidrs[cfg.zones[zone_index]])[10 + i])
        if i == 0:
            plan.append((f"{cfg.cluster_id}-control-plane", Role.CONTROL_PLANE, ip, cfg.zones[0]))
        else:
            suffix = "" if i == 1 else str(i)
            plan.append(
                (f"{cfg.cluster_id}-worker{suffix}", Role.WORKER, ip, cfg.zones[zone_index])
            )
    return plan


def _topology_spec(cfg: LabConfig, nodes: Sequence[AwsNodeSpec]) -> TopologySpec:
    return TopologySpec(
        cluster_id=cfg.cluster_id, region=cfg.region, zones=cfg.zones, nodes=tuple(nodes)
    )


class Lab:
    """A whole lab in this process (servers in threads, the controller as a child process)."""

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        self.version: KubeVersion = KubeVersion.parse(self.config.k8s_version)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.state_dir = self.config.state_dir or Path()
        self.aws: AwsServer | None = None
        self.imds: ImdsServer | None = None
        self.kube: KubeServer | None = None
        self.kubelet: KubeletStandIn | None = None
        self.topology: Topology | None = None
        self.nodes: list[LabNode] = []
        self.controller: ControllerProcess | None = None
        self.cluster: Any = None  # lab.cluster.kind.KindProvider on the kind backend
        self._node_snapshot: dict[str, dict[str, Any]] = {}
        self._api_client: Any = None
        self._controller_runs = 0
        #: True right after start() or reset(): nothing has touched the world yet.
        self.fresh = False

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Lab:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, progress: Callable[[str], None] | None = None) -> Lab:
        say = progress or (lambda _msg: None)
        if self.config.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"ccm-lab-{self.config.name}-")
            self.state_dir = Path(self._tmp.name)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.config.backend == "kind":
                self._start_kind(say)
                return self
            say("AWS endpoint (moto + fidelity layer + trail)")
            self.aws = AwsServer(region=self.config.region, seed=self.config.seed).start()
            # moto's state is process-wide and outlives an earlier Lab in this process.
            self.aws.control.reset()
            say("EC2 topology (VPC, subnets, node security group, instances)")
            self._seed_aws(node_plan(self.config))
            say("instance metadata service")
            self.imds = ImdsServer(
                self.aws.url,
                self.config.region,
                instance_id=self.control_plane.instance_id,
            )
            self.imds.start()
            say(f"Kubernetes API simulator ({self.version})")
            self.kube = KubeServer(version=str(self.version), workdir=self.state_dir / "kube")
            self.kube.start()
            self.kube.write_kubeconfig(self.kubeconfig_path)
            say(f"kubelet stand-in registering {len(self.nodes)} node(s)")
            self._start_kubelet()
            self._write_cloud_config()
            self.fresh = True
        except BaseException:
            self.stop()
            raise
        return self

    def _start_kind(self, say: Callable[[str], None]) -> None:
        """kind: provision, then give every node container a fake instance with its IP.

        The nodes join a Docker network whose subnet is the first zone's VPC subnet (container
        IPs taken from its upper half, clear of the addresses AWS reserves), so each kubelet's
        ``--node-ip`` is its instance's private IP; providerIDs are set on the Nodes once the
        instances exist. Real kubelets replace the stand-in: tests that need its hooks skip.
        """
        from lab.cluster.base import ClusterSpec
        from lab.cluster.base import NodeSpec as ClusterNodeSpec
        from lab.cluster.kind import KindProvider

        cfg = self.config
        zone = cfg.zones[0]
        subnet = ipaddress.ip_network(_topology_spec(cfg, ()).subnet_cidrs()[zone])
        upper = list(subnet.subnets(new_prefix=subnet.prefixlen + 1))[1]
        self.cluster = KindProvider(
            f"ccm-lab-{cfg.name}",
            state_dir=self.state_dir / "kind",
            kind_binary=cfg.kind_binary,
            docker_binary=cfg.docker_binary,
            network_subnet=str(subnet),
            network_ip_range=str(upper),
        )
        roles = [Role.CONTROL_PLANE] + [Role.WORKER] * (cfg.nodes - 1)
        say(f"kind cluster ({self.version}, {cfg.nodes} nodes; this takes a minute)")
        self.cluster.provision(
            ClusterSpec(
                name=self.cluster.name,
                version=self.version,
                nodes=tuple(ClusterNodeSpec(role=r) for r in roles),
            )
        )
        infos = self.cluster.nodes()
        missing = [i.name for i in infos if not i.ip]
        if missing:
            raise RuntimeError(f"kind nodes without an IP on the lab network: {missing}")
        host = self.cluster.host_address() if cfg.expose_to_nodes else "127.0.0.1"
        say(f"AWS endpoint on {host} (moto + fidelity layer + trail)")
        self.aws = AwsServer(region=cfg.region, seed=cfg.seed, host=host).start()
        self.aws.control.reset()  # moto's state is process-wide
        say("EC2 topology with the node containers' IPs")
        self._seed_aws([(str(i.name), i.role, str(i.ip), zone) for i in infos])
        say("instance metadata service")
        self.imds = ImdsServer(
            self._need(self.aws, "aws").url,
            cfg.region,
            instance_id=self.control_plane.instance_id,
            host=host,
        )
        self.imds.start()
        shutil.copyfile(self.cluster.kubeconfig(), self.kubeconfig_path)
        say("providerIDs on the Nodes")
        from kubernetes import client

        core: Any = client.CoreV1Api(self.api_client())
        for node in self.nodes:
            current = core.read_node(node.name)
            if not current.spec.provider_id:
                core.patch_node(node.name, {"spec": {"providerID": node.provider_id}})
        self._node_snapshot = {n.name: _restorable(core.read_node(n.name)) for n in self.nodes}
        self._write_cloud_config()
        self.fresh = True

    def stop(self) -> None:
        """Stop everything this lab started. Idempotent; leaves no process or port behind."""
        if self.controller is not None:
            self.controller.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
            self.kubelet = None
        if self._api_client is not None:
            self._api_client.close()
            self._api_client = None
        for component in (self.kube, self.imds, self.aws):
            if component is not None:
                component.stop()
        self.kube = self.imds = self.aws = None
        if self.cluster is not None:
            self.cluster.delete()
            self.cluster = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # --- world ----------------------------------------------------------------------------

    def _seed_aws(self, plan: Sequence[tuple[str, Role, str, str]]) -> None:
        """Seed the topology for ``plan``. moto's id generator is re-seeded first, so every
        seeding (start and each reset) yields the same ids: on kind the Nodes' providerIDs,
        immutable once set, keep naming the right instances."""
        aws = self._need(self.aws, "aws")
        ec2 = aws.client("ec2")
        ec2.describe_vpcs()  # moto builds a region's default VPC lazily: do it before seeding
        aws.control.seed(self.config.seed)
        spec = _topology_spec(
            self.config,
            [AwsNodeSpec(name=name, private_ip=ip, zone=zone) for name, _role, ip, zone in plan],
        )
        self.topology = seed_topology(ec2, spec)
        self.nodes = []
        for name, role, ip, zone in plan:
            inst = self.topology.instances[name]
            self.nodes.append(
                LabNode(
                    name=name,
                    role=role,
                    private_ip=ip,
                    zone=zone,
                    instance_id=inst.instance_id,
                    private_dns_name=inst.private_dns_name,
                )
            )

    def _start_kubelet(self) -> None:
        self.kubelet = KubeletStandIn(
            self.api_client(),
            lease_renew_interval=self.config.lease_renew_interval,
            node_monitor_grace_period=self.config.node_monitor_grace_period,
        )
        for node in self.nodes:
            self.kubelet.register(self.registration(node))
        self.kubelet.start()

    def registration(self, node: LabNode, **changes: Any) -> NodeRegistration:
        """How the kubelet stand-in registers ``node`` (tweak with keyword ``changes``)."""
        reg = NodeRegistration(
            name=node.name,
            ip=node.private_ip,
            version=self.version,
            role=node.role,
            provider_id=node.provider_id if self.config.provider_ids else None,
        )
        return dataclasses.replace(reg, **changes) if changes else reg

    def reregister(self, node_name: str, /, **changes: Any) -> dict[str, Any]:
        """Register node ``node_name`` again as a kubelet started with other flags would.

        The Node (and its Lease) is deleted and created anew from
        :meth:`registration` with ``changes`` (``ip=``, ``name=``, ``version=``,
        ``provider_id=``, ``labels=``...). Returns the new Node as the server has it.
        """
        kubelet = self._need(self.kubelet, "kubelet stand-in")
        node = self.node(node_name)
        kubelet.unregister(node_name, delete=True)
        return dict(kubelet.register(self.registration(node, **changes)))

    def remove_node(self, name: str) -> None:
        """Delete node ``name`` from the cluster (its instance stays)."""
        self._need(self.kubelet, "kubelet stand-in").unregister(name, delete=True)

    def _write_cloud_config(self, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        aws = self._need(self.aws, "aws")
        self.cloud_config_path.write_text(
            render_cloud_config(
                region=self.config.region,
                cluster_id=self.config.cluster_id,
                aws_endpoint=aws.url,
                extra_global=extra_global,
            ),
            encoding="utf-8",
        )
        return self.cloud_config_path

    # --- reset ----------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the freshly seeded world; the controller is stopped.

        The controller is killed, not asked to stop: everything it could clean up on the
        way out is wiped below anyway.
        """
        if self.controller is not None:
            self.controller.kill()
            self.controller.stop()
            self.controller = None
        aws = self._need(self.aws, "aws")
        if self.kubelet is not None:
            self.kubelet.stop()
            self.kubelet = None
        aws.control.reset()
        self._seed_aws([(n.name, n.role, n.private_ip, n.zone) for n in self.nodes])
        imds = self._need(self.imds, "imds")
        imds.control.reset()
        imds.control.set_default_instance(self.control_plane.instance_id)
        if self.config.backend == "kind":
            self._reset_kind_objects()
        else:
            self._need(self.kube, "kube").control.reset()
            self._start_kubelet()
        self._write_cloud_config()
        aws.control.clear_trail()
        self.fresh = True

    def _reset_kind_objects(self) -> None:
        """A real cluster cannot be wiped: remove what tests create, restore the nodes."""
        from kubernetes import client

        core: Any = client.CoreV1Api(self.api_client())
        for svc in core.list_namespaced_service("default").items:
            if svc.metadata.name == "kubernetes":
                continue
            if svc.metadata.finalizers:
                core.patch_namespaced_service(
                    svc.metadata.name, "default", {"metadata": {"finalizers": None}}
                )
            core.delete_namespaced_service(svc.metadata.name, "default")
        core.delete_collection_namespaced_event("default")
        for node in self.nodes:
            wanted = self._node_snapshot[node.name]
            current = _restorable(core.read_node(node.name))
            patch: dict[str, Any] = {"metadata": {}, "spec": {"taints": wanted["taints"]}}
            for field in ("labels", "annotations"):
                patch["metadata"][field] = {
                    **{k: None for k in current[field] if k not in wanted[field]},
                    **wanted[field],
                }
            core.patch_node(node.name, patch)

    # --- controller -----------------------------------------------------------------------

    def controller_spec(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
    ) -> ControllerSpec:
        self._controller_runs += 1
        return ControllerSpec(
            kubeconfig=self.kubeconfig_path,
            cloud_config=cloud_config or self.cloud_config_path,
            log_path=self.state_dir / f"controller-{self._controller_runs}.log",
            imds_endpoint=self._need(self.imds, "imds").url if imds else None,
            legacy=tuple(legacy),
            extra_args=tuple(args),
        )

    def start_controller(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
        wait_ready: bool = True,
    ) -> ControllerProcess:
        """(Re)start the controller with these flags; waits for ``/healthz`` unless told not."""
        if self.controller is not None:
            self.controller.stop()
        self.controller = ControllerProcess(
            self.controller_spec(legacy=legacy, args=args, imds=imds, cloud_config=cloud_config)
        )
        self.controller.start(wait_ready=wait_ready)
        return self.controller

    def write_cloud_config(self, *, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        """Rewrite the cloud config (e.g. ``ElbSecurityGroup``); restart the controller after."""
        return self._write_cloud_config(extra_global)

    # --- accessors ------------------------------------------------------------------------

    @property
    def has_kubelet_stand_in(self) -> bool:
        """True on sim: nodes can be re-registered, made NotReady, removed at will."""
        return self.config.backend == "sim"

    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def cloud_config_path(self) -> Path:
        return self.state_dir / "cloud.conf"

    @property
    def control_plane(self) -> LabNode:
        return next(n for n in self.nodes if n.role is Role.CONTROL_PLANE)

    def node(self, name: str) -> LabNode:
        for n in self.nodes:
            if n.name == name:
                return n
        known = ", ".join(n.name for n in self.nodes)
        raise KeyError(f"no lab node {name!r}; the lab has: {known}")

    @property
    def workers(self) -> list[LabNode]:
        return [n for n in self.nodes if n.role is Role.WORKER]

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for the lab's cluster (one, shared)."""
        if self._api_client is None:
            if self.kube is not None:
                self._api_client = self.kube.api_client()
            else:
                from kubernetes import config

                self._api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=str(self.kubeconfig_path)
                )
        return self._api_client

    def state(self) -> dict[str, Any]:
        """The ``state.json`` document ``invoke lab.status`` and tools read."""
        aws = self._need(self.aws, "aws")
        topo = self.topology
        ctl = self.controller
        return {
            "name": self.config.name,
            "backend": self.config.backend,
            "k8s_version": str(self.version),
            "kubeconfig": str(self.kubeconfig_path),
            "cloud_config": str(self.cloud_config_path),
            "aws_endpoint": aws.url,
            "imds_endpoint": self._need(self.imds, "imds").url,
            "kube_endpoint": self.kube.url if self.kube else None,
            "region": self.config.region,
            "cluster_id": self.config.cluster_id,
            "vpc_id": topo.vpc_id if topo else None,
            "node_security_group": topo.node_security_group.group_id if topo else None,
            "nodes": [
                {
                    "name": n.name,
                    "role": str(n.role),
                    "instance_id": n.instance_id,
                    "private_ip": n.private_ip,
                    "zone": n.zone,
                    "provider_id": n.provider_id,
                }
                for n in self.nodes
            ],
            "controller": None
            if ctl is None
            else {
                "pid": ctl.pid,
                "health_url": f"{ctl.url}/healthz" if ctl.ready else None,
                "metrics_url": f"{ctl.url}/metrics" if ctl.ready else None,
                "flags": list(ctl.spec.argv(address_file=Path("-"))[3:]),
                "log": str(ctl.spec.log_path),
            },
        }

    @staticmethod
    def _need(component: Any, what: str) -> Any:
        if component is None:
            raise RuntimeError(f"the lab's {what} component is not running (start the lab first)")
        return component


def _restorable(node: Any) -> dict[str, Any]:
    """The parts of a Node tests change and reset restores (providerID is immutable)."""
    return {
        "labels": dict(node.metadata.labels or {}),
        "annotations": dict(node.metadata.annotations or {}),
        "taints": [
            {k: v for k, v in {"key": t.key, "value": t.value, "effect": t.effect}.items() if v}
            for t in (node.spec.taints or [])
        ],
    }


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; raise ``TimeoutError`` naming it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or predicate!r}")
