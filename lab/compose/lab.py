"""The composed lab: AWS endpoint, EC2 topology, metadata, cluster, controller.

One :class:`Lab` object owns every piece of one lab and brings them up as ordered steps
(``lab.cluster.steps``, kind's ``create/actions`` pattern), undone in reverse when one fails, so a
failed start leaves nothing behind:

1. ``prepare-cluster``: what must exist before the endpoints (kind: the nodes' Docker network);
2. ``start-aws``: the AWS endpoint (moto + fidelity + trail + faults, ``lab.aws``), in a thread,
   on loopback or, with ``expose_to_nodes``, where the nodes reach the host; for LocalStack or
   a real account (``aws="real"``) the recording proxy in front of it (``lab.aws.proxied``),
   with the run's guard for a real account (``lab.aws.runproxy``);
3. ``seed-aws``: the EC2 world the nodes live in (``lab.aws.topology``): VPC, subnets per zone,
   the node security group with its self rule, one instance per planned node
   (``lab.cluster.planner``) carrying the node's IP; a real account's run already has its
   world (``lab.up`` created it), which is read back instead;
4. ``start-imds``: the instance metadata service whose default instance is the control plane's,
   so the controller's "own instance" is that node, as on a real control plane;
5. ``provision-cluster``: the cluster provider (``lab.cluster``: sim, kind, existing) creates the
   cluster with every node's name, IP and ``aws:///<zone>/<instance-id>`` providerID (an
   existing cluster is only checked to answer: its nodes, read in ``seed-aws``, are what it
   has, and the lab creates and deletes nothing in it);
6. ``align-instances``: where the backend assigns node IPs itself (Docker on kind), the
   instances are seeded again with the IPs the nodes got (the seeded id generator gives them the
   same ids) and providerIDs still empty are set;
7. ``write-cloud-config``, then the provider remembers the cluster as reset restores it.

The lab never asks which backend it runs on; it asks the provider's ``capabilities()``. The
controller (``lab.controllerproc``) is started on demand with the flags a test or task wants.

The same object serves pytest (``lab.pytest_plugin``: one lab per session or xdist worker,
``reset()`` between tests) and ``invoke lab.up`` (``lab.daemon`` hosts it in a background
process). ``reset()`` restores the freshly seeded world without restarting servers.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from lab.aws import AwsServer
from lab.aws.elbprobe import (
    BackgroundAnswers,
    NetworkAnswers,
    ProbeResult,
    ProbeTarget,
    running_answers,
)
from lab.aws.elbview import ClassicInstance
from lab.aws.gates import AwsGates
from lab.aws.proxied import FEATURES, ProxiedAws
from lab.aws.topology import NodeSpec as AwsNodeSpec
from lab.aws.topology import Topology, TopologySpec, delete_topology, seed_topology
from lab.clock import DEFAULT_SPEED, LabClock, ScaledClock, check_speed
from lab.cluster.base import (
    Capabilities,
    ClusterProvider,
    ClusterSpec,
    NodeSpec,
    ProviderID,
    Role,
)
from lab.cluster.factory import make_provider
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.cluster.planner import plan_nodes
from lab.cluster.sim import SimProvider
from lab.cluster.steps import ProgressReporter, Step, StepRun
from lab.cluster.versions import KubeVersion
from lab.controllerproc import (
    ControllerCommand,
    ControllerProcess,
    ControllerSpec,
    controller_launcher,
    render_cloud_config,
)
from lab.dataplane.api import Api
from lab.dataplane.plane import SimDataPlane
from lab.dataplane.versions import parse_feature_gates
from lab.imds import ImdsServer
from lab.kube.server import KubeServer
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.settle import Reporter, settle
from lab.state import AWS_BACKENDS, BACKENDS, LabState, node_states
from lab.traffic import (
    Gate,
    ModelledCluster,
    NodeAddress,
    RealCluster,
    TrafficProbe,
    instance_address,
)

log = logging.getLogger(__name__)

#: a kind node always listens here (the kubelet): the host-to-node reachability probe
KUBELET_PORT = 10250


class LabNotReady(RuntimeError):
    """A part of the lab was asked for that is not running (or that this backend lacks)."""


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
    #: "sim" (API simulator + kubelet stand-in), "kind" (real kind through its CLI) or
    #: "existing" (the cluster ``kubeconfig`` names: its own nodes, nothing of ours in it)
    backend: str = "sim"
    #: existing: the kubeconfig of the cluster to attach to
    kubeconfig: Path | None = None
    kind_binary: str = "kind"
    docker_binary: str = "docker"
    #: kind only: the AWS endpoint and metadata service listen on the nodes' Docker gateway
    #: (not loopback) so an in-cluster controller (``invoke lab.controller.deploy``) reaches them
    expose_to_nodes: bool = False
    #: sim: lab seconds per real second for every timed stand-in (``lab.clock``): grace
    #: periods, probes, node-monitor and health-check periods; 1.0 is real time.
    clock_speed: float = DEFAULT_SPEED
    #: sim, in lab seconds: the kubelet's Lease renewal (kubelet default 10 s) and
    #: kube-controller-manager's node-monitor grace period (None: that version's default,
    #: 40 s or 50 s from 1.32). At the default speed a node goes Unknown 4-5 s after its
    #: kubelet stops.
    lease_renew_interval: float = 10.0
    node_monitor_grace_period: float | None = None
    #: sim: the data plane's ``--feature-gates`` (``Name=true,...``), checked against what
    #: that release knows; only gates the data-plane models act on (``FEATURE_GATES``)
    feature_gates: str = ""
    state_dir: Path | None = None
    #: the VPC's block (its first zone's subnet is the kind nodes' Docker network); None: the
    #: topology's 10.0.0.0/16 on sim, the first block free on this host on kind
    #: (``lab.cluster.kind_network``)
    vpc_cidr: str | None = None
    #: sim: serve the API simulator over plain HTTP to anyone (no CA, no token in the
    #: kubeconfig). By default it serves HTTPS with a fresh CA and requires the lab's token,
    #: both in the kubeconfig. The control planes (``/_lab/``) need the token either way.
    insecure_api: bool = False
    #: how :meth:`Lab.start_controller` starts our controller: "fork" from this process's
    #: fork server, which has imported it once (``lab.component.forkserver``: a start then
    #: costs what the controller does, not its imports), or "exec" (``python -m controller``
    #: afresh every time). Another build (``--controller-cmd``) is always exec'd.
    controller_launch: str = "fork"
    #: the AWS endpoint: "moto" (the lab's own, with the fidelity layer and the ELB model) or
    #: "localstack" (``aws_endpoint``, or a container started through Docker), reached through
    #: the recording proxy (``lab.aws.proxied``) so the trail and faults work the same
    aws: str = "moto"
    #: localstack: the base URL of a running LocalStack; None starts one through Docker
    aws_endpoint: str | None = None
    #: real: the run (``lab.aws.realaccount``) whose instances are the nodes; the account is
    #: boto3's usual chain's, reached through the recording proxy with the run's guard
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if not self.zones:
            raise ValueError("zones must not be empty")
        if self.backend not in (*BACKENDS, "existing"):
            raise ValueError(
                f"backend must be one of {', '.join(BACKENDS)}, existing; got {self.backend!r}"
            )
        if (self.backend == "existing") != (self.kubeconfig is not None):
            raise ValueError(
                "kubeconfig names the cluster of backend 'existing' and only that backend's; "
                f"got backend={self.backend!r}, kubeconfig={self.kubeconfig!r}"
            )
        KubeVersion.parse(self.k8s_version)  # raises ValueError naming the text
        check_speed(self.clock_speed)  # raises ValueError naming the value
        if self.controller_launch not in ("fork", "exec"):
            raise ValueError(
                f"controller_launch must be fork or exec, got {self.controller_launch!r}"
            )
        if self.feature_gates and self.backend != "sim":
            raise ValueError(
                "feature_gates set the sim backend's data plane; on kind, set them in the "
                "cluster's kubeadm config"
            )
        parse_feature_gates(self.feature_gates, self.k8s_version)  # ValueError naming the gate
        if self.aws not in AWS_BACKENDS:
            raise ValueError(f"aws must be one of {', '.join(AWS_BACKENDS)}, got {self.aws!r}")
        if self.aws_endpoint is not None and self.aws != "localstack":
            raise ValueError("aws_endpoint names a LocalStack: it needs aws='localstack'")
        if (self.aws == "real") != (self.run_id is not None):
            raise ValueError(
                f"run_id names the real-account run of aws='real' and only that; got "
                f"aws={self.aws!r}, run_id={self.run_id!r}"
            )
        if self.aws == "real" and self.backend != "sim":
            raise ValueError(f"aws='real' runs with backend 'sim' only, got {self.backend!r}")
        if self.insecure_api and self.backend != "sim":
            raise ValueError(
                "insecure_api opens the sim backend's API simulator; a kind cluster's API "
                "server always serves TLS with kind's own credentials"
            )

    @property
    def cluster_name(self) -> str:
        """The cluster's name (and its nodes' name prefix). kind clusters share the host's
        Docker engine, so each lab's is its own; the simulator's is the cluster id."""
        if self.backend in ("sim", "existing"):
            return self.cluster_id
        return f"{self.cluster_id}-{self.name}"


def _topology_spec(cfg: LabConfig, nodes: Sequence[AwsNodeSpec]) -> TopologySpec:
    spec = TopologySpec(
        cluster_id=cfg.cluster_id, region=cfg.region, zones=cfg.zones, nodes=tuple(nodes)
    )
    return dataclasses.replace(spec, vpc_cidr=cfg.vpc_cidr) if cfg.vpc_cidr else spec


def _make_provider(
    cfg: LabConfig, state_dir: Path, clock: LabClock, *, token: str
) -> ClusterProvider:
    if cfg.backend == "sim":
        secure = not cfg.insecure_api
        return make_provider(
            "sim",
            name=cfg.cluster_name,
            state_dir=state_dir / "cluster",
            clock=clock,
            # HTTPS and the lab's token (both in the kubeconfig) unless told otherwise; /_lab
            # needs the token either way
            simulator_options={
                "tls": secure,
                "token": token if secure else None,
                "control_token": token,
            },
            kubelet_options={"lease_renew_interval": cfg.lease_renew_interval},
            dataplane_options={
                "node_monitor_grace_period": cfg.node_monitor_grace_period,
                "seed": cfg.seed,
                "feature_gates": parse_feature_gates(cfg.feature_gates, cfg.k8s_version),
            },
        )
    if cfg.backend == "existing":
        assert cfg.kubeconfig is not None  # LabConfig checks it
        return make_provider(
            "existing", name=cfg.cluster_name, state_dir=state_dir, kubeconfig=cfg.kubeconfig
        )
    # The nodes join a Docker network whose subnet is the first zone's VPC subnet, container
    # IPs from its upper half (clear of the addresses AWS reserves), so each kubelet's
    # --node-ip is a valid private IP of its instance.
    subnet = ipaddress.ip_network(_topology_spec(cfg, ()).subnet_cidrs()[cfg.zones[0]])
    upper = list(subnet.subnets(new_prefix=subnet.prefixlen + 1))[1]
    return make_provider(
        cfg.backend,
        name=cfg.cluster_name,
        state_dir=state_dir / "kind",
        kind_binary=cfg.kind_binary,
        docker_binary=cfg.docker_binary,
        network_subnet=str(subnet),
        network_ip_range=str(upper),
    )


# --- the start steps -----------------------------------------------------------------------


@dataclasses.dataclass
class _Step:
    """A start step: ``do``/``undo`` are methods of the lab (``undo`` tolerates half a do)."""

    name: str
    do: Callable[[], None]
    undo_fn: Callable[[], None] = lambda: None

    def execute(self, ctx: Lab) -> None:
        self.do()

    def undo(self, ctx: Lab) -> None:
        self.undo_fn()


class Lab:
    """A whole lab in this process (servers in threads, the controller as a child process)."""

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        self.version: KubeVersion = KubeVersion.parse(self.config.k8s_version)
        #: the lab clock (``lab.clock``) every timed part of this lab runs on
        self.clock: LabClock = ScaledClock(self.config.clock_speed)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.state_dir = self.config.state_dir or Path()
        self._aws: AwsServer | ProxiedAws | None = None
        #: the LocalStack container this lab started (``aws="localstack"`` without an endpoint)
        self.localstack_container: str | None = None
        #: real health checks to the node containers (kind), run off the endpoint's lock
        self._network_answers: BackgroundAnswers | None = None
        #: why the host cannot reach the real nodes (kind on Docker Desktop), if it cannot
        self._nodes_unreachable: str | None = None
        self._imds: ImdsServer | None = None
        self._cluster: ClusterProvider | None = None
        #: where the endpoints listen: loopback, or the nodes' gateway with expose_to_nodes
        self._endpoint_host = "127.0.0.1"
        self.topology: Topology | None = None
        #: the plan whose freshly seeded moto state the endpoint holds as its checkpoint
        self._seeded: tuple[tuple[str, Role, str, str], ...] | None = None
        self.nodes: list[LabNode] = []
        #: what the lab changed in a cluster it did not create (backend existing), one line
        #: each: it creates nothing there, and ``stop()`` deletes nothing there
        self.cluster_changes: list[str] = []
        self.controller: ControllerProcess | None = None
        self._run: StepRun[Lab] | None = None
        self._controller_runs = 0
        #: True right after start() or reset(): nothing has touched the world yet.
        self.fresh = False
        #: another controller build every ``start_controller`` runs instead of ours (pytest
        #: ``--controller-cmd``), and what to do with a call that needs ours (its flags)
        self.controller_command: ControllerCommand | None = None
        self.needs_our_controller: Callable[[str], bool] | None = None
        #: the AWS trail's last sequence number when the controller last started (what came
        #: after is the controller's doing, or the test's)
        self.controller_since_seq = 0
        #: the lab's secret (see ``LabState.token``): its control planes' bearer token
        self.token = secrets.token_urlsafe(24)
        #: ``aws="real"``: the key pair the recording proxy accepts from callers (the
        #: controller, the lab's clients), fresh per lab (see ``LabState.aws_credentials``)
        self.aws_caller_credentials: tuple[str, str] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, progress: ProgressReporter | None = None) -> Self:
        """Bring every part up in order; on failure undo what was done and raise
        ``lab.cluster.steps.ProvisionError`` naming the step."""
        if self.config.state_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"ccm-lab-{self.config.name}-")
            self.state_dir = Path(self._tmp.name)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.config.backend == "kind":
            self.config = dataclasses.replace(self.config, vpc_cidr=self._free_vpc_cidr())
        self._cluster = _make_provider(self.config, self.state_dir, self.clock, token=self.token)
        self._run = StepRun(self._steps(), progress=progress)
        try:
            self._run.run(self)
        except BaseException:
            self._run = None
            self._cleanup_tmp()
            raise
        self.fresh = True
        return self

    def _free_vpc_cidr(self) -> str:
        """kind: the configured VPC block if it collides with no Docker network or host route
        (else ``NetworkCollision`` naming the collision), or the first free one."""
        from lab.cluster.kind_network import choose_vpc_cidr, docker_blocks, route_blocks
        from lab.exec import SubprocessRunner

        runner = SubprocessRunner()
        used = docker_blocks(runner, self.config.docker_binary) + route_blocks(runner)
        own = f"ccm-lab-{self.config.cluster_name}"  # a lab's own network, when it is reused
        return choose_vpc_cidr(used, wanted=self.config.vpc_cidr, ignore=[own])

    def _steps(self) -> list[Step[Lab]]:
        return [
            _Step("prepare-cluster", self._prepare_cluster, self._delete_cluster),
            _Step("start-aws", self._start_aws, self._stop_aws),
            _Step("seed-aws", self._seed_planned),
            _Step("start-imds", self._start_imds, self._stop_imds),
            _Step("provision-cluster", self._provision_cluster, self._delete_cluster),
            _Step("align-instances", self._align_instances),
            _Step("wire-health-checks", self._wire_health_checks),
            _Step("write-cloud-config", self._finish),
        ]

    def stop(self) -> None:
        """Stop everything this lab started. Idempotent; leaves no process or port behind."""
        self.stop_controller()
        if self._run is not None:
            errors = self._run.undo_all(self)
            self._run = None
            for name, err in errors:
                log.warning("stopping the lab: %s failed: %s", name, err)
        self._cleanup_tmp()

    def _cleanup_tmp(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # --- steps ----------------------------------------------------------------------------

    def _wanted_spec(self) -> ClusterSpec:
        """The cluster as configured: its name, version and node roles (the first node is the
        control plane); the planner fills in the rest."""
        roles = [Role.CONTROL_PLANE] + [Role.WORKER] * (self.config.nodes - 1)
        return ClusterSpec(
            name=self.config.cluster_name,
            version=self.version,
            nodes=tuple(NodeSpec(role=role) for role in roles),
        )

    def _cluster_spec(self) -> ClusterSpec:
        """The cluster as seeded: every node with its name, IP, zone and providerID."""
        return dataclasses.replace(
            self._wanted_spec(),
            nodes=tuple(
                NodeSpec(
                    role=n.role,
                    name=n.name,
                    ip=n.private_ip,
                    zone=n.zone,
                    provider_id=ProviderID(n.provider_id) if self.config.provider_ids else None,
                )
                for n in self.nodes
            ),
        )

    def _prepare_cluster(self) -> None:
        self.cluster.prepare(self._wanted_spec())

    def _delete_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.delete()

    def _start_aws(self) -> None:
        if self.config.expose_to_nodes:
            self._endpoint_host = self.cluster.host_address()
        if self.config.aws == "localstack":
            self._start_localstack()
            return
        if self.config.aws == "real":
            self._start_real_account()
            return
        self._aws = AwsServer(
            region=self.config.region,
            seed=self.config.seed,
            host=self._endpoint_host,
            clock_speed=self.config.clock_speed,
            token=self.token,
        )
        self._aws.start()
        self._aws.control.reset()  # moto's state is process-wide: an earlier Lab's is here
        # The ELB's health checks run on the lab's clock, ask the cluster what each node
        # answers, and are evaluated in the background so transitions are logged as they come.
        health = self._aws.lab.elb_health
        health.clock = self.clock
        health.set_node_answers(self._node_answers)  # real nodes: _wire_health_checks
        health.start_ticker(1.0)

    #: where a real request or health check for an instance's port connects (kind: the node
    #: container's IP, the instance's private address); tests with fake node containers point
    #: it at loopback
    node_address: NodeAddress = staticmethod(instance_address)

    def _wire_health_checks(self) -> None:
        """On a backend with real nodes (kind) the node containers answer the ELB's health
        checks themselves: real requests to each instance's private address (the container's
        IP), made off the endpoint's lock. Where the host cannot reach the node network
        (Docker Desktop on macOS or Windows: the containers' IPs live inside its VM), checks
        keep saying a running instance answers, and the log says so."""
        if not self._real_nodes or not self.nodes or self.aws_lacks("elb-model"):
            return
        first = self.nodes[0]
        probe = ClassicInstance(first.instance_id, first.zone, first.private_ip, "running")
        host, port = self.node_address(probe, KUBELET_PORT)
        try:
            with socket.create_connection((host, port), timeout=2.0):
                pass
        except OSError as exc:
            log.warning(
                "the node network is not reachable from this host (%s:%s: %s): the ELB's health "
                "checks say a running instance answers, and lab.traffic cannot send requests",
                host,
                port,
                exc,
            )
            self._nodes_unreachable = f"{host}:{port}: {exc}"
            return
        node_address = self.node_address
        self._network_answers = BackgroundAnswers(
            NetworkAnswers(lambda i, t: node_address(i, t.target.port), timeout=2.0)
        )
        self.aws.lab.elb_health.set_node_answers(self._network_answers)

    def _start_localstack(self) -> None:
        """A LocalStack (the one named, or a container started now) behind the recording
        proxy; what a previous lab of this cluster id left there is deleted first (LocalStack
        keeps its state between runs)."""
        from lab.aws.localstack import connect_localstack_at, lacks
        from lab.aws.localstack_docker import start_localstack

        if self.config.aws_endpoint is not None:
            endpoint = connect_localstack_at(
                self.config.aws_endpoint, self.config.region, timeout=5.0
            )
        else:
            started = start_localstack(
                self.config.name, region=self.config.region, docker=self.config.docker_binary
            )
            self.localstack_container = started.container
            endpoint = started.endpoint
        edition = f" ({endpoint.edition})" if endpoint.edition else ""
        proxy = ProxiedAws(
            endpoint.url,
            lacks=lacks(endpoint),
            describe=f"LocalStack {endpoint.version or ''}{edition} at {endpoint.url}",
            region=self.config.region,
            host=self._endpoint_host,
            token=self.token,
        )
        self._aws = proxy
        proxy.start()
        removed = delete_topology(proxy.client("ec2"), self.config.cluster_id)
        if removed:
            log.info("deleted %d resources a previous lab left in %s", removed, proxy.describe)
        proxy.control.clear_trail()

    def _start_real_account(self) -> None:
        """The account of boto3's usual chain behind the recording proxy, which signs each
        call again with that chain's credentials and passes it through the run's guard
        (:mod:`lab.aws.runproxy`): the controller holds the lab's own key pair (fresh per
        lab, the only one the proxy accepts), never the account's. Nothing is created or
        deleted here: the run's world exists (``lab.up`` created it) and stays until
        ``lab.down``."""
        from lab.aws import realaccount
        from lab.aws.proxy.callerauth import new_caller_credentials
        from lab.aws.runproxy import ProxyRunGuard

        assert self.config.run_id is not None  # LabConfig checks it
        clients = realaccount.account_clients(self.config.region, self.config.run_id)
        endpoint = clients.ec2.meta.endpoint_url
        credentials = realaccount.account_credentials()
        # the proxy signs with the user's credentials, so it must not sign for just anyone
        # who reaches its port: callers sign with this lab's own key pair, checked first
        self.aws_caller_credentials = new_caller_credentials()
        proxy = ProxiedAws(
            "aws" if realaccount.is_amazon_endpoint(endpoint) else endpoint,
            lacks={
                "fidelity": "a real account is AWS itself; the lab adds nothing to it",
                "elb-model": "a real account's load balancers check the real instances; the "
                "lab's model of them (lab.traffic, modelled health) is not there",
            },
            describe=f"the AWS account at {endpoint} (run {self.config.run_id})",
            region=self.config.region,
            host=self._endpoint_host,
            token=self.token,
            credentials=credentials,
            caller_credentials=self.aws_caller_credentials,
            guard=ProxyRunGuard(clients.guard, region=self.config.region),
        )
        self._aws = proxy
        proxy.start()

    def _stop_aws(self) -> None:
        if self._network_answers is not None:
            self._network_answers.close()
            self._network_answers = None
        aws, self._aws = self._aws, None
        real = self.config.aws == "real"  # the run's world stays until lab.down
        if isinstance(aws, ProxiedAws) and self.localstack_container is None and not real:
            # a LocalStack the lab does not own keeps its state: leave none of ours there
            try:
                delete_topology(aws.client("ec2", max_attempts=3), self.config.cluster_id)
            except Exception as exc:  # the lab still stops; the next start deletes it
                log.warning("could not delete the lab's topology in %s: %s", aws.describe, exc)
        if aws is not None:
            aws.stop()
        if self.localstack_container is not None:
            from lab.aws.localstack_docker import stop_localstack

            stop_localstack(self.localstack_container, docker=self.config.docker_binary)
            self.localstack_container = None

    def _plan(self) -> list[NodeSpec]:
        """Names, roles, zones and IPs of the nodes (``lab.cluster.planner``). A backend that
        assigns IPs itself puts every node on one network: the first zone's subnet. An
        existing cluster's nodes are what it has (:meth:`_existing_plan`)."""
        if self.config.backend == "existing":
            return self._existing_plan()
        cidrs = _topology_spec(self.config, ()).subnet_cidrs()
        zones = self.config.zones[:1] if self.capabilities.assigns_node_ips else self.config.zones
        return plan_nodes(
            self._wanted_spec(), subnets=[(z, cidrs[z]) for z in zones], first_host=10
        )

    def _existing_plan(self) -> list[NodeSpec]:
        """An existing cluster's nodes, each in the zone whose subnet holds its InternalIP.
        The VPC is ``vpc_cidr`` or else the /16 holding the first node's address; a cluster
        without a control-plane node has its first node stand for one (the metadata service's
        default instance)."""
        infos = sorted(
            self.cluster.nodes(), key=lambda n: (n.role is not Role.CONTROL_PLANE, n.name)
        )
        if not infos:
            raise RuntimeError(
                "the existing cluster has no nodes; the lab seeds one instance per node"
            )
        without_ip = [str(n.name) for n in infos if not n.ip]
        if without_ip:
            raise RuntimeError(f"existing cluster nodes without an InternalIP: {without_ip}")
        if self.config.vpc_cidr is None:
            block = ipaddress.ip_network(f"{infos[0].ip}/16", strict=False)
            self.config = dataclasses.replace(self.config, vpc_cidr=str(block))
        cidrs = {
            zone: ipaddress.ip_network(cidr)
            for zone, cidr in _topology_spec(self.config, ()).subnet_cidrs().items()
        }
        plan = []
        for index, info in enumerate(infos):
            address = ipaddress.ip_address(str(info.ip))
            zone = next((z for z, block in cidrs.items() if address in block), None)
            if zone is None:
                blocks = ", ".join(f"{z} {b}" for z, b in cidrs.items())
                raise RuntimeError(
                    f"node {info.name} has InternalIP {info.ip}, outside the lab's zone subnets "
                    f"({blocks}); give --vpc-cidr a block whose first /20s hold the nodes"
                )
            role = Role.CONTROL_PLANE if index == 0 else info.role
            plan.append(NodeSpec(role=role, name=info.name, ip=str(info.ip), zone=zone))
        return plan

    def _seed_planned(self) -> None:
        if self.config.aws == "real":
            self._find_run_world()
            return
        self._seed_aws([(str(n.name), n.role, str(n.ip), str(n.zone)) for n in self._plan()])

    def _seed_aws(self, plan: Sequence[tuple[str, Role, str, str]]) -> None:
        """Seed the topology for ``plan``. moto's id generator is re-seeded first, so every
        seeding (start and each reset) yields the same ids: the Nodes' providerIDs, immutable
        once set, keep naming the right instances."""
        aws = self.aws
        ec2 = aws.client("ec2")
        ec2.describe_vpcs()  # moto builds a region's default VPC lazily: do it before seeding
        if isinstance(aws, AwsServer):
            aws.control.seed(self.config.seed)
        # else: the upstream chooses the ids; the topology is found again by its tags
        spec = _topology_spec(
            self.config,
            [AwsNodeSpec(name=name, private_ip=ip, zone=zone) for name, _role, ip, zone in plan],
        )
        self._seeded = None
        self.topology = seed_topology(ec2, spec)
        if isinstance(aws, AwsServer):
            aws.control.checkpoint()  # what reset() restores
            self._seeded = tuple(plan)
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

    def _find_run_world(self) -> None:
        """``aws="real"``: the nodes are the run's instances, read back (through the proxy)
        as the run created them: ids, private IPs and DNS names, zones."""
        from lab.aws import realaccount
        from lab.aws.topology import describe_topology

        assert self.config.run_id is not None  # LabConfig checks it
        spec = realaccount.run_spec(
            self.config.run_id,
            self.config.region,
            nodes=self.config.nodes,
            vpc_cidr=self.config.vpc_cidr,
        )
        ec2 = self.aws.client("ec2", max_attempts=3)
        first = ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{realaccount.RUN_TAG}", "Values": [self.config.run_id]},
                {"Name": "tag:Name", "Values": [spec.nodes[0].name]},
            ]
        )["Reservations"]
        image = next((i.get("ImageId", "") for r in first for i in r.get("Instances", [])), "")
        if not image:
            raise RuntimeError(
                f"run {self.config.run_id}: no instance {spec.nodes[0].name} in "
                f"{self.describe_aws()}; was it removed (lab.down)?"
            )
        self.topology = describe_topology(ec2, dataclasses.replace(spec, image_id=image))
        self.nodes = [
            LabNode(
                name=node.name,
                role=Role.CONTROL_PLANE if index == 0 else Role.WORKER,
                private_ip=info.private_ip,
                zone=info.zone,
                instance_id=info.instance_id,
                private_dns_name=info.private_dns_name,
            )
            for index, node in enumerate(spec.nodes)
            for info in [self.topology.instances[node.name]]
        ]

    def _start_imds(self) -> None:
        self._imds = ImdsServer(
            self.aws.url,
            self.config.region,
            instance_id=self.control_plane.instance_id,
            host=self._endpoint_host,
            token=self.token,
            aws_credentials=self.aws_caller_credentials,
        )
        self._imds.start()

    def _stop_imds(self) -> None:
        if self._imds is not None:
            self._imds.stop()
            self._imds = None

    def _provision_cluster(self) -> None:
        self.cluster.provision(self._cluster_spec())

    def _align_instances(self) -> None:
        """Where the backend chose the node IPs, seed the instances again with them (same
        ids), and give nodes that still have no providerID theirs."""
        if not self.capabilities.assigns_node_ips:
            return
        actual = {str(info.name): info for info in self.cluster.nodes()}
        missing = sorted(
            n.name for n in self.nodes if n.name not in actual or not actual[n.name].ip
        )
        if missing:
            raise RuntimeError(f"cluster nodes without an IP on the lab network: {missing}")
        if any(actual[n.name].ip != n.private_ip for n in self.nodes):
            before = {n.name: n.instance_id for n in self.nodes}
            self._reset_aws()
            self._seed_aws([(n.name, n.role, str(actual[n.name].ip), n.zone) for n in self.nodes])
            after = {n.name: n.instance_id for n in self.nodes}
            if after != before:
                raise RuntimeError(f"re-seeding changed the instance ids: {before} -> {after}")
            self.imds.control.reset()
            self.imds.control.set_default_instance(self.control_plane.instance_id)
        if not self.config.provider_ids:
            return
        from kubernetes import client

        core: Any = client.CoreV1Api(self.api_client())
        existing = self.config.backend == "existing"
        for node in self.nodes:
            current = core.read_node(node.name).spec.provider_id
            if not current:
                core.patch_node(node.name, {"spec": {"providerID": node.provider_id}})
                if existing:  # immutable once set: said, since nothing can take it back
                    self.cluster_changes.append(
                        f"node {node.name}: spec.providerID set to {node.provider_id} "
                        "(immutable once set)"
                    )
            elif existing and current != node.provider_id:
                log.warning(
                    "node %s keeps its providerID %s, not the lab's instance %s: the "
                    "controller will not find it in the lab's AWS",
                    node.name,
                    current,
                    node.instance_id,
                )
                self.cluster_changes.append(
                    f"node {node.name}: keeps spec.providerID {current} (not a lab instance; "
                    "the controller will not find it)"
                )

    def _finish(self) -> None:
        self._write_cloud_config()
        self.cluster.baseline()

    def _write_cloud_config(self, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        self.cloud_config_path.write_text(
            render_cloud_config(
                region=self.config.region,
                cluster_id=self.config.cluster_id,
                aws_endpoint=self.aws.url,
                extra_global=extra_global,
            ),
            encoding="utf-8",
        )
        return self.cloud_config_path

    # --- nodes (the kubelet stand-in) -------------------------------------------------------

    def registration(self, node: LabNode, **changes: Any) -> NodeRegistration:
        """How the kubelet stand-in registers ``node`` (tweak with keyword ``changes``)."""
        return self._stand_in_provider().registration(node.name, **changes)

    def reregister(self, node_name: str, /, **changes: Any) -> dict[str, Any]:
        """Register node ``node_name`` again as a kubelet started with other flags would.

        The Node (and its Lease) is deleted and created anew with ``changes`` (``ip=``,
        ``name=``, ``version=``, ``provider_id=``, ``labels=``...). Returns the new Node.
        """
        self.node(node_name)  # a lab node, or KeyError naming the lab's nodes
        return self._stand_in_provider().reregister(node_name, **changes)

    def remove_node(self, name: str) -> None:
        """Delete node ``name`` from the cluster (its instance stays)."""
        self._stand_in_provider().remove_node(name)

    def _stand_in_provider(self) -> SimProvider:
        cluster = self.cluster
        if not isinstance(cluster, SimProvider):
            raise LabNotReady(
                f"the {self.config.backend} backend has real kubelets; "
                "re-registering nodes needs the sim backend's kubelet stand-in"
            )
        return cluster

    # --- reset ----------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the freshly seeded world; the controller is stopped.

        The controller is killed, not asked to stop: everything it could clean up on the
        way out is wiped below anyway.
        """
        if self.config.aws == "real":
            raise LabNotReady(
                "a lab in a real account cannot be reset: what the controller created there is "
                "the run's until lab.down removes it (by the run's tag)"
            )
        self.stop_controller(kill=True)
        aws = self.aws
        plan = [(n.name, n.role, n.private_ip, n.zone) for n in self.nodes]
        before = {n.name: n.instance_id for n in self.nodes}
        if isinstance(aws, AwsServer) and self._seeded == tuple(plan):
            # moto as it was right after seeding this plan: the same world and ids as wiping
            # and seeding again, in one copy instead of ~30 calls
            aws.control.restore()
        else:
            self._reset_aws()
            self._seed_aws(plan)
        after = {n.name: n.instance_id for n in self.nodes}
        if after != before:
            raise RuntimeError(
                f"re-seeding {self.describe_aws()} changed the instance ids ({before} -> "
                f"{after}): the Nodes' providerIDs no longer name them; start the lab again"
            )
        self.imds.control.reset()
        self.imds.control.set_default_instance(self.control_plane.instance_id)
        self.cluster.reset_objects()
        self._write_cloud_config()
        aws.control.clear_trail()
        self.fresh = True

    # --- controller -----------------------------------------------------------------------

    def controller_spec(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
        command: ControllerCommand | None = None,
    ) -> ControllerSpec:
        """``command``: another controller build (``--controller-cmd``) instead of ours; then
        ``legacy`` and ``args`` (our controller's flags) must be empty."""
        if command is not None and (legacy or args):
            raise ValueError("--legacy-behavior and --args are our controller's flags; with "
                             "--controller-cmd write every flag into the command")  # fmt: skip
        self._controller_runs += 1
        return ControllerSpec(
            kubeconfig=self.kubeconfig_path,
            cloud_config=cloud_config or self.cloud_config_path,
            log_path=self.state_dir / f"controller-{self._controller_runs}.log",
            imds_endpoint=self.imds.url if imds else None,
            legacy=tuple(legacy),
            extra_args=tuple(args),
            command=command,
            aws_endpoint=self.aws.url,
            region=self.config.region,
            aws_credentials=self.aws_caller_credentials,
        )

    def stop_controller(self, *, kill: bool = False) -> None:
        """Stop the controller if one runs (``kill``: without letting it clean up)."""
        if self.controller is None:
            return
        if kill:
            self.controller.kill()
        self.controller.stop()
        self.controller = None

    def start_controller(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
        wait_ready: bool = True,
        command: ControllerCommand | None = None,
    ) -> ControllerProcess:
        """(Re)start the controller with these flags; waits until it is ready unless told not
        (ours: ``/readyz``; ``command``: its own readiness signal).

        With :attr:`controller_command` set (pytest ``--controller-cmd``), that build runs
        instead of ours; a call asking for our controller's flags (``legacy``, ``args``) is
        handed to :attr:`needs_our_controller`, which skips the test (pytest), says to run the
        build without them (True: conformance mode, the build stands in for them), or else
        the call is refused."""
        if command is None and self.controller_command is not None:
            if legacy or args:
                flags = " ".join([*(f"--legacy-behavior {b}" for b in legacy), *args])
                reason = (
                    f"this case runs our controller with {flags}; the build under test "
                    f"({self.controller_command.name}) takes only its own flags"
                )
                if self.needs_our_controller is None or not self.needs_our_controller(reason):
                    raise ValueError(reason)
                legacy, args = (), ()  # the build under test stands in for them
            command = self.controller_command
        self.stop_controller()
        fork = command is None and self.config.controller_launch == "fork"
        self.controller_since_seq = self.aws.trail.last_seq
        self.controller = ControllerProcess(
            self.controller_spec(
                legacy=legacy, args=args, imds=imds, cloud_config=cloud_config, command=command
            ),
            launcher=controller_launcher() if fork else None,
        )
        self.controller.start(wait_ready=wait_ready)
        return self.controller

    def settle(self, timeout: float = 30.0) -> int:
        """Wait until every in-lab component has caught up with the API and has nothing left
        to do now (``lab.settle``): the sim's kubelet stand-in and data plane (informers,
        scheduler, workload, endpoint, EndpointSlice, node-lifecycle and GC controllers, the
        kubelet's pod half, the event writer; the kube-proxy model reads their informers), the
        ELB and NLB health models, and the metadata service (which forgets its instance cache,
        so its next answer reads EC2 as it is now). On kind the cluster's components are real
        and not covered: wait for their evidence. The controller under test is never covered.
        Returns the rounds it took; ``lab.settle.SettleTimeout`` names who did not settle."""
        if self._imds is not None:
            self._imds.forget_cache()
        return settle(self._reporters, clock=self.clock, timeout=timeout, heads=self._heads)

    def _reporters(self) -> list[Reporter]:
        found: list[Reporter] = list(self.cluster.reporters())
        if isinstance(self._aws, AwsServer):
            found.append(self._aws.lab)
        return found

    def _heads(self) -> dict[tuple[str, str], int]:
        cluster = self._cluster
        return cluster.heads.snapshot() if isinstance(cluster, SimProvider) else {}

    def set_clock_speed(self, speed: float) -> float:
        """Run the lab clock at ``speed`` lab seconds per real second from now on (every timed
        stand-in and the ELB's health checks follow); returns the speed it had. Lab time stays
        continuous and timestamps already written keep their lab age (``lab.clock``)."""
        clock = self.clock
        if not isinstance(clock, ScaledClock):
            raise TypeError(f"the lab clock {clock!r} has no speed to set")
        before = clock.speed
        clock.speed = speed
        return before

    def write_cloud_config(self, *, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        """Rewrite the cloud config (e.g. ``ElbSecurityGroup``); restart the controller after."""
        return self._write_cloud_config(extra_global)

    # --- accessors ------------------------------------------------------------------------

    @property
    def cluster(self) -> ClusterProvider:
        if self._cluster is None:
            raise LabNotReady("the lab is not started (call start() first)")
        return self._cluster

    @property
    def capabilities(self) -> Capabilities:
        return self.cluster.capabilities()

    @property
    def aws(self) -> AwsServer | ProxiedAws:
        """The lab's AWS endpoint: its moto (``AwsServer``), or the recording proxy in front
        of a LocalStack (``ProxiedAws``); both hand out clients, ``control`` and ``trail``."""
        if self._aws is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        return self._aws

    def aws_lacks(self, *features: str) -> dict[str, str]:
        """Which of the lab's AWS ``features`` (``lab.aws.proxied.FEATURES``) this lab's
        endpoint does not have, each with the reason (empty on the lab's moto)."""
        aws = self.aws
        return aws.missing(features) if isinstance(aws, ProxiedAws) else {}

    def describe_aws(self) -> str:
        """The AWS endpoint in words (messages, skip reasons)."""
        aws = self._aws
        if isinstance(aws, ProxiedAws):
            return aws.describe
        return f"the lab's moto endpoint at {aws.url}" if aws is not None else "no AWS endpoint"

    def _reset_aws(self) -> None:
        """moto: wipe every resource. Another endpoint cannot be wiped: the proxy forgets its
        trail and faults, and the next seeding finds the topology again by its tags (creating
        only what is missing); what a test changed in the upstream beyond that stays."""
        self.aws.control.reset()

    @property
    def imds(self) -> ImdsServer:
        if self._imds is None:
            raise LabNotReady("the lab's metadata service is not running (start the lab first)")
        return self._imds

    @property
    def kube(self) -> KubeServer:
        """The embedded API simulator (sim backend)."""
        sim = self.cluster.simulator
        if sim is None:
            raise LabNotReady(f"the {self.config.backend} backend has no API simulator")
        return sim

    @property
    def kubelet(self) -> KubeletStandIn:
        """The kubelet stand-in (sim backend)."""
        kubelet = self.cluster.kubelet
        if kubelet is None:
            raise LabNotReady(
                f"the {self.config.backend} backend has no kubelet stand-in (real kubelets run)"
            )
        return kubelet

    @property
    def dataplane(self) -> SimDataPlane:
        """The sim backend's data plane: scheduler, controllers, kubelet pods, kube-proxy
        model (``lab.dataplane``)."""
        plane = self._stand_in_provider().dataplane
        if plane is None:
            raise LabNotReady("this sim lab runs without a data plane")
        return plane

    @property
    def traffic(self) -> TrafficProbe:
        """Where requests to a LoadBalancer Service go, hop by hop: modelled through the sim's
        data plane, or (real kubelets: kind) really sent to the nodes (``lab.traffic``). Each
        call settles the lab first (:meth:`settle`)."""
        return self.traffic_probe(settle=True)

    def traffic_probe(self, *, settle: bool) -> TrafficProbe:
        """:attr:`traffic`; without ``settle`` the probe models the lab as it is (the lab
        daemon settles first itself, and answers anyway if the lab does not settle)."""
        before = self.settle if settle else None
        missing = self.aws_lacks("elb-model")
        if missing:
            raise LabNotReady(f"lab.traffic needs {FEATURES['elb-model']}: {missing['elb-model']}")
        gates = AwsGates(self.aws.lab, gate=Gate)
        if self._real_nodes:
            if self._nodes_unreachable is not None:
                raise LabNotReady(
                    "lab.traffic sends real requests to the nodes, and this host cannot reach "
                    f"the node network ({self._nodes_unreachable})"
                )
            cluster = RealCluster(Api(self.api_client()), address_of=self.node_address)
            return TrafficProbe(aws=self.aws.lab, gates=gates, cluster=cluster, settle=before)
        return TrafficProbe(aws=self.aws.lab, gates=gates, dataplane=self.dataplane, settle=before)

    @property
    def _real_nodes(self) -> bool:
        return self.capabilities.real_kubelet and not self.capabilities.kubelet_stand_in

    def _node_answers(self, inst: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        """What a node answers the ELB's health checks: the sim data plane's kube-proxy (read
        anew each time: a reset replaces the data plane); without one, a running instance."""
        try:
            plane = self.dataplane
        except LabNotReady:
            return running_answers(inst, target)
        return ModelledCluster(plane).answer_health_check(inst, target)

    @property
    def settles_cluster(self) -> bool:
        """True where :meth:`settle` covers the cluster's own components (sim: once it returns,
        kube-proxy's and the controllers' informers have seen every change, so one look is the
        answer); on kind their absence of reaction can only be observed over a window."""
        return bool(self.cluster.reporters())

    @property
    def has_kubelet_stand_in(self) -> bool:
        """True where nodes can be re-registered, made NotReady, removed at will (sim)."""
        return self.capabilities.kubelet_stand_in

    @property
    def kubeconfig_path(self) -> Path:
        return self.cluster.kubeconfig()

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
        return self.cluster.api_client()

    def take_internal_errors(self) -> dict[str, list[str]]:
        """Exceptions any component caught while serving since the last call, by component
        (empty lists left out). A test fixture fails the test that caused them."""
        found = {
            "AWS endpoint": self.aws.take_internal_errors(),
            "metadata service": self.imds.take_internal_errors(),
            "cluster": self.cluster.take_internal_errors(),
        }
        return {k: v for k, v in found.items() if v}

    def state(self, directory: Path) -> LabState:
        """The ``state.json`` document for this lab (no daemon or controller yet)."""
        topo = self.topology
        return LabState(
            name=self.config.name,
            backend=self.config.backend,
            k8s_version=str(self.version),
            directory=str(directory),
            kubeconfig=str(self.kubeconfig_path),
            cloud_config=str(self.cloud_config_path),
            aws_endpoint=self.aws.url,
            imds_endpoint=self.imds.url,
            kube_endpoint=self.cluster.api_url(),
            token=self.token,
            aws_credentials=self.aws_caller_credentials,
            region=self.config.region,
            cluster_id=self.config.cluster_id,
            vpc_id=topo.vpc_id if topo else None,
            node_security_group=topo.node_security_group.group_id if topo else None,
            nodes=node_states(self.nodes),
            aws=self.config.aws,
            aws_upstream=self.aws.upstream if isinstance(self.aws, ProxiedAws) else None,
            localstack_container=self.localstack_container,
            cluster_changes=tuple(self.cluster_changes),
        )


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; raise ``TimeoutError`` naming it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or predicate!r}")
